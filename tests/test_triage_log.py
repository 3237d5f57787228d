"""scripts/triage_log.py end to end, in subprocesses: text within 100 columns, JSON, releases from flags, a report or
the log, standard input, unknown failures, bad input (exit 2, one line, no traceback) and secret scrubbing."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from triage import match

from conftest import REPORT_HEAD, with_bytecode_cache
from triage_helpers import OOM, SCRIPT, interleave, run_triage, watchdog, write

FIXTURE = Path(__file__).parent / "fixtures" / "triage" / "oom-8-ranks.log"


def test_text_report_names_root_entry_echoes_and_next_command() -> None:
    run = run_triage([str(FIXTURE)])
    assert run.code == 0, run.stderr
    out = run.stdout
    assert all(len(line) <= 100 for line in out.splitlines()), [x for x in out.splitlines() if len(x) > 100]
    assert out.startswith("triage: root failure (known)")
    assert "oom-8-ranks.log:127, rank 5" in out
    assert "tried to allocate 2.00 GiB; total 79.15 GiB; free 1.23 GiB" in out
    assert 'troubleshooting/memory-and-parallelism.md "Trainer OOM' in out
    assert "next (a template" in out and "scripts/plan_training.py" in out
    assert "[watchdog timeout] 7x, ranks 0-4, 6-7" in out
    assert "trl 1.12.0 (" in out and "rank 5 on node-1, exitcode 1" in out


def test_json_report() -> None:
    run = run_triage([str(FIXTURE), "--json"])
    report = json.loads(run.stdout)
    assert report["verdict"] == "known"
    assert report["root"]["first"]["line"] == 127 and report["root"]["ranks"] == [5]
    assert report["root"]["oom"]["reserved"] == "1.50 GiB"
    assert report["entry"]["file"] == "troubleshooting/memory-and-parallelism.md"
    assert report["releases"]["trl"]["version"] == "1.12.0"
    assert report["echoes"][0]["kind"] == "watchdog timeout"
    assert report["torchelastic_root"]["rank"] == 5
    assert report["root"]["excerpt"][-1]["line"] == 127


def _dev_mode_log(tmp_path: Path) -> Path:
    line = (
        "ValueError: The vLLM server at http://10.1.2.3:8000 does not expose its development endpoints, which TRL "
        "uses to synchronize weights. Restart it with VLLM_SERVER_DEV_MODE=1."
    )
    return write(tmp_path / "rank0.log", f"noise\n{line}\n")


def test_releases_from_flags_pick_the_variant(tmp_path: Path) -> None:
    log = _dev_mode_log(tmp_path)
    older = json.loads(run_triage([str(log), "--trl", "1.12.0", "--json"]).stdout)
    assert older["entry"]["heading"] == "Server lacks dev mode"
    assert older["variant"]["status"] == "variant" and older["variant"]["label"] == "TRL 1.11–1.15"
    assert older["releases"]["trl"] == {"version": "1.12.0", "from": "--trl"}
    current = json.loads(run_triage([str(log), "--trl", "1.16.0", "--vllm", "0.31.0", "--json"]).stdout)
    assert current["variant"]["status"] == "holds"
    assert "http://10.1.2.3:8000" in current["next"]
    old = run_triage([str(log), "--trl", "1.5.1"]).stdout
    assert "written for TRL 1.16, not TRL 1.5.1: read troubleshooting/release-history.md" in old


def test_releases_from_a_diagnostic_report(tmp_path: Path) -> None:
    log = _dev_mode_log(tmp_path)
    report = write(
        tmp_path / "report.json", json.dumps({**REPORT_HEAD, "packages": {"trl": {"version": "1.13.2"}, "vllm": {}}})
    )
    data = json.loads(run_triage([str(log), "--report", str(report), "--json"]).stdout)
    assert data["releases"]["trl"] == {"version": "1.13.2", "from": "--report"}
    assert data["variant"]["label"] == "TRL 1.11–1.15"


def test_standard_input_with_rank_prefixes() -> None:
    per_rank = {r: [watchdog(r)] for r in range(8) if r != 2}
    per_rank[2] = ["Traceback (most recent call last):", '  File "train.py", line 3', OOM.replace("GPU 5", "GPU 2")]
    run = run_triage(["--json"], stdin=interleave(per_rank))
    report = json.loads(run.stdout)
    assert report["root"]["ranks"] == [2] and report["root"]["first"]["file"] == "<stdin>"
    assert report["echoes"][0]["ranks"] == [0, 1, 3, 4, 5, 6, 7]


def test_unknown_failure_prints_the_excerpt(tmp_path: Path) -> None:
    log = write(
        tmp_path / "x.log",
        'step 1\nTraceback (most recent call last):\n  File "a.py", line 1, in f\n    g()\n'
        "ZeroDivisionError: division by zero in the reward function\n",
    )
    run = run_triage([str(log)])
    assert "root failure (unknown" in run.stdout
    assert "excerpt:" in run.stdout and '\n        3    File "a.py", line 1, in f\n' in run.stdout
    assert "\n    grep -rn -F 'division by zero in the reward function' \\\n" in run.stdout
    assert json.loads(run_triage([str(log), "--json"]).stdout)["verdict"] == "unknown"


def test_the_printed_commands_run_as_printed_from_another_folder(tmp_path: Path) -> None:
    """The next command and the index search name the skill's files by absolute path: run from an empty folder,
    exactly as printed (continuation lines and all), they work."""
    log = write(
        tmp_path / "x.log",
        "Traceback (most recent call last):\nValueError: generation_batch_size (12) must be divisible by "
        "num_generations (8).\n",
    )
    unknown = write(tmp_path / "y.log", "Traceback (most recent call last):\nKeyError: the widget has no sprocket\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for path, what in ((log, "next"), (unknown, "  (it reads the installed releases), then search the index:")):
        lines = run_triage([str(path)]).stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(what)) + 1
        command = [lines[start]]
        while command[-1].endswith("\\"):
            command.append(lines[start + len(command)])
        script = "\n".join(command).replace("<config.yaml>", str(tmp_path / "missing.yaml"))
        script = script.replace("<trainer processes>", "2")
        done = subprocess.run(["bash", "-c", script], cwd=elsewhere, capture_output=True, text=True, timeout=60)
        assert "No such file or directory" not in done.stderr + done.stdout, script
        assert "can't open file" not in done.stderr, script


def test_a_long_command_is_cut_with_continuations_never_inside_a_word() -> None:
    from triage.render import command_lines

    command = (
        "python3 scripts/plan_training.py --params <size> --method lora --trainer grpo --gpus <N> --gpu-memory-gib "
        "<G> --vllm-mode colocate --vllm-gpu-memory-utilization <u> --require-fit"
    )
    lines = command_lines(command)
    assert len(lines) == 2 and all(len(line) <= 100 for line in lines)
    assert lines[0].endswith(" \\")
    assert " ".join(line.rstrip(" \\").strip() for line in lines) == command


def test_no_failure(tmp_path: Path) -> None:
    log = write(tmp_path / "x.log", "step 1\nstep 2\n")
    run = run_triage([str(log), "--json"])
    assert run.code == 0 and json.loads(run.stdout)["verdict"] == "no_failure"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{tmp}/missing.log"], "no such file"),
        (["{tmp}"], "a directory"),
        (["{tmp}/ok.log", "--trl", "latest"], "--trl must be a release number"),
        (["{tmp}/ok.log", "--report", "{tmp}/ok.log"], "not valid JSON"),
        (["{tmp}/ok.log", "--report", "{tmp}/list.json"], "not a check_optional_backends.py --json report"),
        (["{tmp}/ok.log", "--max-mib", "0"], "--max-mib"),
        (["-", "-"], "standard input"),
    ],
)
def test_bad_input_is_a_usage_error(tmp_path: Path, args, says: str) -> None:
    write(tmp_path / "ok.log", "ValueError: x\n")
    write(tmp_path / "list.json", "[1, 2]")
    run = run_triage([a.format(tmp=tmp_path) for a in args])
    assert run.code == 2, (run.stdout, run.stderr)
    assert says in run.stderr and "Traceback" not in run.stderr


def test_secrets_in_the_log_are_not_printed(tmp_path: Path) -> None:
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7"
    log = write(tmp_path / "x.log", f"Traceback (most recent call last):\nValueError: bad token={token} for {token}\n")
    for flags in ([], ["--json"]):
        run = run_triage([str(log), *flags])
        assert token not in run.stdout and token[3:15] not in run.stdout
        assert "<redacted>" in run.stdout


CPU_LION = (
    "[rank0]: deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided "
    "optimizer (<class 'deepspeed.ops.lion.cpu_lion.DeepSpeedCPULion'>) which in most cases will yield poor "
    "performance.\n"
)


def test_upstream_fixes_after_the_given_release_follow_the_entry(tmp_path: Path) -> None:
    """The log names no DeepSpeed release (the triage reads TRL and vLLM from --report): every matching fix is
    listed, with a note saying so."""
    log = write(tmp_path / "train.log", CPU_LION)
    run = run_triage([str(log), "--json"])
    fixes = json.loads(run.stdout)["upstream_fixes"]
    assert (fixes["fixes"][0]["package"], fixes["fixes"][0]["pr"], fixes["fixes"][0]["release"]) == (
        "deepspeed",
        7531,
        "0.17.6",
    )
    assert len(fixes["fixes"]) <= 3 and fixes["moves"][0]["command"].endswith("--keep 'deepspeed>=0.17.6'")
    text = run_triage([str(log)]).stdout
    assert "upstream fixes after your release" in text and "deepspeed 0.17.6: fixed DeepSpeedCPULion" in text
    assert "no deepspeed release given" in text
    assert max(len(line) for line in text.splitlines() if "plan_install" not in line) <= 100
    # a release that already ships every matching fix: no section
    newer = run_triage([str(log), "--json", "--trl", "1.9.0"], env={})
    assert json.loads(newer.stdout)["upstream_fixes"] is not None  # deepspeed's release is unknown: all matches


@pytest.mark.parametrize(
    ("trl", "label", "says"),
    [("1.12.0", "TRL 1.11–1.16", "the trainer is rank 0"), ("1.9.0", "TRL ≤ 1.10", "the trainer connects to it")],
)
def test_a_weight_sync_socket_failure_names_its_entry_and_the_side_per_release(
    tmp_path: Path, trl: str, label: str, says: str
) -> None:
    """NCCL's connect failure in the server log of a two-host server-mode run (in process: the pipeline itself)."""
    from triage.inputs import Request
    from triage_log import triage

    log = tmp_path / "vllm-server.log"
    log.write_text(
        "INFO 05-01 12:00:01 [api_server.py:1] vLLM API server version 0.27.1\n"
        "(Worker pid=311) gpu-b:311:402 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
        "192.168.7.21<52117> failed : Connection refused\n",
        encoding="utf-8",
    )
    report = triage(Request((str(log),), {"trl": trl}, {"trl": "--trl"}, True, False, 1 << 20))
    assert report["verdict"] == "known"
    assert report["entry"]["file"] == "troubleshooting/multi-node.md"
    assert report["entry"]["heading"] == "Weight sync cannot connect between trainer and server hosts"
    assert report["variant"]["label"] == label and says in report["variant"]["text"]


@pytest.mark.serial
def test_endless_standard_input_stops_at_the_deadline_and_says_so() -> None:
    """An endless pipe of error lines ran minutes before the byte cap stopped it."""
    env = with_bytecode_cache(dict(os.environ), sys.executable)
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--json", "--deadline", "0.5"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    line = b"[rank3]:ValueError: reward worker lost, retrying step\n" * 1000

    def feed() -> None:
        with contextlib.suppress(OSError, ValueError):
            while child.poll() is None:
                child.stdin.write(line)

    writer = threading.Thread(target=feed, daemon=True)
    start = time.monotonic()
    writer.start()
    out = child.stdout.read()  # until the command ends; the pipe stays open and full all along
    err = child.stderr.read()
    child.wait(timeout=30)
    assert time.monotonic() - start < 10
    report = json.loads(out)
    assert report["sources"][0]["stopped"] == "time" and report["sources"][0]["truncated"], err
    assert report["root"]["ranks"] == [3]


def test_utf16_log_from_powershell(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"\xff\xfe" + "step 1\r\nZeroDivisionError: division by zero here\r\n".encode("utf-16-le"))
    run = run_triage([str(log)])
    assert "root failure (unknown" in run.stdout and "ZeroDivisionError: division by zero here" in run.stdout
    assert "decoded as UTF-16" in run.stdout


def test_the_printed_grep_finds_the_line_and_holds_no_secret(tmp_path: Path) -> None:
    """The index search is built from the scrubbed line: run against the log itself, exactly as printed, it finds
    the failure line; a scrubbed key is never part of it."""
    token = "hf_" + "abcdefghijklmnopqrstuvwx"
    log = write(
        tmp_path / "x.log",
        "Traceback (most recent call last):\n"
        f"PermissionError: the hub's gate rejected {token} as an invalid credential; can't go on\n",
    )
    lines = run_triage([str(log)]).stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  (it reads the installed releases)")) + 1
    command = [lines[start]]
    while command[-1].endswith("\\"):
        command.append(lines[start + len(command)])
    script = "\n".join(command)
    assert token[3:11] not in script and "redacted" not in script
    folder = shlex.quote(str(Path(match.SKILL_DIR) / "troubleshooting")) + "/"
    assert folder in script
    done = subprocess.run(["bash", "-c", script.replace(folder, shlex.quote(str(log)))], capture_output=True, text=True)
    assert done.returncode == 0 and "PermissionError" in done.stdout, (script, done.stderr)


def test_a_key_across_the_cut_of_a_long_line_is_not_printed(tmp_path: Path) -> None:
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7xY"
    log = write(tmp_path / "x.log", "ValueError: " + "y " * 990 + token + " z" * 400 + "\n")
    for flags in ([], ["--json"]):
        run = run_triage([str(log), *flags])
        assert run.code == 0 and "hf_a" not in run.stdout and token[3:11] not in run.stdout


def test_a_release_newer_than_the_recorded_matrix_is_named(tmp_path: Path) -> None:
    log = _dev_mode_log(tmp_path)
    text = run_triage([str(log), "--trl", "9.1.0"]).stdout
    [line] = [line for line in text.splitlines() if "recorded matrix" in line]
    assert line.startswith("  TRL 9.1.0 is newer than the recorded matrix (") and len(line) <= 100
    data = json.loads(run_triage([str(log), "--trl", "9.1.0", "--json"]).stdout)
    assert "newer than the recorded matrix (" in data["releases"]["trl"]["newer_than_recorded"]

"""scripts/common/output.py: secrets scrubbed by value and shape (not short common values), control characters
escaped, strict JSON, 100-column text, and the CLI runner (closed pipe, crash exit code, progress on TTY only)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest
from common.output import (
    REDACTED,
    Scrubber,
    clean_tree,
    clip,
    dumps_strict,
    escape_controls,
    fit_width,
    progress,
    run_cli,
    scrub,
)

from conftest import SCRIPTS_DIR

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
SECRET_SHAPES = {
    "hf": f"HF_TOKEN={HF}",
    "ghp": "NCCL_IB_HCA=ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "gho": "x gho_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github_pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "sk": "NCCL_SOCKET_IFNAME=sk-live-" + "abcdefghijklmnopqrstuvwx",
    "aws": "key AKIA" + "ABCDEFGHIJKLMNOP",
    "slack": "xoxb-" + "123456789012-abcdefghijkl",
    "jwt": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "bearer": "Authorization: Bearer " + "abc123def456ghi",
    "token-param": "mlx5_0,token=" + "s3cr3tvalue",
    "query-token": "http://host/x?token=" + "abcdef&y=1",
    "password-param": "password=" + "hunter2!",
    "secret-param": "secret=" + "zzz",
}


@pytest.mark.parametrize("text", list(SECRET_SHAPES.values()), ids=list(SECRET_SHAPES))
def test_token_shapes_and_secret_params_are_scrubbed(text: str) -> None:
    secret = text.split("=", 1)[-1].split(" ")[-1].split("token=")[-1]
    secret = secret.replace("Bearer ", "").split("&")[0]
    out = scrub(text)
    assert REDACTED in out
    assert secret not in out


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("https://user:pass@host:29500/x", "user:pass"),
        ("HTTP://USER:PASS@HOST", "USER:PASS"),
        ("https://user:p@ss@host/x", "p@ss"),
        ("http://user:pa/ss@host:29500", "pa/ss"),
        ("user:pass@host:29500", "user:pass"),
        ("MASTER_ADDR=root:s3cr3t!#@10.0.0.1", "s3cr3t"),
        ("https://hf_user_only@huggingface.co", "hf_user_only"),
    ],
)
def test_url_userinfo_is_scrubbed_in_any_form(text: str, hidden: str) -> None:
    out = scrub(text)
    assert hidden not in out and REDACTED + "@" in out


@pytest.mark.parametrize(
    "text",
    [
        "CACHE_KEY=3.11",
        "SSH_AUTH_SOCK=/root",
        "Python 3.11.7",
        "key=3.11",
        "git@github.com:org/repo.git",
        "me@example.com",
        "--auth-env HF_TOKEN",
        '"auth_env": "HF_TOKEN"',
        "max_tokens: 4096",
        "sent as 'Authorization: Bearer <token>'",
        "a bearer token for the servers",
        "desk-top task-specific",
    ],
)
def test_short_common_values_are_left_alone(text: str) -> None:
    assert scrub(text) == text


def test_registered_secret_and_its_fragments_and_escaped_forms() -> None:
    scrubber = Scrubber()
    token = 'tok"en\\9-' + "Q" * 30 + "-é"
    scrubber.add(token)
    for form in (
        token,
        json.dumps(token)[1:-1],
        json.dumps(token, ensure_ascii=False)[1:-1],
        repr(token)[1:-1],
        token[:12],  # a prefix left by a truncated snippet
        token[5:20],
    ):
        out = scrubber(f"starts {form!s} end")
        assert out.startswith("starts ") and out.endswith(" end")
        assert "QQQQQQQQ" not in out and "9-QQ" not in out, out
    assert scrubber("nothing here") == "nothing here"
    short = Scrubber()
    short.add("abc")  # too short to scrub safely
    assert short("abc abc") == "abc abc"


def test_scrub_runs_after_truncation_in_clip() -> None:
    line = "nvidia-smi: error: bad key sk-" + "a" * 40
    out = clip(line, 40)
    assert "aaaaaaaa" not in out and len(out) <= 40


def test_control_characters_are_escaped() -> None:
    forged = "ok\x1b[2K\rVerdict: OK\nline\u202egnp.exe\x85\x00"
    out = escape_controls(forged)
    assert all(ch not in out for ch in "\x1b\r\n\u202e\x85\x00")
    assert "\\x1b" in out and "\\r" in out and "\\u202e" in out
    assert escape_controls("a\nb", keep_newlines=True) == "a\nb"
    assert clean_tree({"k\r": ["v\x1b"]}) == {"k\\r": ["v\\x1b"]}


def test_strict_json() -> None:
    value = {"nan": float("nan"), "inf": [float("inf")], 1: b"raw", "set": {2, 1}, "ok": 1.5}
    text = dumps_strict(value)
    parsed = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard constant {name}"))
    assert parsed == {"nan": None, "inf": [None], "1": "<3 bytes>", "set": [1, 2], "ok": 1.5}
    assert text.isascii()


def test_fit_width_wraps_to_100_columns() -> None:
    text = "    " + "word " * 60 + "\n" + "x" * 250 + "\nshort"
    out = fit_width(text)
    assert all(len(line) <= 100 for line in out.splitlines())
    assert out.splitlines()[1].startswith("        word")
    assert out.splitlines()[-1] == "short"
    assert out.replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")


# --- the CLI runner ------------------------------------------------------------------------------------------------


def _run_main(body: str, *args: str, stdin_closed: bool = False) -> subprocess.CompletedProcess:
    code = (
        f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r})\n"
        "from common.output import run_cli, emit\n"
        f"def main(argv):\n{body}\n"
        "sys.exit(run_cli(main, 'prog'))\n"
    )
    return subprocess.run([sys.executable, "-B", "-c", code, *args], capture_output=True, text=True, timeout=30)


def test_runner_turns_a_crash_into_one_line_and_exit_2() -> None:
    result = _run_main("    raise KeyError('boom ' + 'hf_' + 'A' * 30)")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prog: internal error: KeyError")
    assert "Traceback" not in result.stderr and "AAAAAAAA" not in result.stderr


def test_runner_keeps_usage_exit_codes_and_scrubs_everything_printed() -> None:
    result = _run_main("    print('token=' + 'x' * 12); sys.stderr.write('ghp_' + 'B' * 30 + '\\n'); return 1")
    assert result.returncode == 1
    assert "xxxxxxxx" not in result.stdout and "BBBBBBBB" not in result.stderr
    usage = _run_main("    import argparse; argparse.ArgumentParser(prog='prog').parse_args(['--nope'])")
    assert usage.returncode == 2 and "unrecognized arguments" in usage.stderr


def test_runner_ends_quietly_on_a_closed_pipe() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r})\n"
        "from common.output import run_cli, emit\n"
        "def main(argv):\n"
        "    for _ in range(2000):\n"
        "        print('line ' * 40)\n"
        "    return 0\n"
        "sys.exit(run_cli(main, 'prog'))\n"
    )
    pipeline = f'{sys.executable} -B -c "$CODE" | head -1'
    result = subprocess.run(
        ["bash", "-c", pipeline], env={"CODE": code, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert result.stdout.startswith("line ")
    assert result.stderr == ""


def test_progress_only_on_a_tty_and_only_past_the_threshold() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    with progress("probing torch", after_s=0.2, stream=tty):
        time.sleep(0.5)
    assert "probing torch..." in tty.getvalue() and tty.getvalue().endswith("\r\x1b[K")
    quick = Tty()
    with progress("quick", after_s=0.5, stream=quick):
        pass
    assert quick.getvalue() == ""
    pipe = io.StringIO()
    with progress("probing torch", after_s=0.1, stream=pipe):
        time.sleep(0.3)
    assert pipe.getvalue() == ""


def test_run_cli_in_process_restores_streams() -> None:
    before = sys.stdout
    assert run_cli(lambda argv: 0, "prog", []) == 0
    assert sys.stdout is before


def test_help_formatter_wraps_prose_at_the_width_and_keeps_examples_whole(monkeypatch) -> None:
    """argparse help through the shared formatter: option help and unindented prose fit WIDTH on a wide terminal,
    and an indented example line (a command to paste) is never broken."""
    import argparse

    from common.output import WIDTH, HelpFormatter

    monkeypatch.setenv("COLUMNS", "250")
    example = "  python3 scripts/x.py " + " ".join(f"--flag-{i} value" for i in range(12)) + " \\"
    parser = argparse.ArgumentParser(
        prog="x.py",
        description="word " * 60,
        epilog="usage notes:\n" + example,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--long-option", help="help text " * 30)
    lines = parser.format_help().splitlines()
    assert example in lines
    assert all(len(line) <= WIDTH for line in lines if line != example)
    assert any(line.startswith("word word") for line in lines)


def test_help_formatter_reflows_a_table_cell_under_its_text_column(monkeypatch) -> None:
    """A table row hard-wrapped past WIDTH in the source is reflowed: the label and its gap stay, every continuation
    starts at the text column, and the next row starts a new cell."""
    import argparse

    from common.output import WIDTH, HelpFormatter

    monkeypatch.setenv("COLUMNS", "250")
    row = "    DDP / 1 GPU   " + "weights and grads " * 6 + "(torch DistributedDataParallel buckets)"
    epilog = "\n".join([row, " " * 18 + "continued after the margin " * 2, "    ZeRO-2        2P + 18P/N"])
    parser = argparse.ArgumentParser(prog="x.py", epilog=epilog, formatter_class=HelpFormatter)
    lines = parser.format_help().splitlines()
    cell = lines[lines.index(next(line for line in lines if line.startswith("    DDP / 1 GPU   weights"))) :]
    assert all(len(line) <= WIDTH for line in lines)
    assert all(line.startswith(" " * 18) and line[18] != " " for line in cell[1:-1])
    assert " ".join(line.strip() for line in cell[:-1]).endswith("the margin continued after the margin")
    assert cell[-1] == "    ZeRO-2        2P + 18P/N"


@pytest.mark.parametrize(
    "script",
    [
        "check_optional_backends",
        "check_vllm_server",
        "compare_nodes",
        "plan_training",
        "plan_install",
        "triage_log",
        "find_fix",
    ],
)
def test_every_command_help_fits_the_width_on_a_wide_terminal(script: str) -> None:
    from common.output import WIDTH

    env = {"COLUMNS": "250", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(SCRIPTS_DIR / f"{script}.py"), "--help"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > WIDTH]
    assert not wide, wide[:3]


# --- issue 21: secrets by value whatever their shape, scrub before wrapping, time linear in the input -------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("VLLM_API_KEY=JBSWY3DPEHPK3PXPQ7RZ2M4NW6", "JBSWY3DPEHPK3PXPQ7RZ2M4NW6"),  # upper case and digits
        ("NCCL_IB_AUTH_KEY=84729103657482019376", "84729103657482019376"),  # digits only
        ("password: hunter2x9", "hunter2x9"),
        ("vllm serve m --api-key s3cr3tValue9 --port 8000", "s3cr3tValue9"),
        ("--hf-token 'abcdef123456'", "abcdef123456"),
        ("HTTPS_PROXY=http://user:pass word9z@proxy:3128", "word9z"),
    ],
)
def test_secrets_of_any_shape_in_secret_named_places_are_scrubbed(text: str, secret: str) -> None:
    assert secret not in scrub(text) and REDACTED in scrub(text)


@pytest.mark.parametrize(
    "text",
    ["--auth-env SERVER_TOKEN", "--tokenizer meta-llama/Llama-3-8B", "time: 12:30:45", "http://host:8080/x?a=1"],
)
def test_names_and_plain_values_next_to_secret_words_stay(text: str) -> None:
    assert scrub(text) == text


def test_text_is_scrubbed_before_it_is_wrapped() -> None:
    """A key longer than the line used to be cut by the wrap, and neither half matched its shape afterwards."""
    key = "sk-proj-" + "A1b2C3d4" * 20
    wrapped = fit_width(f"main_process_ip: https://x:{'p' * 30}@host  api {key}")
    assert "A1b2C3d4" not in wrapped and "ppppppppp" not in wrapped
    assert all(len(line) <= 100 for line in wrapped.splitlines())


def _per_byte(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fit_width(text)
        best = min(best, (time.perf_counter() - start) / repeat)
    return best / len(text)


@pytest.mark.serial
@pytest.mark.parametrize(
    "unit",
    ["a" * 50 + " @", "eyJ_", "ab@", "eyJaaaaaaaaaaaa.", "x=y ", "'a'", "http://u:", "token=" + "Z" * 30 + "@"],
    ids=["run-with-at", "jwt-run", "many-at", "jwt-segments", "assignments", "quotes", "schemes", "token-at"],
)
def test_scrub_and_wrap_are_linear_1mb_against_1kb(unit: str) -> None:
    """Time per byte on 1 MB within 8x of that on 1 kB (a quadratic pattern is 1000x): the userinfo rule once
    backtracked over every character of a long run when an "@" was anywhere, and so did a long eyJ_ run."""
    small = (unit * (1000 // len(unit) + 1))[:1000]
    large = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    assert _per_byte(large, 1) < 8 * _per_byte(small, 200)


@pytest.mark.parametrize("mark", ["\u200b", "\u2060", "\u061c", "\u200d", "\u2066"])
def test_zero_width_and_bidi_marks_are_escaped(mark: str) -> None:
    """Two values that differ only by an invisible mark must not look identical in a report."""
    shown = escape_controls(f"eth{mark}0")
    assert mark not in shown and f"\\u{ord(mark):04x}" in shown


# --- issue 27, round 3: secrets by value, before serialisation, in every form; linear in the input ---------------


def _forms():
    from hostile_helpers import secret_forms

    return secret_forms("unit")


@pytest.mark.parametrize("index", range(14))
def test_every_secret_form_is_scrubbed_in_text_and_in_json(index: int) -> None:
    """Each form (tests/hostile_helpers.secret_forms) leaves no 8-character fragment in scrubbed text, in
    dumps_strict's JSON (which must parse) nor in a value given under a secret key or after a secret flag."""
    from hostile_helpers import fragments

    text, secrets = _forms()[index]
    for shown in (scrub(text), dumps_strict({"v": text, text: [text]}), clean_tree({"k": f"see {text}"})["k"]):
        leaked = [piece for secret in secrets for piece in fragments(secret) if piece in str(shown)]
        assert not leaked, (text, shown)
    assert json.loads(dumps_strict({"v": text}))["v"].count(REDACTED) >= 1


def test_json_is_scrubbed_by_value_and_stays_strict() -> None:
    """A quoted or escaped secret inside a value is found before serialisation; the document always parses."""
    value = 'ab"cd\\' + "Q7w" * 6
    tree = {
        "cmd": ["vllm", "serve", "--api-key", value, "--port", "8000"],
        "env": {"WANDB_API_KEY": "k9" + "Zx8" * 6, "CACHE_KEY": "3.11", "auth_env": "HF_TOKEN", "key": "a-finding"},
        "line": f'password="{value}" next',
        "hf_" + "A" * 30: "a key that is a token",
    }
    text = dumps_strict(tree)
    data = json.loads(text)
    assert "Q7wQ7wQ7" not in text and "Zx8Zx8Zx" not in text
    assert data["cmd"] == ["vllm", "serve", "--api-key", REDACTED, "--port", "8000"]
    assert data["env"]["CACHE_KEY"] == "3.11" and data["env"]["auth_env"] == "HF_TOKEN"
    assert data["env"]["key"] == "a-finding" and REDACTED in data
    assert isinstance(text, str) and text.endswith("\n")


def test_scrubbed_json_is_not_scrubbed_again_on_its_way_out() -> None:
    """dumps_strict's text passes emit and run_cli's stream unchanged (a text pass could break its structure)."""
    from common.output import ScrubbedText, emit

    out = io.StringIO()
    document = dumps_strict({"v": 'password=x\\"y'})
    assert isinstance(document, ScrubbedText)
    emit(document, out)
    assert out.getvalue() == document
    json.loads(out.getvalue())


def test_suggested_command_words_are_scrubbed_before_quoting() -> None:
    from common.output import shell_word

    word = shell_word("/opt/Command '['x', '--api-key', 'Zq8Lm3Rt7Wx2Vb9N']'/python")
    assert "Zq8Lm3Rt" not in word and REDACTED in word


@pytest.mark.parametrize(
    "text",
    ["keyJSONParser.parse", "monkeyJarFile12.json", "eyJ_" * 4, "/usr/lib/X11R6Fonts", "max_tokens: 4096"],
)
def test_jwt_and_aws_rules_leave_look_alikes(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.serial
def test_scrubber_cpu_time_is_linear_on_1mb_values() -> None:
    """1 MB values cost under 1 s of CPU each through scrub and dumps_strict, with a secret registered (its
    fragments are looked for too): one long word, a run of '=', then 100 kB runs of ten shapes in one value (runs
    of '=', ':', '-', name=value chains, URL credentials, JWT-like runs, secret flags, quoted values, base64).
    A quadratic rule costs minutes here: a 120 kB environment variable once cost the diagnostic 14.7 CPU-s."""
    import base64
    import os

    size, part = 1_000_000, 100_000
    units = [":", "-", "key=" * 3 + " ", "http://u:p@", "token_eyJ-", "--api-key ", "password=\"x '", "a: b=", "/+"]
    mixed = "".join((unit * (part // len(unit) + 1))[:part] for unit in units)
    mixed += base64.b64encode(os.urandom(part)).decode()[:part]
    scrubber = Scrubber()
    scrubber.add("Zq8Lm3Rt7Wx2Vb9N" * 3)
    for text in ("a" * size, "=" * size, mixed):
        start = time.process_time()
        scrubber(text)
        dumps_strict({"v": text})
        spent = time.process_time() - start
        assert spent < 2 * len(text) / size, (text[:20], spent)  # scrub and dumps_strict: under 1 s each


def test_a_secret_registered_after_a_text_was_scrubbed_is_hidden_in_that_text_too() -> None:
    """Short texts are remembered once scrubbed; registering a secret forgets them, so none is answered stale."""
    scrubber = Scrubber()
    text = "launch key=s3cr3tvalue-not-a-shape"
    assert scrubber(text) == scrubber(text)  # remembered
    plain = "run 42 holds Zq9wXv7tPl2m inside"
    assert scrubber(plain) == plain
    scrubber.add("Zq9wXv7tPl2m")
    assert "Zq9wXv7tPl2m" not in scrubber(plain)
    long_text = "x" * 300 + " Zq9wXv7tPl2m"
    assert "Zq9wXv7tPl2m" not in scrubber(long_text)  # past the remembered length: scrubbed every time

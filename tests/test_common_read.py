"""scripts/common/read.py: regular files only, never blocking, byte caps with a truncation flag, subprocess output
capped and deadlined with the process group killed, also when started early and read later (HTTP:
test_common_http.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from common.read import InputError, read_bytes, read_text, read_text_or_none, run_capped

# --- files ---------------------------------------------------------------------------------------------------------


def test_regular_file_is_read_with_a_cap_and_a_truncation_flag(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"abcdef")
    assert read_bytes(str(path), 100).data == b"abcdef" and not read_bytes(str(path), 100).truncated
    capped = read_bytes(str(path), 4)
    assert capped.data == b"abcd" and capped.truncated
    assert read_bytes(str(path), 6).truncated is False  # exactly at the cap is whole
    with pytest.raises(InputError, match="larger than 4 bytes"):
        read_text(str(path), 4)


@pytest.mark.serial
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(InputError) as info:
        read_bytes(str(fifo))
    assert "FIFO" in info.value.reason
    assert time.monotonic() - started < 1.0
    assert read_text_or_none(str(fifo)) is None


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.mkdir(), "directory"),
        (lambda p: None, "no such file"),
        (lambda p: (p.symlink_to(p.with_name("loop2")), p.with_name("loop2").symlink_to(p)), "symbolic link loop"),
    ],
    ids=["directory", "missing", "symlink-loop"],
)
def test_non_files_are_refused_with_a_reason(tmp_path: Path, make, reason: str) -> None:
    target = tmp_path / "x"
    make(target)
    with pytest.raises(InputError) as info:
        read_bytes(str(target))
    assert reason in info.value.reason


def test_devices_and_nul_paths_are_refused() -> None:
    with pytest.raises(InputError, match="character device"):
        read_bytes("/dev/zero")
    with pytest.raises(InputError, match="NUL"):
        read_bytes("a\0b")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("x")
    path.chmod(0)
    with pytest.raises(InputError, match="permission denied"):
        read_bytes(str(path))


def test_invalid_utf8_is_replaced_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "bin"
    path.write_bytes(b"ok\xff\xfe\0end")
    assert read_text(str(path)) == "ok\ufffd\ufffd\0end"


# --- subprocesses --------------------------------------------------------------------------------------------------


def _py(code: str) -> list:
    return [sys.executable, "-B", "-c", code]


def test_command_output_and_status() -> None:
    ok = run_capped(_py("import sys; print('out'); print('err', file=sys.stderr)"), timeout=10)
    assert (ok.status, ok.returncode, ok.stdout, ok.stderr.strip()) == ("ok", 0, "out\n", "err")
    failed = run_capped(_py("raise SystemExit(3)"), timeout=10)
    assert (failed.status, failed.returncode) == ("failed", 3)
    missing = run_capped(["/nonexistent/tool-xyz"], timeout=10)
    assert missing.status == "not_found" and missing.as_dict()["returncode"] is None


@pytest.mark.serial
def test_endless_output_is_capped_and_the_process_killed() -> None:
    started = time.monotonic()
    result = run_capped(_py("import sys\nwhile True: sys.stdout.write('x' * 65536)"), timeout=20, limit=100_000)
    assert result.status == "too-large" and result.truncated
    assert len(result.stdout) == 100_000
    assert time.monotonic() - started < 5


@pytest.mark.serial
def test_a_hang_is_killed_at_the_deadline_even_with_a_grandchild_holding_the_pipes() -> None:
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
    code += "print('started', flush=True)\ntime.sleep(30)"
    started = time.monotonic()
    result = run_capped(_py(code), timeout=0.8)
    assert result.status == "timeout" and result.stdout == "started\n"
    assert time.monotonic() - started < 3.0


@pytest.mark.serial
def test_a_grandchild_that_escapes_the_group_cannot_hold_the_reader() -> None:
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(30)'])\n"
        "print('bye')"
    )
    started = time.monotonic()
    result = run_capped(_py(code), timeout=0.8)
    assert result.stdout == "bye\n"
    assert time.monotonic() - started < 3


# --- structured documents measured before parsing; statuses (issue 21) ---------------------------------------------

from common.read import MAX_NESTING, StructureError, measure_json, measure_yaml, read_whole  # noqa: E402


@pytest.mark.parametrize("depth", [10**5, 10**6])
def test_deep_json_is_refused_by_the_scan_before_any_parser(depth: int) -> None:
    with pytest.raises(StructureError, match=f"nests deeper than {MAX_NESTING} levels") as info:
        measure_json('{"a": ' + "[" * depth + "]" * depth + "}")
    assert info.value.limit == "nesting"


def test_json_brackets_inside_strings_do_not_count_and_the_scan_is_linear() -> None:
    measure_json('{"a": "' + "[" * 10_000 + '\\"[[[", "b": [[1]]}')
    started = time.monotonic()
    measure_json("[]" * 14_000_000)  # 28 MB, wide not deep
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 100_000 + "]" * 100_000,  # flow
        "x:\n  " + "- " * 100_000 + "a\n",  # inline block entries
        "".join(" " * i + f"k{i}:\n" for i in range(70)),  # indentation
        "a: 'it''s [ok'\nb: " + "{a: " * 70 + "1" + "}" * 70,  # a quoted scalar does not hide what follows
    ],
    ids=["flow", "inline-entries", "indentation", "after-a-quoted-scalar"],
)
def test_deep_yaml_is_refused_by_the_scan(text: str) -> None:
    with pytest.raises(StructureError, match="nests deeper than 64 levels"):
        measure_yaml(text)


def test_yaml_anchors_and_aliases_are_counted_and_ordinary_configs_pass() -> None:
    with pytest.raises(StructureError, match="more than 100 aliases") as info:
        measure_yaml("a: &a [1]\n" + "".join(f"b{i}: *a\n" for i in range(101)))
    assert info.value.limit == "aliases"
    with pytest.raises(StructureError, match="more than 100 anchors"):
        measure_yaml("".join(f"b{i}: &x{i} 1\n" for i in range(101)))
    measure_yaml(
        "compute_environment: LOCAL_MACHINE  # a comment with [[[ brackets\n"
        'fsdp_config:\n  fsdp_version: 2\ngpu_ids: [0, 1]\nname: "[[[[["\nlist:\n  - a\n  - - b\n'
    )


def test_statuses_say_what_the_input_is(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 10)
    statuses = {}
    for name, path in (("missing", tmp_path / "nope"), ("folder", tmp_path), ("dev-zero", Path("/dev/zero"))):
        with pytest.raises(InputError) as info:
            read_whole(str(path), 4)
        statuses[name] = info.value.status
    with pytest.raises(InputError, match="too large") as info:
        read_whole(str(big), 4)
    statuses["big"] = info.value.status
    assert statuses == {"missing": "not_found", "folder": "not_regular", "dev-zero": "not_regular", "big": "too_large"}


# --- a command started early, read later ---------------------------------------------------------------------------


def test_a_started_command_is_read_later_with_its_output_whole() -> None:
    from common.read import Started, finish_command, start_command

    started = start_command(_py("import sys; print('out'); print('err', file=sys.stderr)"))
    assert isinstance(started, Started)
    time.sleep(0.2)
    done = finish_command(started, timeout=10)
    assert (done.status, done.stdout, done.stderr) == ("ok", "out\n", "err\n")
    assert start_command(["/nonexistent/tool-xyz"]).status == "not_found"


@pytest.mark.serial
def test_a_started_command_is_cancelled_with_its_group() -> None:
    from common.read import start_command

    started = start_command(
        _py("import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)'])")
    )
    begin = time.monotonic()
    started.cancel()
    assert started.process.poll() is not None and time.monotonic() - begin < 2

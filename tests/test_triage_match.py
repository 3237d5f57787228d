"""The triage's own use of the index (``scripts/triage/match.py``): the next command and the grep for a message.
The matcher itself is tested in tests/test_common_troubleshooting.py."""

from __future__ import annotations

import re

from common import troubleshooting
from triage import match

from conftest import SCRIPTS_DIR


def _entry(file: str, heading: str) -> dict:
    index = troubleshooting.load_index()
    return next(e for e in index.entries if e["file"] == file and e["heading"] == heading)


def test_next_command_fills_the_server_address() -> None:
    entry = _entry("troubleshooting/vllm.md", "Trainer cannot reach the server")
    command = match.next_command(entry, "The vLLM server can't be reached at http://10.9.8.7:8000 after 240.0 s")
    assert "http://10.9.8.7:8000/health" in command
    assert match.next_command(None, "anything") == "python3 " + str(SCRIPTS_DIR / "check_optional_backends.py")


def test_skill_relative_commands_name_the_scripts_by_absolute_path() -> None:
    assert troubleshooting.runnable("python3 scripts/plan_training.py --params 7B") == (
        "python3 " + str(SCRIPTS_DIR / "plan_training.py") + " --params 7B"
    )
    assert troubleshooting.runnable("nvidia-smi") == "nvidia-smi"
    assert troubleshooting.runnable("curl -s http://h:8000/version") == "curl -s http://h:8000/version"


def test_grep_command_takes_a_plain_run_of_the_message() -> None:
    command = match.grep_command("RuntimeError: Expected all tensors to be on the same device, but found cuda:0")
    folder = str(SCRIPTS_DIR.parent / "troubleshooting")
    assert command == f"grep -rn -F 'Expected all tensors to be on the same device' {folder}/"
    assert re.fullmatch(r"grep -rn -F '[^'$`\\]+' " + re.escape(folder) + "/", command)
    assert match.grep_command("E 1 2 3") == ""

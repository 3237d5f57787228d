"""Shell lines split into simple commands (``tools/claims/shell_split.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

from claims.shell_split import iter_shell_commands  # noqa: E402


def test_shell_commands_are_split_like_a_shell():
    lines = [
        "# a comment",
        "A=1 vllm serve m \\",
        "  --enable-lora && echo ok > out.log 2>&1",
        "cat > cfg.yaml <<EOF",
        "--inside-heredoc: 1",
        "EOF",
        "trl sft --x 'quoted value' # trailing comment; --not-a-flag",
    ]
    commands = list(iter_shell_commands(lines, 10))
    assert commands == [
        (11, ["A=1", "vllm", "serve", "m", "--enable-lora"]),
        (11, ["echo", "ok"]),
        (13, ["cat"]),
        (16, ["trl", "sft", "--x", "quoted value"]),
    ]

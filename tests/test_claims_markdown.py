"""The Markdown walk of the claim checker (``tools/claims/markdown.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

from claims.markdown import iter_code_spans, parse_markdown  # noqa: E402


def test_code_spans_follow_commonmark():
    text = "a ``x `y` z`` b \\`not code\\` `--flag` ```q```"
    assert [content for _, content in iter_code_spans(text)] == ["x `y` z", "--flag", "q"]


def test_markdown_walk_blocks_spans_markers_and_quotes():
    text = "\n".join(
        [
            "# Title",  # 1
            "",
            "Use `vllm_mode` and",  # 3
            "`--max-lora-rank`.",  # 4
            "",
            "| a | b |",  # 6
            "|---|---|",
            "| `x\\|y` | `VLLM_PORT` |",  # 8
            "",
            "1. Step:",  # 10
            "",
            "   ```bash",  # 12
            "   vllm serve m --enable-lora",  # 13
            "   ```",
            "",
            "<!-- check: vllm==0.27.1 -->",  # 16
            "~~~yaml",  # 17
            "a: 1",  # 18
            "~~~",
            "",
            "<!-- a comment with `--not-a-claim`",  # 21
            "-->",
            "> `exact message text here`",  # 23
            "> `outside text` (reported in org/repo#1)",  # 24
            "> `outside text` (seen somewhere)",  # 25
            "> `--flag` is prose in a quote",  # 26
            "## Versions (time-sensitive)",  # 27
            "`--x`",  # 28
        ]
    )
    doc = parse_markdown("f.md", text)
    assert [(b.lang, b.start_line, b.lines, b.marker) for b in doc.blocks] == [
        ("bash", 13, ["vllm serve m --enable-lora"], None),
        ("yaml", 18, ["a: 1"], "vllm==0.27.1"),
    ]
    spans = [(s.text, s.line, s.blockquote_role) for s in doc.spans]
    assert spans == [
        ("vllm_mode", 3, ""),
        ("--max-lora-rank", 4, ""),
        ("x|y", 8, ""),
        ("VLLM_PORT", 8, ""),
        ("exact message text here", 23, "message"),
        ("outside text", 24, "cited"),
        ("outside text", 25, "uncited"),
        ("--flag", 26, ""),
        ("--x", 28, ""),
    ]
    assert doc.spans[-1].section == "Versions (time-sensitive)"

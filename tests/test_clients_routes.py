"""tools/clients/routes.py: which lines of a client's output are warnings."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients.routes import COPY_COMMANDS, warnings
from clients.sandbox import Ran


def test_warnings_keep_client_findings_and_drop_sandbox_noise_and_quoted_descriptions(tmp_path: Path) -> None:
    output = "\n".join(
        [
            "WARNING: proceeding, even though we could not create PATH aliases",
            "\u26a0 Found 1 warning:",
            "",
            "  \u276f author: No author information provided",
            "* troubleshooting: Use when a scaled TRL training run fails, hangs",
            f"Configuration file not found at {tmp_path}/gemini-extension.json",
        ]
    )
    found = warnings([Ran(["gemini", "extensions", "install"], 1, output, "")], tmp_path)
    assert found == [
        "\u26a0 author: No author information provided",
        "Configuration file not found at <repo>/gemini-extension.json",
        "exit 1: gemini extensions install",
    ]


def test_the_copy_route_runs_the_readmes_copy_block_line_for_line() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- install-test: copy -->\n```bash\n(.*?)```", readme, re.S)
    assert block is not None
    assert tuple(block.group(1).strip().splitlines()) == COPY_COMMANDS

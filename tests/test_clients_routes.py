"""tools/clients/routes.py: which lines of a client's output are warnings."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients.routes import skill_dir, warnings
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


def test_the_skill_folder_is_the_checkout_or_its_skills_folder(tmp_path: Path) -> None:
    (tmp_path / "SKILL.md").write_text("x")
    assert skill_dir(tmp_path) == tmp_path
    (tmp_path / "SKILL.md").unlink()
    (tmp_path / "skills/scaling-and-backends").mkdir(parents=True)
    (tmp_path / "skills/scaling-and-backends/SKILL.md").write_text("x")
    assert skill_dir(tmp_path) == tmp_path / "skills/scaling-and-backends"

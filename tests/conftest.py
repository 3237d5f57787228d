"""Shared paths for the test-suite. Area-specific helpers live next to the tests that use them."""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the shipped scripts must not leave __pycache__ in scripts/

from pathlib import Path  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts"

# The shipped scripts are plain files under scripts/ (not a package); make them importable for unit tests.
if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))

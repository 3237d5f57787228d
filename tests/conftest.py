"""Shared paths for the test-suite. Area-specific helpers live next to the tests that use them."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts"

# The shipped scripts are plain files under scripts/ (not a package); make them importable for unit tests.
if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))

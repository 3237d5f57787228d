"""Text of a fix search: one line per fix, then the release to move to and the install planner line."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from common.troubleshooting import runnable

from fixes.search import SearchResult

TITLE = "upstream fixes after your release"


def text_lines(result: SearchResult, width: int = 100) -> List[str]:
    """Lines (without the title) for a search result; empty when nothing matched and nothing is to be said."""
    lines: List[str] = []
    for fix in result.fixes:
        lines.append(_clip("  " + fix.line(), width))
    for move in result.moves:
        since = f" (you have {move.current})" if move.current else " if yours is older"
        lines.append(_clip(f"  move {move.package} to {move.release} or later{since}:", width))
        for skip in move.skips:
            lines.append(_clip(f"    not {skip}: the regression lives there", width))
        lines.append(f"    {move.command}")
    for note in result.notes:
        lines.append(_clip(f"  {note}", width))
    return lines


def summary(result: SearchResult) -> Optional[Dict[str, Any]]:
    """The plain-data form both commands put under ``upstream_fixes``: the fixes, the releases to move to with
    their install-planner lines (runnable from any folder), and the text lines; the coverage notes alone when no
    fix matched but the index could not search a release (newer than its snapshot); None when there is nothing
    to say."""
    if not result.fixes and not result.notes:
        return None
    return {
        "fixes": [
            {"package": f.package, "release": f.release, "pr": f.pr, "title": f.title, "broken_from": f.broken_from}
            for f in result.fixes
        ],
        "moves": [{"package": m.package, "release": m.release, "command": runnable(m.command)} for m in result.moves],
        "lines": [
            "    " + runnable(line.strip()) if line.startswith("    python3 ") else line for line in text_lines(result)
        ],
    }


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"

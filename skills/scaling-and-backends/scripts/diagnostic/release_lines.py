"""The release-differences section as text: statements grouped by topic and by the first release they hold in,
within a line budget (``--verbose`` shows all). The section itself comes from :mod:`diagnostic.release_diff`;
only a text report that has one imports this module.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from common.lazy_re import lazy

from diagnostic.release_diff import PACKAGE_LABELS, cached_table, release_key

KIND_ORDER = {"message": 0, "deprecation": 1, "flag": 2, "env": 3, "route": 4}
LINE_BUDGET = 21  # lines of the whole section before --verbose
WIDTH = 100
RELEASE_HISTORY = "troubleshooting/release-history.md"
TOPICS = ("server mode", "AsyncGRPO", "memory", "kernels", "install", "other")
_TOPIC_RULES = (
    ("AsyncGRPO", lazy(r"async-grpo|asyncgrpo|adapter|lora|rollout", re.I)),
    ("kernels", lazy(r"liger|kernel|flash|fused", re.I)),
    ("memory", lazy(r"memory-and-parallelism|sharding|oom|memory|batch|parallel|logits", re.I)),
    ("install", lazy(r"install-and-hardware|install|extra|cuda|driver|bitsandbytes|peft", re.I)),
    ("server mode", lazy(r"vllm|server|weight|sync|render|logprobs|scale-out|dev mode|endpoints", re.I)),
)
_FIRST_RE = lazy(r"^(TRL|vLLM) (\d+\.\d+)")


def topic_of(statement: Dict[str, Any]) -> str:
    """The topic a statement is listed under: by its claim, else by the file and section it comes from."""
    for text in (str(statement.get("claim", "")), str(statement.get("where", ""))):
        for topic, pattern in _TOPIC_RULES:
            if pattern.search(text):
                return topic
    return "other"


def first_release(holds: str) -> Tuple[str, str]:
    """(label, minor) of the first release a statement holds in ("TRL 1.11–1.16" gives ("TRL", "1.11"))."""
    match = _FIRST_RE.match(holds or "")
    return (match.group(1), match.group(2)) if match else ("", "")


def _clip(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _claim_text(item: Dict[str, Any]) -> str:
    claim = str(item["claim"])
    if item["kind"] == "message":
        claim = max((part.strip(" .,:") for part in re.split(r"…|https?://\S+", claim)), key=len)
        claim = claim if len(claim) <= 48 else claim[:47].rstrip() + "…"
        return f'"{claim}"'
    return claim


def group_statements(entry: Dict[str, Any], table: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One group per (topic, first release): the claims merged (a claim stated in several files once), the
    release-history row of that release, and what the installed release shows instead where the history says."""
    rows = (table or {}).get("rows", {}).get(entry["package"], {})
    instead = (table or {}).get("instead", [])
    groups: Dict[Tuple[int, str, str], Dict[str, Any]] = {}
    topic_of_claim: Dict[str, str] = {}
    for item in entry["statements"]:  # a claim stated in several files goes under its most specific topic
        text = _claim_text(item)
        topic = topic_of(item)
        known = topic_of_claim.get(text, "other")
        topic_of_claim[text] = min(known, topic, key=TOPICS.index)
    for item in entry["statements"]:
        label, minor = first_release(str(item.get("holds", "")))
        topic = topic_of_claim[_claim_text(item)]
        key = (TOPICS.index(topic), _minor_key(minor), label)
        group = groups.setdefault(
            key,
            {"topic": topic, "first": f"{label} {minor}".strip(), "minor": minor, "claims": [], "kinds": {}},
        )
        text = _claim_text(item)
        if text not in group["claims"]:
            group["claims"].append(text)
            group["kinds"][text] = item["kind"]
    out = []
    for key in sorted(groups):
        group = groups[key]
        group["claims"].sort(key=lambda c: (KIND_ORDER.get(group["kinds"][c], 9), c))
        group["row"] = rows.get(group["minor"], "")
        shows = [
            row["shows"]
            for row in instead
            if _older_holds(row["older"], entry["installed"])
            and any(row["quoted"].strip('"') in claim for claim in group["claims"])
        ]
        group["instead"] = shows[0] if shows else ""
        out.append(group)
    return out


_OLDER_RE = lazy(r"(?:≤|<=)\s*(\d+)\.(\d+)|(\d+)\.(\d+)\s*[–-]\s*(\d+)\.(\d+)")


def _older_holds(scope: str, installed: str) -> bool:
    """Whether a release-history scope ("TRL ≤ 1.10", "TRL 1.11–1.15") covers the installed release."""
    version = release_key(installed)
    match = _OLDER_RE.search(scope or "")
    if version is None or not match:
        return False
    if match.group(1):
        return version[:2] <= (int(match.group(1)), int(match.group(2)))
    low = (int(match.group(3)), int(match.group(4)))
    high = (int(match.group(5)), int(match.group(6)))
    return low <= version[:2] <= high


def _minor_key(minor: str) -> str:
    parts = minor.split(".") if minor else ["0", "0"]
    return ".".join(part.zfill(4) for part in parts)


def _group_lines(group: Dict[str, Any], installed: str, topic: str) -> List[str]:
    """A group's line (topic, release, row, claims) and the line of what the installed release shows instead."""
    first = group["first"] or "another release"
    row = f" (row {first})" if group["row"] else ""
    head = f"    {(topic + ':').ljust(12) if topic else ' ' * 12} {first}+{row}: " + ", ".join(group["claims"])
    lines = [_clip(head)]
    if group["instead"]:
        lines.append(_clip(f"{' ' * 17}on {installed}: {group['instead']}"))
    elif group["row"]:
        lines.append(_clip(f"{' ' * 17}on {installed}: not there yet; {first} brought: {group['row']}"))
    return lines


def render_lines(section: Optional[Dict[str, Any]], verbose: bool = False, limit: int = LINE_BUDGET) -> List[str]:
    """Text lines grouped by topic, one group per release that brought the differences, each with what the
    installed release shows instead and the release-history row to read; at most ``limit`` lines per package
    unless ``verbose``. Empty when every installed release is the baseline."""
    if not section:
        return []
    try:
        return _lines(section, verbose, limit)
    except (KeyError, TypeError, ValueError, AttributeError):
        return []  # a malformed section is left out of the text, as it is of the report


def _lines(section: Dict[str, Any], verbose: bool, limit: int) -> List[str]:
    shown = [e for e in section["packages"] if e["status"] != "baseline"]
    if not shown:
        return []
    table = cached_table()
    lines = ["release differences (the skill text is written for " + _baselines(section) + "):"]
    for number, entry in enumerate(shown):
        later = len(shown) - number - 1
        budget = max(4, limit - len(lines) - 4 * later)  # each package after this one keeps a few lines
        label = PACKAGE_LABELS[entry["package"]]
        installed = str(entry["installed"])
        head = f"  {label} {installed if len(installed) <= 32 else installed[:31] + '…'}"
        if entry["status"] == "unverified":
            past = entry.get("newer_than_recorded") or "newer than the newest indexed release"
            lines.append(_clip(f"{head}: {past}; unverified (newest indexed {entry['indexed_release']})"))
            lines.append(
                _clip(f"    its list applies approximately ({len(entry['statements'])} statement(s)); re-check first:")
            )
            items = entry["statements"] + [i for i in entry["recheck_first"] if i not in entry["statements"]]
            items = sorted(items, key=lambda i: (KIND_ORDER.get(i["kind"], 9), i["claim"]))
            body = list(
                dict.fromkeys(
                    _clip(f"    {item['kind']} {_claim_text(item)} (holds in {item['holds']})") for item in items
                )
            )
        elif entry["status"] == "not_indexed" and not entry["indexed_release"]:
            lines.append(_clip(f"{head}: not indexed (older than every indexed release, or not a version this index"))
            lines.append("    reads); the skill's statements were not checked against it")
            continue
        else:
            note = ""
            if entry["status"] == "not_indexed":
                note = (
                    f" (not indexed; as {entry['indexed_release']}, approximate)"
                    if entry["indexed_release"]
                    else " (older than every indexed release: not verified)"
                )
            elif entry["indexed_release"] != entry["installed"]:
                note = f" (indexed as {entry['indexed_release']})"
            groups = group_statements(entry, table)
            claims = sum(len(g["claims"]) for g in groups)
            lines.append(
                _clip(f"{head}{note}: {claims} claims of the skill text do not hold here; rows: {RELEASE_HISTORY}")
            )
            per_topic: Dict[str, List[List[str]]] = {}
            for group in groups:
                blocks = per_topic.setdefault(group["topic"], [])
                blocks.append(_group_lines(group, f"{label} {entry['installed']}", "" if blocks else group["topic"]))
            body = _fit_topics(per_topic, None if verbose else budget - 1)
        if entry["status"] == "unverified" and not verbose and len(body) > budget - 1:
            body = [*body[: budget - 2], f"    … {len(body) - budget + 2} more line(s): --verbose lists them all"]
        lines.extend(body)
    return lines


def _fit_topics(per_topic: Dict[str, List[List[str]]], budget: Optional[int]) -> List[str]:
    """Every topic's groups when they fit ``budget`` lines; else each topic keeps an equal share of whole groups
    and one line says how many more ``--verbose`` shows."""
    total = sum(len(group) for groups in per_topic.values() for group in groups)
    if budget is None or total <= budget:
        return [line for groups in per_topic.values() for group in groups for line in group]
    # Round-robin over the topics, one whole group at a time, while the budget lasts (the first group of every
    # topic always shows, so no topic disappears).
    kept: Dict[str, int] = {topic: 1 for topic in per_topic}
    used = sum(len(groups[0]) for groups in per_topic.values())
    grew = True
    while grew:
        grew = False
        for topic, groups in per_topic.items():
            n = kept[topic]
            if n < len(groups) and used + len(groups[n]) <= budget - 1:
                kept[topic] = n + 1
                used += len(groups[n])
                grew = True
    out = [line for topic, groups in per_topic.items() for group in groups[: kept[topic]] for line in group]
    hidden = total - len(out)
    if hidden:
        out.append(f"    … {hidden} more line(s): --verbose (or --json) lists them all")
    return out


def _baselines(section: Dict[str, Any]) -> str:
    return ", ".join(f"{PACKAGE_LABELS[e['package']]} {e['baseline']}" for e in section["packages"])

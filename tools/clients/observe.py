"""What a route left behind and what each client makes of it: installed copies, registered and model-visible skills.

- Claude Code: the user-invocable skills are the ``/name`` prompts it expands into the skill's text ("Base directory
  for this skill: ...") in the request it sends; the model-visible ones are the list after "The following skills
  are available for use with the Skill tool" in that request. Both read from a loopback stand-in for the API.
- Codex: registered skills from its app-server (``skills/list``); model-visible ones from ``codex debug
  prompt-input`` ("### Available skills"). No model is contacted.
- Gemini CLI: registered skills from ``gemini skills list``; model-visible ones from ``<available_skills>`` in the
  request it sends to a loopback stand-in for the API.
Each client's own skills (those of an empty home) are subtracted.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

from clients.capture import ModelStandIn
from clients.sandbox import Home

SKILL_ENTRIES = frozenset({"SKILL.md", "LICENSE", "agents", "backend-selection", "vllm-reference", "troubleshooting"})
SKILL_ENTRIES = SKILL_ENTRIES | {"scripts", ".install-stamp.json"}
_NAME_RE = re.compile(r"^name:\s*[\"']?([A-Za-z0-9._:-]+)", re.MULTILINE)
PLUGIN_PREFIX = "scaling-and-backends:"


class Copy(NamedTuple):
    """One installed skill folder found under the home (``linked`` when the home holds a link to it)."""

    where: str
    files: int
    size: int
    outside: list[str]
    linked: str  # where a link in the home points ("" for a real folder)


class Listing(NamedTuple):
    registered: list[str]
    model_visible: list[str]
    notes: list[str]


def skill_name(folder: Path) -> str:
    try:
        head = (folder / "SKILL.md").read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return ""
    match = _NAME_RE.search(head.split("\n---", 1)[0])
    return match.group(1) if match else ""


def find_copies(home: Path, names: frozenset) -> list[Copy]:
    """Top-level skill folders under ``home`` whose ``SKILL.md`` names one of ``names``; nested ones are inside."""
    found: list[Copy] = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(home):
        here = Path(dirpath)
        links = [name for name in dirnames if (here / name).is_symlink()]
        for name in sorted(links):
            target = (here / name).resolve()
            if target.is_dir() and skill_name(target) in names:
                found.append(_measure(home, here / name, target, linked=_shown(home, target)))
        dirnames[:] = sorted(name for name in dirnames if name not in links)
        if "SKILL.md" in filenames and skill_name(here) in names:
            key = str(here.resolve())
            if key not in seen:
                seen.add(key)
                found.append(_measure(home, here, here, linked=""))
            dirnames[:] = []
    return [_with_container(home, copy) for copy in found]


# A client that installs a package holding the skill (a Gemini CLI extension) copies the whole package: what sits
# beside the skill folder in it is counted too, except the client's own manifest files.
CONTAINER_MANIFESTS = frozenset({"skills", "gemini-extension.json", ".gemini-extension-install.json"})
_CONTAINER_RE = re.compile(r"^(~/\.gemini/extensions/[^/]+)/skills/[^/]+$")


def _with_container(home: Path, copy: Copy) -> Copy:
    match = _CONTAINER_RE.match(copy.where)
    if not match or copy.linked:
        return copy
    container = home / match.group(1)[2:]
    files = size = 0
    outside = set(copy.outside)
    for dirpath, _, filenames in os.walk(container):
        for name in filenames:
            relative = (Path(dirpath) / name).relative_to(container)
            files += 1
            size += (Path(dirpath) / name).lstat().st_size
            if relative.parts[0] not in CONTAINER_MANIFESTS:
                outside.add(relative.parts[0] + ("/" if len(relative.parts) > 1 else ""))
    return Copy(match.group(1), files, size, sorted(outside), "")


def _shown(home: Path, path: Path) -> str:
    try:
        return "~/" + path.relative_to(home.resolve()).as_posix()
    except ValueError:
        return "the checkout"


def _measure(home: Path, where: Path, folder: Path, linked: str) -> Copy:
    files = size = 0
    outside: set[str] = set()
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            path = Path(dirpath) / name
            relative = path.relative_to(folder)
            if "__pycache__" in relative.parts:
                continue
            files += 1
            size += path.lstat().st_size
            if relative.parts[0] not in SKILL_ENTRIES:
                outside.add(relative.parts[0] + ("/" if len(relative.parts) > 1 else ""))
    shown = "~/" + where.relative_to(home).as_posix()
    return Copy(shown, files, size, sorted(outside), linked)


# ----------------------------------------------------------------------------------------------------------------------
# Claude Code
# ----------------------------------------------------------------------------------------------------------------------

_CLAUDE_BASE_RE = re.compile(r"Base directory for this skill: (\S+)")
_CLAUDE_LIST_RE = re.compile(
    r"The following skills are available for use with the Skill tool:\n\n(.*?)(?:\n\n|$)", re.S
)


def _claude_request(home: Home, prompt: str) -> str:
    with ModelStandIn(max_requests=8) as api:
        extra = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-loopback-stand-in"}
        home.run(["claude", "-p", prompt], timeout=90, extra_env=extra)
        bodies = [request.body for request in api.requests if "/v1/messages" in request.path]
    return bodies[0] if bodies else ""


def _claude_text(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    parts: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                parts.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    return "\n".join(parts)


def claude_listing(home: Home, candidates: list[str], baseline: frozenset) -> Listing:
    first = _claude_text(_claude_request(home, "hello"))
    if not first:
        return Listing([], [], ["no request reached the stand-in"])
    visible = []
    match = _CLAUDE_LIST_RE.search(first)
    if match:
        visible = [line[2:].split(":", 1)[0] for line in match.group(1).splitlines() if line.startswith("- ")]
    # One skill answers to its plugin-qualified name and, while unique, to its short name: keep one name per folder.
    by_folder: dict[str, str] = {}
    for name in candidates:
        match = _CLAUDE_BASE_RE.search(_claude_text(_claude_request(home, "/" + name)))
        if match and len(name) > len(by_folder.get(match.group(1), "")):
            by_folder[match.group(1)] = name
    return Listing(sorted(by_folder.values()), sorted(set(visible) - baseline), [])


# ----------------------------------------------------------------------------------------------------------------------
# Codex
# ----------------------------------------------------------------------------------------------------------------------


def _codex_skills_list(home: Home, timeout: float = 60) -> list[dict]:
    process = subprocess.Popen(
        ["codex", "app-server"],
        cwd=home.work,
        env=home.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    messages = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "check_clients", "version": "1"}}},
        {"method": "initialized"},
        {"id": 2, "method": "skills/list", "params": {"cwds": [str(home.work)]}},
    ]
    try:
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        deadline = time.monotonic() + timeout
        for _ in range(200):  # bounded: notifications come first, the answer to id 2 ends the loop
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
                break
            line = process.stdout.readline()
            if not line:
                break
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if reply.get("id") == 2:
                entries = reply.get("result", {}).get("data", [])
                return [skill for entry in entries for skill in entry.get("skills", [])]
    finally:
        process.kill()
        process.wait()
    return []


def codex_listing(home: Home, baseline: frozenset) -> Listing:
    skills = _codex_skills_list(home)
    registered = sorted(
        skill["name"] for skill in skills if skill.get("scope") != "system" and skill["name"] not in baseline
    )
    ran = home.run(["codex", "debug", "prompt-input", "hello"], timeout=60)
    visible: list[str] = []
    start = ran.stdout.find("[")
    try:
        items = json.loads(ran.stdout[start:]) if start >= 0 else []
    except ValueError:
        items = []
    text = json.dumps(items)
    match = re.search(r"### Available skills\\n(.*?)(?:</skills_instructions>|\\n###|$)", text)
    if match:
        visible = re.findall(r"(?:^|\\n)- ([A-Za-z0-9._:-]+):", match.group(1))
    notes = [] if items else ["codex debug prompt-input printed no JSON"]
    return Listing(registered, sorted(set(visible) - baseline), notes)


# ----------------------------------------------------------------------------------------------------------------------
# Gemini CLI
# ----------------------------------------------------------------------------------------------------------------------

_GEMINI_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}}}


def gemini_listing(home: Home, baseline: frozenset) -> Listing:
    ran = home.run(["gemini", "skills", "list"], timeout=60)
    registered = sorted(set(re.findall(r"^(\S+) \[(?:Enabled|Disabled)\]", ran.output, re.M)) - baseline)
    settings = home.path / ".gemini" / "settings.json"
    if not settings.exists():
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps(_GEMINI_SETTINGS))
    with ModelStandIn(max_requests=8) as api:
        extra = {"GOOGLE_GEMINI_BASE_URL": api.url, "GEMINI_API_KEY": "loopback-stand-in"}
        home.run(["gemini", "-p", "hello"], timeout=90, extra_env=extra)
        bodies = [request.body for request in api.requests]
    visible: set[str] = set()
    for body in bodies:
        for block in re.findall(r"<available_skills>(.*?)</available_skills>", body, re.S):
            visible.update(re.findall(r"<name>([^<]+)</name>", block))
    notes = [] if bodies else ["no request reached the stand-in"]
    return Listing(registered, sorted(visible - baseline), notes)

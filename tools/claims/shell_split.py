"""Shell lines split into simple commands, the way a shell would."""

from __future__ import annotations

import re
import shlex
from typing import Iterator, List, Tuple

_OPERATORS = {"&&", "||", ";", "|", "&", "|&"}
_REDIRECT_RE = re.compile(r"^\d*(?:>>?|<|&>|>&)(?:&?\d+)?$")
_REDIRECT_ATTACHED_RE = re.compile(r"^\d*(?:>>?|&>)\S+$")
_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?")


def split_shell_commands(text: str) -> List[List[str]]:
    """Simple commands of one logical shell line, without operators, redirections or substitutions."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        raw = list(lexer)
    except ValueError:
        raw = text.split("#", 1)[0].split()
    commands: List[List[str]] = [[]]
    skip_next = False
    for token in raw:
        if skip_next:
            skip_next = False
            continue
        if token in _OPERATORS:
            commands.append([])
            continue
        if token.endswith(";") and token != ";":
            commands[-1].append(token[:-1])
            commands.append([])
            continue
        if _REDIRECT_RE.match(token):
            skip_next = not re.search(r"&\d+$", token)
            continue
        if _REDIRECT_ATTACHED_RE.match(token):
            continue
        if token.startswith("$(") or token.startswith("`"):
            continue
        commands[-1].append(token)
    return [c for c in commands if c]


def iter_shell_commands(lines: List[str], start_line: int, console: bool = False) -> Iterator[Tuple[int, List[str]]]:
    """(line number, tokens) for every simple command in a shell block (continuations joined, heredocs skipped)."""
    i = 0
    while i < len(lines):
        line = lines[i]
        number = start_line + i
        if console:
            if not line.startswith("$ "):
                i += 1
                continue
            line = line[2:]
        logical = line
        while logical.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            logical = logical.rstrip()[:-1] + " " + lines[i]
        i += 1
        heredoc = _HEREDOC_RE.search(logical)
        if heredoc:
            terminator = heredoc.group(1)
            logical = logical[: heredoc.start()]
            while i < len(lines) and lines[i].strip() != terminator:
                i += 1
            i += 1
        for command in split_shell_commands(logical):
            yield number, command

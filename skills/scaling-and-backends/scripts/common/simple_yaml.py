"""YAML for the bundle's scripts: PyYAML when it is importable, else a small built-in reader (a sibling module).

``load(text)`` returns ``(data, parser)`` with ``parser`` ``"pyyaml"`` or ``"builtin"``; every failure is a
``YamlError`` with a 1-based ``line`` when one is known. ``parse(text)`` is the built-in reader alone. It covers the
YAML that Accelerate and TRL config files use: one document, block mappings and sequences, single-line flow ``[...]``
and ``{...}``, plain and quoted scalars, comments. Plain scalars resolve as PyYAML's ``safe_load`` resolves them
(YAML 1.1: ``yes``/``no``/``on``/``off`` are booleans, ``0755`` is octal, ``1:30`` is 90, ``1e5`` stays a string,
``2024-01-01`` is a date). What it does not read the way PyYAML would (block scalars, anchors, aliases, tags,
several documents, multi-line scalars and flows, complex keys) is refused with an error instead of being guessed,
and so is a repeated key, which PyYAML would let win silently. Standard library only.
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Dict, List, Optional, Tuple

from common.read import StructureError, measure_yaml
from common.values import InvalidValue, check_tree

__all__ = ["YamlError", "load", "parse", "pyyaml_available"]

_INSTALL_HINT = "not supported by the built-in parser; install PyYAML"


class YamlError(ValueError):
    """A document that could not be read. ``line`` is 1-based or None; ``parser`` is "builtin" or "pyyaml"."""

    def __init__(self, message: str, line: Optional[int] = None, parser: str = "builtin") -> None:
        super().__init__(message if line is None else f"line {line}: {message}")
        self.message = message
        self.line = line
        self.parser = parser


def pyyaml_available() -> bool:
    """Whether PyYAML can be imported."""
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


MAX_YAML_BYTES = 256 * 1024  # an Accelerate or TRL config is a few kB; PyYAML's pure-Python reader needs ~2 s here
MAX_YAML_NODES = 100_000  # values after aliases are expanded: an alias bomb stops here, not in the caller


def load(
    text: str, prefer_pyyaml: bool = True, max_bytes: int = MAX_YAML_BYTES, max_nodes: int = MAX_YAML_NODES
) -> Tuple[Any, str]:
    """Parse one YAML document; return (data, ``"pyyaml"`` or ``"builtin"``). Raises ``YamlError``.

    PyYAML's ``safe_load`` (its C loader when built) is used when ``prefer_pyyaml`` and it is importable; its
    exception stays reachable as the ``YamlError``'s ``__cause__``. A document over ``max_bytes`` characters, or
    one that nests deeper than 64 levels or holds over 100 anchors or aliases (measured on the text, before any
    parser sees it), or whose values exceed ``max_nodes`` once aliases are expanded, is refused.
    """
    if len(text) > max_bytes:
        raise YamlError(f"the document is too large (larger than {max_bytes:,} characters)")
    try:
        measure_yaml(text)  # before any parser recurses into it: depth, anchors and aliases by a linear scan
    except StructureError as error:
        raise YamlError(
            f"the document {error}", None, "pyyaml" if prefer_pyyaml and pyyaml_available() else "builtin"
        ) from None
    data, parser = _load_unchecked(text, prefer_pyyaml)
    try:
        check_tree(data, "the document", max_nodes=max_nodes)
    except InvalidValue as error:
        raise YamlError(str(error), None, parser) from None
    return data, parser


def _load_unchecked(text: str, prefer_pyyaml: bool) -> Tuple[Any, str]:
    if prefer_pyyaml:
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            pass
        else:
            loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
            try:
                return yaml.load(text, Loader=loader), "pyyaml"
            except (yaml.YAMLError, ValueError, RecursionError) as error:  # ValueError: e.g. a date 2024-13-01
                mark = getattr(error, "problem_mark", None)
                lines = str(error).splitlines()
                message = getattr(error, "problem", None) or (lines[0] if lines else type(error).__name__)
                raise YamlError(message, mark.line + 1 if mark is not None else None, "pyyaml") from error
    return parse(text), "builtin"


# --------------------------------------------------------------------------------------------------------------
# Plain scalars: PyYAML's implicit resolvers and constructors (yaml/resolver.py, yaml/constructor.py)
# --------------------------------------------------------------------------------------------------------------

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
_TRUE = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""",
    re.X,
)
_TIMESTAMP = re.compile(
    r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?
    (?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
    re.X,
)
_TIMESTAMP_PARTS = re.compile(
    r"""^(?P<year>[0-9]{4})-(?P<month>[0-9][0-9]?)-(?P<day>[0-9][0-9]?)
    (?:(?:[Tt]|[ \t]+)(?P<hour>[0-9][0-9]?):(?P<minute>[0-9][0-9]):(?P<second>[0-9][0-9])
    (?:\.(?P<fraction>[0-9]*))?
    (?:[ \t]*(?P<tz>Z|(?P<tz_sign>[-+])(?P<tz_hour>[0-9][0-9]?)(?::(?P<tz_minute>[0-9][0-9]))?))?)?$""",
    re.X,
)


def _sexagesimal(text: str, kind: type) -> Any:
    """``1:30`` is 90, summed from the right as PyYAML does (the same float rounding)."""
    value, base = kind(0), 1
    for part in reversed(text.split(":")):
        value += kind(part) * base
        base *= 60
    return value


def _to_int(text: str) -> int:
    text = text.replace("_", "")
    sign = -1 if text[0] == "-" else 1
    digits = text[1:] if text[0] in "+-" else text
    if digits == "0":
        return 0
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits[0] == "0":
        return sign * int(digits, 8)
    return sign * (_sexagesimal(digits, int) if ":" in digits else int(digits))


def _to_float(text: str) -> float:
    text = text.replace("_", "").lower()
    sign = -1 if text[0] == "-" else 1
    digits = text[1:] if text[0] in "+-" else text
    if digits == ".inf":
        return sign * float("inf")
    if digits == ".nan":
        return float("nan")
    return sign * (_sexagesimal(digits, float) if ":" in digits else float(digits))


def _to_timestamp(text: str) -> Any:
    parts = _TIMESTAMP_PARTS.match(text)
    assert parts is not None  # _TIMESTAMP matched first
    year, month, day = int(parts["year"]), int(parts["month"]), int(parts["day"])
    if not parts["hour"]:
        return datetime.date(year, month, day)
    fraction = int((parts["fraction"] or "")[:6].ljust(6, "0"))
    tzinfo: Optional[datetime.tzinfo] = None
    if parts["tz_sign"]:
        delta = datetime.timedelta(hours=int(parts["tz_hour"]), minutes=int(parts["tz_minute"] or 0))
        tzinfo = datetime.timezone(-delta if parts["tz_sign"] == "-" else delta)
    elif parts["tz"]:
        tzinfo = datetime.timezone.utc
    hour, minute, second = int(parts["hour"]), int(parts["minute"]), int(parts["second"])
    return datetime.datetime(year, month, day, hour, minute, second, fraction, tzinfo=tzinfo)


def _resolve(text: str, line: int) -> Any:
    """The value of a plain (unquoted) scalar."""
    if _NULL.match(text):
        return None
    if _BOOL.match(text):
        return text in _TRUE
    if text in ("<<", "="):
        raise YamlError(f"{text!r} (a YAML merge or value key) is {_INSTALL_HINT}", line)
    try:
        if _FLOAT.match(text):
            return _to_float(text)
        if _INT.match(text):
            return _to_int(text)
        if _TIMESTAMP.match(text):
            return _to_timestamp(text)
    except ValueError as error:  # PyYAML raises too: 0b_ has no digits, 2024-13-01 has no month 13
        raise YamlError(f"cannot read {text!r}: {error}", line) from None
    return text


# --------------------------------------------------------------------------------------------------------------
# Scalars and flow collections on one line
# --------------------------------------------------------------------------------------------------------------

_ESCAPES = {
    "0": "\0",
    "a": "\x07",
    "b": "\x08",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\x0b",
    "f": "\x0c",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_HEX = re.compile(r"[0-9A-Fa-f]+$")
# Characters PyYAML's reader refuses anywhere in a document (yaml/reader.py NON_PRINTABLE).
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TAB_MESSAGE = "tab characters are allowed only inside quoted strings and comments"


def _skip_spaces(text: str, line: int) -> str:
    """``text`` without its leading spaces; a tab there is an error, as in PyYAML."""
    rest = text.lstrip(" ")
    if rest.startswith("\t"):
        raise YamlError(_TAB_MESSAGE, line)
    return rest


def _at_end(text: str, line: int) -> bool:
    """Whether only spaces and a comment are left."""
    rest = _skip_spaces(text, line)
    return not rest or rest.startswith("#")


def _parse_quoted(text: str, line: int) -> Tuple[str, str]:
    """Parse the quoted scalar that starts ``text``; return (value, rest)."""
    quote = text[0]
    out: List[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if quote == "'" and char == "'":
            if text[index + 1 : index + 2] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), text[index + 1 :]
        if quote == '"' and char == '"':
            return "".join(out), text[index + 1 :]
        if quote == '"' and char == "\\" and index + 1 < len(text):
            code = text[index + 1]
            if code in _ESCAPES:
                out.append(_ESCAPES[code])
                index += 2
                continue
            width = _HEX_ESCAPES.get(code)
            digits = text[index + 2 : index + 2 + width] if width else ""
            if not width or len(digits) != width or not _HEX.match(digits):
                raise YamlError(f"unknown escape sequence in a double-quoted string: {text[index : index + 2]!r}", line)
            out.append(chr(int(digits, 16)))
            index += 2 + width
            continue
        out.append(char)
        index += 1
    raise YamlError(f"unterminated {quote}-quoted string", line)


def _check_plain_start(text: str, line: int) -> None:
    """Refuse what PyYAML would read as something other than a plain scalar."""
    first, second = text[:1], text[1:2]
    if first in ("|", ">"):
        raise YamlError(f"block scalars (| or >) are {_INSTALL_HINT}", line)
    if first in ("&", "*", "!"):
        raise YamlError(f"anchors, aliases and tags are {_INSTALL_HINT}", line)
    if first in ("-", "?", ":") and second in ("", " "):
        what = {"-": "a sequence entry", "?": "a complex mapping key", ":": "a mapping value without a key"}[first]
        raise YamlError(f"{what} ({first!r}) is not allowed here", line)
    if first and first in "%@`,[]{}#'\"":
        raise YamlError(f"a plain value cannot start with {first!r}", line)


def _plain(text: str, line: int) -> Any:
    """A plain scalar that is already cut at its end."""
    _check_plain_start(text, line)
    if "\t" in text:
        raise YamlError(_TAB_MESSAGE, line)
    return _resolve(text, line)


def _parse_flow(text: str, line: int) -> Tuple[Any, str]:
    """Parse a flow node (``[..]``, ``{..}``, quoted or plain scalar) at the start of ``text``; return (value, rest)."""
    text = _skip_spaces(text, line)
    if not text:
        raise YamlError("expected a value", line)
    if text[0] in "'\"":
        return _parse_quoted(text, line)
    if text[0] == "[":
        return _parse_flow_sequence(text[1:], line)
    if text[0] == "{":
        return _parse_flow_mapping(text[1:], line)
    if text[0] == ":":
        raise YamlError(f"a ':' that starts a value inside a flow collection is {_INSTALL_HINT}", line)
    # In a flow collection a plain scalar ends at , [ ] { }, at ': ' or ':' before those, and at ' #'.
    end = 0
    while end < len(text):
        char, following = text[end], text[end + 1 : end + 2]
        if char in ",[]{}" or (char == ":" and following in ("", " ", ",", "[", "]", "{", "}")):
            break
        if char == "#" and text[end - 1 : end] == " ":
            break
        if char == "?":
            raise YamlError(f"'?' inside a flow collection is {_INSTALL_HINT}", line)
        end += 1
    token = text[:end].rstrip(" ")
    if not token:
        raise YamlError("expected a value", line)
    return _plain(token, line), text[len(token) :]


def _parse_flow_sequence(rest: str, line: int) -> Tuple[List[Any], str]:
    items: List[Any] = []
    rest = _skip_spaces(rest, line)
    while not rest.startswith("]"):
        value, rest = _parse_flow(rest, line)
        items.append(value)
        rest = _skip_spaces(rest, line)
        if rest.startswith(","):
            rest = _skip_spaces(rest[1:], line)
        elif not rest.startswith("]"):
            raise YamlError("expected ',' or ']' in a flow sequence (flow collections must close on their line)", line)
    return items, rest[1:]


def _parse_flow_mapping(rest: str, line: int) -> Tuple[Dict[Any, Any], str]:
    mapping: Dict[Any, Any] = {}
    rest = _skip_spaces(rest, line)
    while not rest.startswith("}"):
        key, rest = _parse_flow(rest, line)
        _check_key(key, mapping, line)
        rest = _skip_spaces(rest, line)
        value = None
        if rest.startswith(":"):
            rest = _skip_spaces(rest[1:], line)
            if not rest.startswith((",", "}")):
                value, rest = _parse_flow(rest, line)
                rest = _skip_spaces(rest, line)
        mapping[key] = value
        if rest.startswith(","):
            rest = _skip_spaces(rest[1:], line)
        elif not rest.startswith("}"):
            raise YamlError("expected ',' or '}' in a flow mapping (flow collections must close on their line)", line)
    return mapping, rest[1:]


def _check_key(key: Any, mapping: Dict[Any, Any], line: int) -> None:
    if isinstance(key, (list, dict)):
        raise YamlError(f"a collection as a mapping key is {_INSTALL_HINT}", line)
    if key in mapping:
        raise YamlError(f"duplicate key {key!r}", line)


def _parse_value_text(text: str, line: int) -> Any:
    """The value written on the line of its key or dash (or alone on its line)."""
    text = _skip_spaces(text, line)
    if not text or text.startswith("#"):
        return None
    if text[0] in "[{'\"":
        value, rest = _parse_flow(text, line)
        if not _at_end(rest, line):
            raise YamlError(f"unexpected text after a value: {rest.strip()!r}", line)
        return value
    if text.startswith("- ") or text == "-":
        raise YamlError("a sequence cannot start on the same line as a mapping key", line)
    comment = re.search(r" #", text)
    plain = text[: comment.start()].rstrip(" ") if comment else text
    if re.search(r":( |\t|$)", plain):
        raise YamlError("mapping values are not allowed here (a second ':' on the line?)", line)
    return _plain(plain, line)


def _split_key(content: str, line: int) -> Optional[Tuple[Any, str]]:
    """Split ``key: value`` into (key, text after the colon); None when the line holds no mapping key."""
    if content[0] in "'\"":
        key, rest = _parse_quoted(content, line)
        rest = rest.lstrip(" ")
        if not rest.startswith(":") or rest[1:2] not in ("", " ", "\t"):
            return None
        return key, rest[1:]
    if content[0] in "[{":
        return None
    match = re.search(r":( |\t|$)", content)
    if not match or " #" in content[: match.start()] or not content[: match.start()].strip(" "):
        return None
    return _plain(content[: match.start()].rstrip(" "), line), content[match.start() + 1 :]


# --------------------------------------------------------------------------------------------------------------
# Block structure
# --------------------------------------------------------------------------------------------------------------

Line = Tuple[int, int, str]  # (1-based line number, indentation, content without the indentation)
_MARKER = re.compile(r"^(---|\.\.\.)(?=[ \t]|$)")


def parse(text: str) -> Any:
    """Parse one YAML document with the built-in reader. Raises ``YamlError`` with a 1-based line number."""
    lines = _document_lines(text)
    if not lines:
        return None
    try:
        value, index = _parse_block(lines, 0, lines[0][1])
    except RecursionError:
        raise YamlError(f"deeply nested collections are {_INSTALL_HINT}", None) from None
    if index != len(lines):
        raise YamlError("bad indentation", lines[index][0])
    return value


def _document_lines(text: str) -> List[Line]:
    """The content lines of the single document in ``text`` (comments, blank lines and markers dropped)."""
    lines: List[Line] = []
    started = ended = False
    for number, raw in enumerate((text[1:] if text.startswith("\ufeff") else text).splitlines(), start=1):
        bad = _NON_PRINTABLE.search(raw)
        if bad:
            raise YamlError(f"character {ord(bad.group()):#06x} is not allowed in YAML", number)
        content = raw.lstrip(" ")
        if content.startswith("\t"):
            raise YamlError("tab characters are not allowed in YAML indentation", number)
        content = content.rstrip(" ")
        if not content or content.startswith("#"):
            continue
        marker = _MARKER.match(raw)
        if marker:
            if not _at_end(raw[3:], number):
                raise YamlError(f"content on the {marker.group(1)!r} line is {_INSTALL_HINT}", number)
            if marker.group(1) == "---" and (started or ended or lines):
                raise YamlError("several YAML documents in one file are not supported", number)
            if marker.group(1) == "..." and not (started or lines):
                raise YamlError("a '...' document end marker before the document", number)
            started = True
            ended = ended or marker.group(1) == "..."
            continue
        if ended:
            raise YamlError("several YAML documents in one file are not supported", number)
        if content.startswith("%"):
            raise YamlError(f"directives (%YAML, %TAG) are {_INSTALL_HINT}", number)
        lines.append((number, len(raw) - len(raw.lstrip(" ")), content))
    return lines


def _is_entry(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _parse_block(lines: List[Line], index: int, indent: int) -> Tuple[Any, int]:
    number, _, content = lines[index]
    if _is_entry(content):
        return _parse_sequence(lines, index, indent)
    if _split_key(content, number) is None:
        value = _parse_value_text(content, number)
        if index + 1 < len(lines) and lines[index + 1][1] >= indent:
            raise YamlError("expected a mapping key ('key: value')", lines[index + 1][0])
        return value, index + 1
    return _parse_mapping(lines, index, indent)


def _parse_mapping(lines: List[Line], index: int, indent: int) -> Tuple[Dict[Any, Any], int]:
    mapping: Dict[Any, Any] = {}
    while index < len(lines):
        number, line_indent, content = lines[index]
        if line_indent < indent:
            break
        if line_indent > indent:
            raise YamlError("bad indentation of a mapping entry", number)
        if _is_entry(content):
            raise YamlError("a sequence item where a mapping key was expected", number)
        split = _split_key(content, number)
        if split is None:
            raise YamlError("expected a mapping key ('key: value')", number)
        key, rest = split
        _check_key(key, mapping, number)
        index += 1
        if not _at_end(rest, number):
            mapping[key] = _parse_value_text(rest, number)
        elif index < len(lines) and (
            lines[index][1] > indent or (lines[index][1] == indent and _is_entry(lines[index][2]))
        ):
            mapping[key], index = _parse_block(lines, index, lines[index][1])
        else:
            mapping[key] = None
    return mapping, index


def _parse_sequence(lines: List[Line], index: int, indent: int) -> Tuple[List[Any], int]:
    items: List[Any] = []
    while index < len(lines):
        number, line_indent, content = lines[index]
        if line_indent < indent or not _is_entry(content):
            if line_indent > indent:
                raise YamlError("bad indentation in a sequence", number)
            break
        if line_indent > indent:
            raise YamlError("bad indentation of a sequence item", number)
        body = _skip_spaces(content[1:], number)
        index += 1
        if not body or body.startswith("#"):
            if index < len(lines) and lines[index][1] > indent:
                value, index = _parse_block(lines, index, lines[index][1])
                items.append(value)
            else:
                items.append(None)
        elif _is_entry(body) or _split_key(body, number) is not None:
            # "- key: value" or "- - item" opens a block collection indented past the dash.
            inner_indent = indent + len(content) - len(body)
            sub = [(number, inner_indent, body)]
            while index < len(lines) and lines[index][1] >= inner_indent:
                sub.append(lines[index])
                index += 1
            value, used = _parse_block(sub, 0, inner_indent)
            if used != len(sub):
                raise YamlError("bad indentation inside a sequence item", sub[used][0])
            items.append(value)
        else:
            items.append(_parse_value_text(body, number))
    return items, index

"""Load stage: read the report files (or standard input), split them into reports, and check each is a complete
``check_optional_backends.py --json`` report of the schema this bundle writes. Nothing is judged here."""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from common.output import REDACTED, looks_like_secret, scrub
from common.read import InputError as UnreadableInput
from common.read import StructureError, measure_json, read_bytes
from common.values import MAX_DIGITS, short

SOURCE_TOOL = "check_optional_backends"
SOURCE_SCHEMA_VERSION = 1
MAX_INPUT_BYTES = 64 * 1024 * 1024
MAX_REPORTS = 20_000  # reports in one input; each is checked to be an object as soon as it is decoded
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.IGNORECASE)
STRONG_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
PLAIN_VALUES = ("0", "1", "true", "false", "yes", "no", "on", "off", "none")
LABELED_LINE_RE = re.compile(r"^\s*([A-Za-z0-9_.\[\]-]+): ?(.*)$")


class InputError(Exception):
    """Unusable input: unreadable file, not JSON, the wrong tool or schema version (exit 2)."""


class UsageError(Exception):
    """The reports asked for cannot make a comparison (exit 2, with the usage line)."""


class Request(NamedTuple):
    """What compare_nodes.py was asked to compare, and how to answer."""

    train_paths: Tuple[str, ...]  # report files of the training nodes ('-': standard input)
    server_paths: Tuple[str, ...] = ()  # report files of vLLM server nodes
    json: bool = False
    require_consistent: bool = False


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(text):,} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text) if len(text) <= 2 * MAX_DIGITS else float("inf")
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"a number out of range ({text[:20]})")
    return value


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Strict JSON: no NaN/Infinity, no integer over 40 digits, no float that overflows (1e400).
_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def _decode_all(text: str, name: str = "the input") -> List[Any]:
    """Every JSON value in ``text`` (one report, or several written one after the other). The nesting is measured
    on the whole text before decoding; each value must be an object (a report) as soon as it is decoded, and at
    most :data:`MAX_REPORTS` are read, so 28 MB of ``[]`` is refused at the first one."""
    first = text.lstrip()[:1]
    if first and first != "{":  # a report is an object: 28 MB of [] is refused before anything is measured
        raise InputError(f"{name}: expected the JSON object of check_optional_backends.py --json")
    try:
        measure_json(text)
    except StructureError as error:
        raise InputError(f"{name}: {error}") from None
    values, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return values
        if len(values) >= MAX_REPORTS:
            raise InputError(f"{name}: more than {MAX_REPORTS:,} reports in one input")
        try:
            value, position = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError:
            raise
        except (ValueError, RecursionError) as error:
            raise InputError(f"{name}: not valid JSON ({str(error)[:80]})") from None
        if not isinstance(value, dict):
            raise InputError(f"{name}: expected the JSON object of check_optional_backends.py --json")
        values.append(value)


def split_documents(text: str, name: str) -> List[Tuple[str, Any]]:
    """(source label, parsed value) for each report in one input.

    Accepts one JSON report, several concatenated, or line-labelled output of all nodes (``srun --label``: ``0: {``;
    ``pdsh``: ``host: {``), which is regrouped per label first.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    first = LABELED_LINE_RE.match(lines[0]) if lines else None
    if first and first.group(2).lstrip().startswith("{") and not lines[0].lstrip().startswith("{"):
        groups: Dict[str, List[str]] = {}
        for number, line in enumerate(lines, 1):
            match = LABELED_LINE_RE.match(line)
            if not match:
                raise InputError(f"{name}: line {number} has no 'label: ' prefix (mixed labelled and plain output)")
            groups.setdefault(match.group(1), []).append(match.group(2))
        out = []
        for label, body in groups.items():
            try:
                values = _decode_all("\n".join(body), f"{name} [{label}]")
            except json.JSONDecodeError as error:
                raise InputError(f"{name} [{label}]: not JSON ({error.msg} at line {error.lineno})") from None
            out.extend((f"{name} [{label}]", value) for value in values)
        return out
    try:
        values = _decode_all(text, name)
    except json.JSONDecodeError as error:
        raise InputError(f"{name}: not JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    if len(values) == 1:
        return [(name, values[0])]
    return [(f"{name} [{i}]", value) for i, value in enumerate(values)]


def check_report(source: str, value: Any) -> Dict[str, Any]:
    """The report, or InputError naming what is wrong with it."""
    if not isinstance(value, dict):
        raise InputError(f"{source}: expected the JSON object of check_optional_backends.py --json")
    tool = value.get("tool")
    if tool != SOURCE_TOOL:
        what = f"tool {tool!r}" if tool else "no 'tool' field"
        raise InputError(
            f"{source}: not a check_optional_backends.py --json report ({what}); run "
            "'python3 scripts/check_optional_backends.py --json' on each node and compare those files"
        )
    version = value.get("schema_version")
    # Exactly the integer: true and 1.0 equal 1 in Python, but no diagnostic writes them.
    if type(version) is not int or version != SOURCE_SCHEMA_VERSION:
        raise InputError(
            f"{source}: schema_version {short(version)}; this compare_nodes.py reads schema_version "
            f"{SOURCE_SCHEMA_VERSION}: collect every report with the check_optional_backends.py of this same bundle"
        )
    if not isinstance(value.get("node"), dict):
        raise InputError(
            f"{source}: the report has no node facts (written by an older check_optional_backends.py); "
            "collect it again with this bundle's check_optional_backends.py"
        )
    expected = {"packages": dict, "python": dict, "torch_build": dict, "accelerators": dict, "launch": dict}
    expected["findings"] = list
    for key, kind in expected.items():
        if not isinstance(value.get(key), kind):
            raise InputError(
                f"{source}: {key!r} is missing or not a JSON {'object' if kind is dict else 'array'}; "
                "is it a complete check_optional_backends.py --json report?"
            )
    for key in ("nccl", "network", "infiniband", "env", "accelerate"):
        if not isinstance(value["node"].get(key), dict):
            raise InputError(f"{source}: node.{key} is missing or not a JSON object; collect the report again")
    return value


def read_input(path: str, stdin: Any = None) -> str:
    """A file's text (``-``: standard input); InputError when it cannot be read."""
    if path == "-":
        text = (stdin or sys.stdin).read(MAX_INPUT_BYTES + 1)
        if len(text) > MAX_INPUT_BYTES:
            raise InputError(
                f"standard input: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; stopped there and compared "
                "nothing (pass the reports as files instead)"
            )
        return text
    try:
        read = read_bytes(path, MAX_INPUT_BYTES)  # a FIFO, device or directory is refused without blocking
    except UnreadableInput as error:
        raise InputError(f"{path}: cannot read ({error.reason})") from None
    if read.truncated:
        raise InputError(f"{path}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; not a diagnostic report")
    return read.text()


def shown_env_value(name: str, value: Any) -> str:
    """A launch variable as this tool shows it, by the diagnostic's name rule, whatever the report says: a name that
    says secret hides a non-trivial value, a KEY/AUTH name hides a value that looks like a secret, every value is
    scrubbed. A report's own redaction is never trusted (it may come from another bundle or a hand edit)."""
    text = value if isinstance(value, str) else json.dumps(value)[:200]
    if not text:
        return ""
    if len(text) < 8 and not SECRET_NAME.search(name):
        return text  # too short for any token shape or secret fragment the scrubber knows
    if SECRET_NAME.search(name) and (
        looks_like_secret(text) or (STRONG_SECRET_NAME.search(name) and text.strip().lower() not in PLAIN_VALUES)
    ):
        return text if text.startswith(REDACTED) else REDACTED
    return scrub(text)


def rescrub_env(env: Dict[str, Any]) -> Dict[str, str]:
    return {str(name): shown_env_value(str(name), value) for name, value in env.items()}


def load_nodes(train_paths: Sequence[str], server_paths: Sequence[str], stdin: Any = None) -> List[Dict[str, Any]]:
    """One entry per report: index, role (train or vllm-server), hostname, source and the report itself."""
    nodes: List[Dict[str, Any]] = []
    for role, paths in (("train", train_paths), ("vllm-server", server_paths)):
        for path in paths:
            documents = split_documents(read_input(path, stdin), "<stdin>" if path == "-" else path)
            if not documents:
                raise InputError(f"{path}: empty (no report)")
            for source, value in documents:
                report = check_report(source, value)
                report["node"]["env"] = rescrub_env(report["node"]["env"])
                hostname = report["node"].get("hostname")
                nodes.append(
                    {
                        "index": len(nodes),
                        "role": role,
                        "hostname": hostname if isinstance(hostname, str) and hostname else "?",
                        "hostname_known": isinstance(hostname, str) and bool(hostname),
                        "source": source,
                        "report": report,
                    }
                )
    return nodes


def load_request(request: Request, stdin: Any = None) -> List[Dict[str, Any]]:
    """The nodes of a request: UsageError for standard input named twice or fewer than two reports, InputError
    for an unusable file."""
    if [*request.train_paths, *request.server_paths].count("-") > 1:
        raise UsageError("'-' (standard input) can be given once")
    nodes = load_nodes(request.train_paths, request.server_paths, stdin)
    if len(nodes) < 2:
        raise UsageError(f"need reports from at least two nodes, got {len(nodes)}")
    return nodes

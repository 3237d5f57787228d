"""Facts across releases: which indexed release of TRL or vLLM each fact appears in.

Each indexed release is extracted once with the package's ordinary extractor (plus a few history-only extras), and
flattened into sets of keys per kind:

    message     a raised or logged message template
    flag        a command-line option, dash form (``--vllm-mode``): ``vllm serve`` flags for vLLM; for TRL the flags
                of its own CLI dataclasses, its launcher flags and every ``--option`` string literal in its source
    env         an environment variable read or set
    route       a vLLM HTTP route
    class       a config/trainer class (simple name)
    field       ``Class.field`` (inherited fields of the same package included)
    default     ``Class.field=<default as written in the source>``
    name        any upstream identifier: field, parameter, dict key, export, module or class name
    deprecated  a name in backticks inside a message that calls something deprecated
    requires    one ``Requires-Dist`` line of the wheel's METADATA

The stored document lists each package's releases in order (version, file, sha256) and, per kind, the keys grouped by
their release bitmap (``"0011"``: present in the 3rd and 4th release), so a fact costs its key once.
"""

from __future__ import annotations

import ast
import re
from typing import Dict, Iterable, List, Mapping, Sequence, Set

from .archive import SourceArchive
from .pysrc import ModuleSet

KINDS = ("message", "flag", "env", "route", "class", "field", "default", "name", "deprecated", "requires")
HISTORY_SCHEMA_VERSION = 1
_OPTION_LITERAL = re.compile(r"^--[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
_BACKTICK = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def dash_flag(flag: str) -> str:
    """``--vllm_mode`` and ``--vllm-mode`` are one option for the parsers covered here."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def option_literals(archive: SourceArchive, prefix: str) -> List[str]:
    """Every ``"--option"`` string constant in the package's Python sources (the flags its code passes on)."""
    found: Set[str] = set()
    for path in archive.python_files(prefix):
        try:
            tree = ast.parse(archive.read_text(path))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.split("=", 1)[0]
                if _OPTION_LITERAL.match(text):
                    found.add(text)
    return sorted(found)


def trl_cli_flags(archive: SourceArchive) -> List[str]:
    """Flags of TRL's own ``trl vllm-serve`` script arguments (the dataclass in ``trl/scripts/vllm_serve.py``)."""
    modules = ModuleSet(archive)
    module = modules.get("trl.scripts.vllm_serve")
    if module is None:
        return []
    flags: Set[str] = set()
    for node in module.classes.values():
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                flags.add("--" + stmt.target.id)
    return sorted(flags)


def history_extras(package: str, archive: SourceArchive) -> Dict[str, object]:
    """What the history needs beyond the package's ordinary extractor."""
    if package == "trl":
        return {"option_literals": option_literals(archive, "trl/"), "vllm_serve_flags": trl_cli_flags(archive)}
    return {}


def _resolved_fields(classes: Mapping[str, Mapping[str, object]], qualified: str, seen: Set[str]) -> Dict[str, object]:
    if qualified in seen:
        return {}
    seen = seen | {qualified}
    record = classes.get(qualified)
    if record is None:
        simple = qualified.rsplit(".", 1)[-1]
        matches = sorted(k for k in classes if k.rsplit(".", 1)[-1] == simple)
        if not matches:
            return {}
        record = classes[matches[0]]
    out: Dict[str, object] = {}
    for base in reversed(list(record.get("bases", []))):  # type: ignore[arg-type]
        out.update(_resolved_fields(classes, str(base), seen))
    out.update(record.get("fields", {}))  # type: ignore[arg-type]
    return out


def deprecated_names(messages: Iterable[str]) -> Set[str]:
    """The subject of each deprecation message: the first name in backticks in the clause that says deprecated,
    before that word (``use_liger_kernel=True`` gives ``use_liger_kernel``; the replacement it names later does not
    count)."""
    out: Set[str] = set()
    for message in messages:
        for clause in re.split(r"(?<=[.;:])\s+", message):
            at = clause.lower().find("deprecat")
            if at < 0:
                continue
            ticked = _BACKTICK.findall(clause[:at])
            if not ticked:
                continue
            quoted = ticked[0].strip()
            match = _NAME.match(quoted.lstrip("-").strip("'\""))
            if match:
                out.add(match.group(0))
                if quoted.startswith("-"):
                    out.add(dash_flag(quoted.split("=", 1)[0].split()[0]))
    return out


def flatten(package: str, facts: Mapping[str, object]) -> Dict[str, Set[str]]:
    """One release's facts as ``{kind: set of keys}``."""
    out: Dict[str, Set[str]] = {kind: set() for kind in KINDS}
    messages = list(facts.get("messages", []))  # type: ignore[arg-type]
    out["message"] = set(messages)
    out["env"] = set(facts.get("env_vars", {}))  # type: ignore[arg-type]
    out["route"] = set(facts.get("routes", {}))  # type: ignore[arg-type]
    out["requires"] = set(facts.get("requires_dist", []))  # type: ignore[arg-type]
    out["deprecated"] = deprecated_names(messages)
    classes: Mapping[str, Mapping[str, object]] = facts.get("classes", {})  # type: ignore[assignment]
    names = out["name"]
    for qualified in classes:
        simple = qualified.rsplit(".", 1)[-1]
        out["class"].add(simple)
        names.add(simple)
        for field_name, record in _resolved_fields(classes, qualified, set()).items():
            out["field"].add(f"{simple}.{field_name}")
            names.add(field_name)
            if isinstance(record, dict) and "default" in record:
                out["default"].add(f"{simple}.{field_name}={record['default']}")
        for param in classes[qualified].get("init_params", None) or {}:  # type: ignore[union-attr]
            out["field"].add(f"{simple}.{param}")
            names.add(str(param))
    names |= set(facts.get("identifiers", []))  # type: ignore[arg-type]
    names |= set(facts.get("exports", []))  # type: ignore[arg-type]
    names |= set(facts.get("values", []))  # type: ignore[arg-type]
    for module in facts.get("modules", []):  # type: ignore[union-attr]
        names.add(str(module).rsplit(".", 1)[-1])
    flags = out["flag"]
    for cli in facts.get("clis", {}).values():  # type: ignore[union-attr]
        for flag in cli.get("flags", []) or []:
            flags.add(dash_flag(str(flag)))
        for flag in cli.get("launcher_flags", []) or []:
            flags.add(dash_flag(str(flag)))
    for flag in facts.get("vllm_serve_flags", []):  # type: ignore[union-attr]
        flags.add(dash_flag(str(flag)))
    for flag in facts.get("option_literals", []):  # type: ignore[union-attr]
        flags.add(dash_flag(str(flag)))
    if package == "trl":
        # The training commands' flags are the TRL dataclass fields (``--vllm_mode``); transformers' own
        # ``TrainingArguments`` fields are left to the pinned transformers facts.
        for qualified in classes:
            if qualified.startswith("trl.") and qualified.endswith(("Config", "Arguments")):
                for field_name in _resolved_fields(classes, qualified, set()):
                    flags.add(dash_flag("--" + field_name))
        flags.discard("--")
    return out


def bitmap(present: Sequence[bool]) -> str:
    return "".join("1" if p else "0" for p in present)


def build_history(releases: Mapping[str, Sequence[Dict[str, object]]]) -> Dict[str, object]:
    """``releases``: ``{package: [{"version", "file", "sha256", "flat": {kind: set}}, ...]}`` in release order."""
    packages: Dict[str, object] = {}
    for package in sorted(releases):
        entries = releases[package]
        kinds: Dict[str, Dict[str, List[str]]] = {}
        for kind in KINDS:
            all_keys: Set[str] = set()
            for entry in entries:
                all_keys |= entry["flat"][kind]  # type: ignore[index]
            groups: Dict[str, List[str]] = {}
            for key in all_keys:
                bits = bitmap([key in entry["flat"][kind] for entry in entries])  # type: ignore[index]
                groups.setdefault(bits, []).append(key)
            kinds[kind] = {bits: sorted(keys) for bits, keys in sorted(groups.items())}
        packages[package] = {
            "releases": [{k: entry[k] for k in ("version", "file", "sha256")} for entry in entries],
            "facts": kinds,
        }
    return {"schema_version": HISTORY_SCHEMA_VERSION, "packages": packages}

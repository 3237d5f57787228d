"""Facts that need two packages at once: the flags of ``trl <command>`` (TRL dataclasses that inherit
``transformers.TrainingArguments``)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .argparse_static import split_union

Classes = Dict[str, Dict[str, object]]


def find_class(all_classes: Dict[str, Classes], qualified: str) -> Tuple[Optional[str], Optional[Dict[str, object]]]:
    """Look a class up by qualified name, or by ``package.Name`` re-export (``transformers.TrainingArguments``)."""
    package = qualified.split(".", 1)[0]
    classes = all_classes.get(package, {})
    if qualified in classes:
        return qualified, classes[qualified]
    simple = qualified.rsplit(".", 1)[-1]
    candidates = sorted(k for k in classes if k.rsplit(".", 1)[-1] == simple)
    if candidates:
        return candidates[0], classes[candidates[0]]
    return None, None


def resolved_fields(all_classes: Dict[str, Classes], qualified: str) -> Dict[str, Tuple[str, Dict[str, object]]]:
    """``{field: (defining class, record)}`` with inherited fields, subclass definitions winning."""
    key, record = find_class(all_classes, qualified)
    if record is None:
        return {}
    out: Dict[str, Tuple[str, Dict[str, object]]] = {}
    for base in reversed(record.get("bases", [])):  # type: ignore[arg-type]
        out.update(resolved_fields(all_classes, base))
    simple = str(key).rsplit(".", 1)[-1]
    for name, field in record.get("fields", {}).items():  # type: ignore[union-attr]
        out[name] = (simple, field)
    return out


def hf_argparser_flags(fields: Dict[str, Tuple[str, Dict[str, object]]]) -> Dict[str, Dict[str, object]]:
    """Option strings TRL's ``HfArgumentParser`` registers (``trl/scripts/_hf_argparser.py``): ``--name`` (and
    ``--name-with-dashes``, covered by the ``underscore_dash`` normalisation), metadata aliases, and ``--no_name`` for
    a ``bool`` field whose default is ``True``."""
    flags: Dict[str, Dict[str, object]] = {}
    for name, (owner, field) in fields.items():
        if field.get("init") is False:
            continue
        record = {"field": f"{owner}.{name}"}
        flags[f"--{name}"] = dict(record)
        for alias in field.get("aliases", []):  # type: ignore[union-attr]
            flags[str(alias)] = dict(record)
        parts = split_union(str(field.get("type") or ""))
        if field.get("default") == "True" and parts <= {"bool", "None"} and "bool" in parts:
            flags[f"--no_{name}"] = {"negates": f"--{name}", "takes_value": False}
    return flags


def link_trl_cli(raw: Dict[str, Dict[str, object]]) -> None:
    """Fill ``flags`` of every ``trl <command>`` that parses dataclasses, using the primary TRL and transformers."""
    trl_versions = raw.get("trl", {})
    transformers_versions = raw.get("transformers", {})
    if not trl_versions:
        return
    transformers_facts = next(iter(transformers_versions.values()), {}) if transformers_versions else {}
    for facts in trl_versions.values():
        all_classes = {
            "trl": facts.get("classes", {}),  # type: ignore[union-attr]
            "transformers": transformers_facts.get("classes", {}),  # type: ignore[union-attr]
        }
        for cli in facts.get("clis", {}).values():  # type: ignore[union-attr]
            names: List[str] = cli.get("dataclasses", [])
            flags: Dict[str, Dict[str, object]] = {}
            for qualified in names:
                flags.update(hf_argparser_flags(resolved_fields(all_classes, qualified)))  # type: ignore[arg-type]
            for flag in cli.get("launcher_flags", []):
                flags.setdefault(flag, {"launcher": True})
            # Only the names are stored: each flag's field is the dataclass field of the same name.
            cli["flags"] = sorted(flags)

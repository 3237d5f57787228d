"""Static emulation of argparse-building code: which option strings a parser-building function registers.

Covers what vLLM and Accelerate actually do: literal ``add_argument("--x", "-y", ...)`` calls, vLLM's
``**get_kwargs(SomeConfig)["field"]`` pattern (a bool field becomes ``argparse.BooleanOptionalAction``, so ``--no-x``
exists too), the ``for key, value in kwargs.items(): add_argument(f"--{key.replace('_', '-')}")`` loop over a config
class, ``_customize_cli_kwargs`` overrides, and calls into other parser builders (``X.add_cli_args(parser)``,
``make_arg_parser(parser)``).
"""

from __future__ import annotations

import ast
import contextlib
import re
from typing import Dict, List, Optional, Set, Tuple

from .pysrc import ModuleInfo, ModuleSet, class_fields, literal_choices, unparse

_RECURSE = re.compile(r"(add_cli_args|arg_parser|_cli_args|add_.*_args)$")
_NO_VALUE_ACTIONS = ("store_true", "store_false", "BooleanOptionalAction", "count", "help", "version", "store_const")


def split_union(type_text: str) -> Set[str]:
    """``bool | str | None`` / ``Optional[bool]`` -> {"bool", "str", "None"} (top level only)."""
    text = type_text.strip()
    for wrapper in ("Optional[", "typing.Optional["):
        if text.startswith(wrapper) and text.endswith("]"):
            return split_union(text[len(wrapper) : -1]) | {"None"}
    for wrapper in ("Union[", "typing.Union["):
        if text.startswith(wrapper) and text.endswith("]"):
            text = text[len(wrapper) : -1].replace(",", "|")
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "|" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    return {p for p in parts if p}


def vllm_is_boolean_optional(type_text: str) -> bool:
    """vLLM's ``_compute_kwargs`` rule: a bool field gets BooleanOptionalAction unless it is ``bool | str | None``."""
    parts = split_union(type_text)
    if "bool" not in parts:
        return False
    return parts != {"bool", "str", "None"}


class FlagCollector:
    """Collects ``{option string: record}`` for the parser built by one entry function."""

    def __init__(self, modules: ModuleSet) -> None:
        self.modules = modules
        self.flags: Dict[str, Dict[str, object]] = {}
        self._seen: Set[Tuple[str, str]] = set()
        self._class_cache: Dict[str, Tuple[Optional[ModuleInfo], Optional[ast.ClassDef]]] = {}

    # ---- class helpers -------------------------------------------------------------------------------------------

    def _class(self, module: ModuleInfo, name: str) -> Tuple[Optional[ModuleInfo], Optional[ast.ClassDef]]:
        owner, node, _ = self.modules.find_class(module, name)
        return owner, node

    def _mro(self, owner: Optional[ModuleInfo], node: Optional[ast.ClassDef]) -> List[Tuple[ModuleInfo, ast.ClassDef]]:
        out: List[Tuple[ModuleInfo, ast.ClassDef]] = []
        pending = [(owner, node)]
        while pending:
            mod, cls = pending.pop(0)
            if mod is None or cls is None or any(c is cls for _, c in out):
                continue
            out.append((mod, cls))
            for base in cls.bases:
                pending.append(self._class(mod, unparse(base)))
        return out

    def _fields(
        self, owner: Optional[ModuleInfo], node: Optional[ast.ClassDef]
    ) -> Dict[str, Tuple[ModuleInfo, str, Dict]]:
        """field -> (module, class name, record), subclass definitions winning."""
        out: Dict[str, Tuple[ModuleInfo, str, Dict]] = {}
        for mod, cls in reversed(self._mro(owner, node)):
            for name, rec in class_fields(cls).items():
                out[name] = (mod, cls.name, rec)
        return out

    def _method(
        self, owner: Optional[ModuleInfo], node: Optional[ast.ClassDef], name: str
    ) -> Tuple[Optional[ModuleInfo], Optional[ast.ClassDef], Optional[ast.FunctionDef]]:
        for mod, cls in self._mro(owner, node):
            for stmt in cls.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                    return mod, cls, stmt  # type: ignore[return-value]
        return None, None, None

    # ---- records -------------------------------------------------------------------------------------------------

    def _field_record(self, mod: ModuleInfo, cls_name: str, field: str, rec: Dict) -> Dict[str, object]:
        out: Dict[str, object] = {
            "field": f"{cls_name}.{field}",
            "type": rec.get("type"),
            "default": rec.get("default"),
        }
        cls_node = mod.classes.get(cls_name)
        annotation = None
        if cls_node is not None:
            for stmt in cls_node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == field:
                    annotation = stmt.annotation
        choices = literal_choices(self.modules, mod, annotation)
        if choices:
            out["choices"] = [c for c in choices if c is not None]
        if vllm_is_boolean_optional(str(rec.get("type") or "")):
            out["takes_value"] = False
        return out

    def _add(self, names: List[str], record: Dict[str, object], negatable: bool) -> None:
        for name in names:
            self.flags.setdefault(name, dict(record))
        if negatable:
            for name in names:
                if name.startswith("--"):
                    self.flags.setdefault(f"--no-{name[2:]}", {"negates": name, "takes_value": False})

    # ---- walking -------------------------------------------------------------------------------------------------

    def collect(
        self,
        module: ModuleInfo,
        func: ast.FunctionDef,
        cls_ctx: Tuple[Optional[ModuleInfo], Optional[ast.ClassDef]] = (None, None),
        depth: int = 0,
    ) -> None:
        key = (module.name, f"{cls_ctx[1].name if cls_ctx[1] else ''}.{func.name}")
        if key in self._seen or depth > 8:
            return
        self._seen.add(key)
        kwargs_vars: Dict[str, Tuple[Optional[ModuleInfo], Optional[ast.ClassDef], Optional[str]]] = {}
        loop_vars: Dict[str, str] = {}  # loop value variable -> kwargs variable iterated
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                source = self._kwargs_source(module, node.value, cls_ctx)
                if source is not None:
                    kwargs_vars[node.targets[0].id] = source
            elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
                iterated = node.iter.func
                is_items = isinstance(iterated, ast.Attribute) and iterated.attr == "items"
                if is_items and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2:
                    value_var = node.target.elts[1]
                    if isinstance(value_var, ast.Name):
                        loop_vars[value_var.id] = unparse(iterated.value)  # type: ignore[union-attr]
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func
            attr = (
                callee.attr
                if isinstance(callee, ast.Attribute)
                else (callee.id if isinstance(callee, ast.Name) else "")
            )
            if attr == "add_argument":
                self._add_argument(module, node, kwargs_vars, loop_vars, cls_ctx)
            elif _RECURSE.search(attr) and attr not in ("add_argument_group",):
                self._follow(module, callee, cls_ctx, depth)

    def _kwargs_source(self, module, value, cls_ctx):
        """``get_kwargs(Cls)`` / ``get_kwargs(Cls)["f"]`` -> (module, class, field); None for anything else."""
        field = None
        if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
            field = value.slice.value
            value = value.value
        if isinstance(value, ast.Call) and unparse(value.func).endswith("get_kwargs") and value.args:
            arg = unparse(value.args[0])
            if arg == "cls":
                return cls_ctx[0], cls_ctx[1], field
            owner, node = self._class(module, arg)
            return owner, node, field
        return None

    def _add_argument(self, module, call, kwargs_vars, loop_vars, cls_ctx) -> None:
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        names = [n for n in names if n.startswith("-")]
        action = next((unparse(kw.value) for kw in call.keywords if kw.arg == "action"), "")
        explicit_negatable = "BooleanOptionalAction" in action
        takes_value = not any(a in action for a in _NO_VALUE_ACTIONS)
        record: Dict[str, object] = {}
        if not takes_value:
            record["takes_value"] = False
        for kw in call.keywords:
            if kw.arg == "choices":
                with contextlib.suppress(ValueError, SyntaxError, TypeError):
                    record["choices"] = list(ast.literal_eval(kw.value))
            elif kw.arg == "default" and not isinstance(kw.value, ast.Attribute):
                record["default"] = unparse(kw.value)
        source = None
        starred = [kw.value for kw in call.keywords if kw.arg is None]
        for value in starred:
            if isinstance(value, ast.Dict):  # **{**x["f"], "default": None}
                inner = [v for k, v in zip(value.keys, value.values) if k is None]
                value = inner[0] if inner else value
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
                var = kwargs_vars.get(value.value.id)
                if var is not None and isinstance(value.slice, ast.Constant):
                    source = (var[0], var[1], value.slice.value)
            elif isinstance(value, ast.Name):
                if value.id in kwargs_vars and kwargs_vars[value.id][2] is not None:
                    source = kwargs_vars[value.id]
                elif value.id in loop_vars:
                    self._add_loop(module, loop_vars[value.id], kwargs_vars, cls_ctx)
                    return
        if any(isinstance(a, ast.JoinedStr) for a in call.args):  # f"--{key.replace('_', '-')}" without **value
            return
        negatable = explicit_negatable
        if source is not None and source[0] is not None and source[1] is not None:
            fields = self._fields(source[0], source[1])
            if source[2] in fields:
                mod, cls_name, rec = fields[source[2]]
                field_rec = self._field_record(mod, cls_name, source[2], rec)
                if not action:
                    negatable = negatable or field_rec.get("takes_value") is False
                field_rec.update(record)
                record = field_rec
        self._add(names, record, negatable)

    def _add_loop(self, module, kwargs_var, kwargs_vars, cls_ctx) -> None:
        """Every field of the class behind ``kwargs_var`` becomes ``--field-name`` (vLLM frontend args)."""
        source = kwargs_vars.get(kwargs_var)
        owner, node = (source[0], source[1]) if source else cls_ctx
        if owner is None or node is None:
            return
        overrides = self._customizations(owner, node)
        for field, (mod, cls_name, rec) in self._fields(owner, node).items():
            if rec.get("init") is False:
                continue
            record = self._field_record(mod, cls_name, field, rec)
            custom = overrides.get(field, {})
            negatable = record.get("takes_value") is False
            if "action" in custom:
                negatable = "BooleanOptionalAction" in custom["action"]
                if any(a in custom["action"] for a in _NO_VALUE_ACTIONS):
                    record["takes_value"] = False
                else:
                    record.pop("takes_value", None)
            names = [*list(custom.get("flags", [])), f"--{field.replace('_', '-')}"]
            self._add(names, record, negatable)

    def _customizations(self, owner, node) -> Dict[str, Dict]:
        """``kwargs["field"]["flags"|"action"] = ...`` assignments in ``_customize_cli_kwargs`` along the MRO."""
        out: Dict[str, Dict] = {}
        for _mod, cls in reversed(self._mro(owner, node)):
            for stmt in cls.body:
                if not (isinstance(stmt, ast.FunctionDef) and stmt.name == "_customize_cli_kwargs"):
                    continue
                for sub in ast.walk(stmt):
                    if not (isinstance(sub, ast.Assign) and len(sub.targets) == 1):
                        continue
                    target = sub.targets[0]
                    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
                        continue
                    key = target.slice
                    field = target.value.slice
                    if not (isinstance(key, ast.Constant) and isinstance(field, ast.Constant)):
                        continue
                    if key.value == "flags":
                        with contextlib.suppress(ValueError, SyntaxError, TypeError):
                            out.setdefault(field.value, {})["flags"] = list(ast.literal_eval(sub.value))
                    elif key.value == "action":
                        out.setdefault(field.value, {})["action"] = unparse(sub.value)
        return out

    def _follow(self, module, callee, cls_ctx, depth) -> None:
        """Recurse into another parser builder."""
        if isinstance(callee, ast.Name):
            owner, resolved = self.modules.resolve(module, callee.id)
            if owner is not None and resolved in owner.functions:
                self.collect(owner, owner.functions[resolved], (None, None), depth + 1)
            return
        if not isinstance(callee, ast.Attribute):
            return
        base = callee.value
        if isinstance(base, ast.Call) and unparse(base.func) == "super":
            mro = self._mro(*cls_ctx)
            for mod, cls in mro[1:]:
                m_mod, _m_cls, method = self._method(mod, cls, callee.attr)
                if method is not None:
                    self.collect(m_mod, method, cls_ctx, depth + 1)
                    return
            return
        base_text = unparse(base)
        if base_text == "cls" and cls_ctx[1] is not None:
            owner, node = cls_ctx
        else:
            owner, node = self._class(module, base_text)
        if node is None:
            return
        m_mod, _, method = self._method(owner, node, callee.attr)
        if method is not None and m_mod is not None:
            self.collect(m_mod, method, (owner, node), depth + 1)

"""Static facts from Python source: classes and their fields, messages, environment variables, identifiers.

All functions take parsed ASTs; nothing here imports upstream code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .archive import SourceArchive, module_name

PLACEHOLDER = "{}"
LOG_METHODS = frozenset(
    {
        "warning",
        "warn",
        "warning_once",
        "warning_advice",
        "error",
        "exception",
        "critical",
        "fatal",
        "info",
        "info_once",
        "warning_rank0",
        "info_rank0",
    }
)
# ``create_error_response(message=...)``, ``HTTPException(detail=...)``; ``msg = f"..."`` before a raise or inside an
# exception class's ``__init__``.
MESSAGE_KEYWORDS = frozenset({"message", "msg", "detail", "err_msg", "error_message"})
MESSAGE_VARIABLES = frozenset({"message", "msg", "err_msg", "error_msg", "error_message", "warning_msg", "warn_msg"})
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[hlL]?[diouxXeEfFgGcrsa]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_WS = re.compile(r"\s+")


def unparse(node: Optional[ast.AST]) -> str:
    return "" if node is None else ast.unparse(node)


# --------------------------------------------------------------------------------------------------------------------
# Modules, imports and name resolution
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class ModuleInfo:
    """One parsed module with its import table and top-level assignments."""

    name: str
    path: str
    tree: ast.Module
    imports: Dict[str, str] = field(default_factory=dict)  # local name -> "pkg.module.Name" or "pkg.module"
    assigns: Dict[str, ast.expr] = field(default_factory=dict)  # top-level NAME = <expr>
    classes: Dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: Dict[str, ast.FunctionDef] = field(default_factory=dict)

    @property
    def is_package(self) -> bool:
        return self.path.endswith("__init__.py")


def _absolute_module(current: ModuleInfo, level: int, module: Optional[str]) -> str:
    if level == 0:
        return module or ""
    parts = current.name.split(".")
    if not current.is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{module}" if module else base


def load_module(archive: SourceArchive, path: str) -> ModuleInfo:
    """Parse ``path`` and index its imports, top-level assignments, classes and functions."""
    tree = archive.parse(path)
    info = ModuleInfo(name=module_name(path), path=path, tree=tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute_module(info, node.level, node.module)
            for alias in node.names:
                info.imports.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                info.imports.setdefault(alias.asname or alias.name.split(".")[0], alias.name)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            info.classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.functions[node.name] = node  # type: ignore[assignment]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            info.assigns[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            info.assigns[node.target.id] = node.value
        elif isinstance(node, ast.If):  # TYPE_CHECKING / version branches: keep the first definition seen
            for sub in node.body + node.orelse:
                if isinstance(sub, ast.ClassDef):
                    info.classes.setdefault(sub.name, sub)
                elif isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                    info.assigns.setdefault(sub.targets[0].id, sub.value)
    return info


class ModuleSet:
    """The parsed modules of one archive, loaded lazily, with cross-module class lookup."""

    def __init__(self, archive: SourceArchive) -> None:
        self.archive = archive
        self._by_name: Dict[str, Optional[ModuleInfo]] = {}

    def get(self, name: str) -> Optional[ModuleInfo]:
        if name not in self._by_name:
            path = None
            for candidate in (name.replace(".", "/") + ".py", name.replace(".", "/") + "/__init__.py"):
                if self.archive.has(candidate):
                    path = candidate
                    break
            self._by_name[name] = load_module(self.archive, path) if path else None
        return self._by_name[name]

    def by_path(self, path: str) -> ModuleInfo:
        module = self.get(module_name(path))
        assert module is not None, path
        return module

    def resolve(self, module: ModuleInfo, dotted: str, _depth: int = 0) -> Tuple[Optional[ModuleInfo], str]:
        """Follow imports until the module that defines ``dotted`` (a local name); returns (module, name).

        When the definition lives outside this archive the module is ``None`` and the name is fully qualified.
        """
        head, _, rest = dotted.partition(".")
        if head in module.classes or head in module.assigns or head in module.functions:
            return module, dotted
        target = module.imports.get(head)
        if target is None or _depth > 8:
            return None, dotted
        qualified = f"{target}.{rest}" if rest else target
        # Try the longest module prefix present in the archive.
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            candidate = self.get(".".join(parts[:cut]))
            if candidate is not None:
                remainder = ".".join(parts[cut:])
                if candidate is module and remainder == dotted:
                    return None, qualified
                return self.resolve(candidate, remainder, _depth + 1)
        return None, qualified

    def find_class(self, module: ModuleInfo, name: str) -> Tuple[Optional[ModuleInfo], Optional[ast.ClassDef], str]:
        """Locate the ClassDef a local name refers to; third item is the qualified name."""
        owner, resolved = self.resolve(module, name)
        if owner is None:
            return None, None, resolved
        node = owner.classes.get(resolved)
        return owner, node, f"{owner.name}.{resolved}"


# --------------------------------------------------------------------------------------------------------------------
# Classes and fields
# --------------------------------------------------------------------------------------------------------------------

_FIELD_FACTORIES = frozenset({"field", "Field", "HfArg", "PrivateAttr"})


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def literal_strings(node: Optional[ast.AST]) -> List[str]:
    """String constants inside a list/tuple/set literal (or one string constant)."""
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def field_record(stmt: ast.AnnAssign) -> Optional[Tuple[str, Dict[str, object]]]:
    """(name, {"type", "default", ...}) for one annotated class attribute, or None for ClassVar/private attrs."""
    if not isinstance(stmt.target, ast.Name):
        return None
    name = stmt.target.id
    type_text = unparse(stmt.annotation)
    if type_text.startswith(("ClassVar", "typing.ClassVar")):
        return None
    record: Dict[str, object] = {"type": type_text}
    value = stmt.value
    if value is None:
        record["default"] = None  # required
        return name, record
    if isinstance(value, ast.Call) and _call_name(value) in _FIELD_FACTORIES:
        if _call_name(value) == "PrivateAttr":
            return None
        default = _keyword(value, "default")
        factory = _keyword(value, "default_factory")
        if default is None and value.args and _call_name(value) == "Field":
            default = value.args[0]
        if default is not None and not (isinstance(default, ast.Constant) and default.value is Ellipsis):
            record["default"] = unparse(default)
        elif isinstance(factory, ast.Lambda):
            record["default"] = unparse(factory.body)
        elif factory is not None:
            record["default"] = f"{unparse(factory)}()"
        else:
            record["default"] = None
        init = _keyword(value, "init")
        if isinstance(init, ast.Constant) and init.value is False:
            record["init"] = False
        alias = _keyword(value, "alias")
        if isinstance(alias, ast.Constant) and isinstance(alias.value, str):
            record["alias"] = alias.value
        aliases = _keyword(value, "aliases")
        metadata = _keyword(value, "metadata")
        if isinstance(metadata, ast.Dict):
            for key, item in zip(metadata.keys, metadata.values):
                if isinstance(key, ast.Constant) and key.value == "aliases":
                    aliases = item
        alias_list = literal_strings(aliases)
        if alias_list:
            record["aliases"] = alias_list
    else:
        record["default"] = unparse(value)
    return name, record


def class_fields(node: ast.ClassDef) -> Dict[str, Dict[str, object]]:
    """Annotated attributes declared in the class body (dataclass, pydantic or plain)."""
    fields: Dict[str, Dict[str, object]] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign):
            rec = field_record(stmt)
            if rec is not None:
                fields[rec[0]] = rec[1]
    return fields


def init_params(node: ast.ClassDef) -> Optional[Dict[str, Dict[str, object]]]:
    """Keyword parameters of an explicit ``__init__``; None when the class defines none."""
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            return function_params(stmt, skip_first=True)
    return None


def function_params(func: ast.FunctionDef, skip_first: bool = False) -> Dict[str, Dict[str, object]]:
    args = func.args
    positional = args.posonlyargs + args.args
    if skip_first and positional:
        positional = positional[1:]
    defaults: List[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params: Dict[str, Dict[str, object]] = {}
    for arg, default in zip(positional, defaults):
        params[arg.arg] = {"type": unparse(arg.annotation), "default": unparse(default) if default else None}
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params[arg.arg] = {"type": unparse(arg.annotation), "default": unparse(default) if default else None}
    return params


def base_names(node: ast.ClassDef) -> List[str]:
    """The base-class expressions of a class as dotted text (generic parameters dropped)."""
    names = []
    for base in node.bases:
        if isinstance(base, ast.Subscript):
            base = base.value
        text = unparse(base)
        if text and text not in ("object", "Generic", "ABC", "Protocol"):
            names.append(text)
    return names


def class_record(modules: ModuleSet, module: ModuleInfo, node: ast.ClassDef) -> Dict[str, object]:
    """Fields, explicit ``__init__`` params and qualified bases of one class."""
    bases = []
    for base in base_names(node):
        owner, resolved = modules.resolve(module, base)
        bases.append(f"{owner.name}.{resolved}" if owner is not None else resolved)
    record: Dict[str, object] = {"bases": bases, "fields": class_fields(node)}
    params = init_params(node)
    if params is not None:
        record["init_params"] = params
    return record


def add_base_closure(modules: ModuleSet, classes: Dict[str, Dict[str, object]], stop: Iterable[str] = ()) -> None:
    """Add every base class reachable inside the archive, so inherited fields can be resolved."""
    stop_set = set(stop)
    pending = [b for rec in classes.values() for b in rec["bases"]]  # type: ignore[union-attr]
    while pending:
        qualified = pending.pop()
        if qualified in classes or qualified in stop_set:
            continue
        module_part, _, name = qualified.rpartition(".")
        module = modules.get(module_part)
        if module is None or name not in module.classes:
            continue
        rec = class_record(modules, module, module.classes[name])
        classes[qualified] = rec
        pending.extend(rec["bases"])  # type: ignore[arg-type]


def literal_choices(modules: ModuleSet, module: ModuleInfo, annotation: Optional[ast.expr], depth: int = 0) -> List:
    """Constant values of a ``Literal[...]`` annotation, following module-level type aliases."""
    if annotation is None or depth > 6:
        return []
    if isinstance(annotation, ast.Subscript):
        head = unparse(annotation.value)
        if head.endswith("Literal"):
            inner = annotation.slice
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            values: List = []
            for elt in elts:
                if isinstance(elt, ast.Constant):
                    values.append(elt.value)
                else:
                    values.extend(literal_choices(modules, module, elt, depth + 1))
            return values
        if head.endswith(("Optional", "Annotated")):
            inner = annotation.slice
            first = inner.elts[0] if isinstance(inner, ast.Tuple) else inner
            return literal_choices(modules, module, first, depth + 1)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return literal_choices(modules, module, annotation.left, depth + 1) + literal_choices(
            modules, module, annotation.right, depth + 1
        )
    if isinstance(annotation, (ast.Name, ast.Attribute)):
        owner, resolved = modules.resolve(module, unparse(annotation))
        if owner is not None and resolved in owner.assigns:
            return literal_choices(modules, owner, owner.assigns[resolved], depth + 1)
    return []


# --------------------------------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------------------------------


def normalise_message(text: str) -> str:
    """Collapse whitespace; the placeholder for a formatted field is ``{}``."""
    return _WS.sub(" ", text).strip()


class _MessageBuilder:
    """Turns a message expression into a template, resolving simple local and module-level names."""

    def __init__(self, module: ModuleInfo, scope: Optional[ast.AST]) -> None:
        self.module = module
        self.local: Dict[str, List[ast.expr]] = {}
        if scope is not None:
            for node in ast.walk(scope):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    self.local.setdefault(node.targets[0].id, []).append(node.value)
                elif (
                    isinstance(node, ast.AugAssign)
                    and isinstance(node.target, ast.Name)
                    and isinstance(node.op, ast.Add)
                ):
                    self.local.setdefault(node.target.id, []).append(
                        ast.BinOp(left=ast.Name(id=node.target.id), op=ast.Add(), right=node.value)
                    )

    def template(self, node: ast.expr, depth: int = 0) -> Optional[str]:
        if depth > 6:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            out = []
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    out.append(part.value)
                else:
                    out.append(PLACEHOLDER)
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.template(node.left, depth + 1)
            right = self.template(node.right, depth + 1)
            if left is None and right is None:
                return None
            return (left if left is not None else PLACEHOLDER) + (right if right is not None else PLACEHOLDER)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.template(node.left, depth + 1)
            return percent_to_placeholder(left) if left is not None else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            base = self.template(node.func.value, depth + 1)
            return _FORMAT_FIELD.sub(PLACEHOLDER, base).replace("{{", "{").replace("}}", "}") if base else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            return PLACEHOLDER
        if isinstance(node, ast.Name):
            candidates = self.local.get(node.id)
            if candidates:
                # Several assignments (if/else branches): take the first that yields text.
                for value in candidates:
                    text = self.template(value, depth + 1)
                    if text is not None:
                        return text
                return None
            value = self.module.assigns.get(node.id)
            if value is not None:
                return self.template(value, depth + 1)
        return None


def percent_to_placeholder(text: str) -> str:
    return _PERCENT_FIELD.sub(PLACEHOLDER, text).replace("%%", "%")


def _message_arg(call: ast.Call) -> Optional[ast.expr]:
    if call.args:
        return call.args[0]
    for name in ("msg", "message", "detail"):
        value = _keyword(call, name)
        if value is not None:
            return value
    return None


def _is_logger_call(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in LOG_METHODS:
        return False
    owner = unparse(func.value).lower()
    return "log" in owner


def _is_warn_call(call: ast.Call) -> bool:
    name = unparse(call.func)
    return name in ("warnings.warn", "warn", "warnings.warn_explicit", "logging.warning", "logging.error")


def iter_messages(module: ModuleInfo) -> Iterator[str]:
    """Templates of raised exceptions, assertion messages, logged and warned messages in one module."""
    scopes: List[Tuple[Optional[ast.AST], List[ast.AST]]] = []
    top_level: List[ast.AST] = []
    for node in module.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.append((node, [node]))
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    scopes.append((sub, [sub]))
                else:
                    top_level.append(sub)
        else:
            top_level.append(node)
    scopes.append((None, top_level))
    for scope, roots in scopes:
        builder = _MessageBuilder(module, scope)
        for root in roots:
            for node in ast.walk(root):
                expr: Optional[ast.expr] = None
                percent_args = False
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    expr = _message_arg(node.exc)
                elif isinstance(node, ast.Assert) and node.msg is not None:
                    expr = node.msg
                elif isinstance(node, ast.Call) and (_is_logger_call(node) or _is_warn_call(node)):
                    expr = _message_arg(node)
                    percent_args = len(node.args) > 1
                elif isinstance(node, ast.Call) and any(kw.arg in MESSAGE_KEYWORDS for kw in node.keywords):
                    expr = next(kw.value for kw in node.keywords if kw.arg in MESSAGE_KEYWORDS)
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    target_name = (
                        target.id
                        if isinstance(target, ast.Name)
                        else (target.attr if isinstance(target, ast.Attribute) else "")
                    )
                    if target_name in MESSAGE_VARIABLES:
                        expr = node.value
                if expr is None:
                    continue
                text = builder.template(expr)
                if text is None:
                    continue
                if percent_args:
                    text = percent_to_placeholder(text)
                text = normalise_message(text)
                if message_is_useful(text):
                    yield text


def message_is_useful(text: str) -> bool:
    """Keep templates with some real words: at least 12 letters outside placeholders."""
    letters = sum(ch.isalpha() for ch in text.replace(PLACEHOLDER, ""))
    return letters >= 12


def collect_messages(modules: ModuleSet, paths: Iterable[str]) -> List[str]:
    found: Set[str] = set()
    for path in paths:
        found.update(iter_messages(modules.by_path(path)))
    return sorted(found)


# --------------------------------------------------------------------------------------------------------------------
# Environment variables
# --------------------------------------------------------------------------------------------------------------------

_ENV_READ_CALLS = frozenset({"getenv", "get", "__contains__", "pop"})
_ENV_SET_CALLS = frozenset({"setdefault", "putenv", "__setitem__", "update"})


def _is_environ(node: ast.AST) -> bool:
    text = unparse(node)
    return text.endswith("environ") or text in ("env", "envs")


def _env_strings(node: ast.AST, consts: Optional[Dict[str, str]] = None) -> List[str]:
    """Env-var-shaped strings in ``node``: constants, and ``prefix + "NAME"`` joins whose parts resolve."""
    consts = consts or {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        text = _const_text(node, consts)
        return [text] if text is not None and _ENV_NAME.match(text) else []
    if isinstance(node, ast.JoinedStr):
        return []
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and _ENV_NAME.match(node.value) else []
    out = []
    for child in ast.iter_child_nodes(node):
        out.extend(_env_strings(child, consts))
    return out


def _const_text(node: ast.AST, consts: Dict[str, str]) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _const_text(node.left, consts), _const_text(node.right, consts)
        return left + right if left is not None and right is not None else None
    return None


def _string_assignments(tree: ast.AST) -> Dict[str, str]:
    """``name = "literal"`` anywhere in a module (first one wins); used to resolve ``prefix + "X"``."""
    out: Dict[str, str] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.setdefault(node.targets[0].id, node.value.value)
    return out


def iter_env_vars(tree: ast.AST) -> Iterator[Tuple[str, str]]:
    """(NAME, "read"|"set") for literal environment variable names used in a module."""
    assigned_targets: Set[int] = set()
    consts = _string_assignments(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript):
                    assigned_targets.add(id(target))
                    owner = unparse(target.value).lower()
                    if "env" in owner:
                        for name in _env_strings(target.slice, consts):
                            yield name, "set"
        if isinstance(node, ast.Subscript) and id(node) not in assigned_targets and _is_environ(node.value):
            for name in _env_strings(node.slice, consts):
                yield name, "read"
        elif isinstance(node, ast.Call):
            func = node.func
            func_text = unparse(func)
            attr = func.attr if isinstance(func, ast.Attribute) else func_text
            if isinstance(func, ast.Attribute) and _is_environ(func.value):
                kind = "set" if attr in _ENV_SET_CALLS else "read"
                for arg in node.args[:1]:
                    if attr == "update" and isinstance(arg, ast.Dict):
                        for key in arg.keys:
                            if key is not None:
                                for name in _env_strings(key, consts):
                                    yield name, "set"
                    else:
                        for name in _env_strings(arg, consts):
                            yield name, kind
                for kw in node.keywords:
                    if attr == "update" and kw.arg and _ENV_NAME.match(kw.arg):
                        yield kw.arg, "set"
            elif func_text in ("os.getenv", "getenv", "os.putenv"):
                for name in _env_strings(node.args[0], consts) if node.args else []:
                    yield name, "set" if func_text.endswith("putenv") else "read"
            elif "env" in func_text.lower() and "environ" not in func_text.lower():
                # Helpers such as parse_flag_from_env("X"), get_int_from_env(["X", "Y"]), _get_env_var("X").
                for arg in node.args[:1]:
                    for name in _env_strings(arg, consts):
                        if "_" in name:
                            yield name, "read"
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            and any(_is_environ(c) for c in node.comparators)
        ):
            for name in _env_strings(node.left, consts):
                yield name, "read"


def merge_env(target: Dict[str, Set[str]], pairs: Iterable[Tuple[str, str]]) -> None:
    for name, kind in pairs:
        target.setdefault(name, set()).add(kind)


def env_table(found: Dict[str, Set[str]]) -> Dict[str, str]:
    """``{NAME: "read" | "set" | "read,set"}`` with sorted keys."""
    return {name: ",".join(sorted(kinds)) for name, kinds in sorted(found.items())}


# --------------------------------------------------------------------------------------------------------------------
# Identifiers
# --------------------------------------------------------------------------------------------------------------------


def _keep_identifier(name: str) -> bool:
    if name.startswith("__"):
        return False
    core = name.lstrip("_")
    return "_" in core or (core[:1].isupper() and any(c.islower() for c in core))


def iter_identifiers(tree: ast.Module, with_params: bool = True, top_level_only: bool = False) -> Iterator[str]:
    """Public-ish names: module-level functions/classes/constants, methods, class attributes, ``self.x``."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id
    if top_level_only:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield sub.name
                    if with_params or sub.name == "__init__":
                        for arg in sub.args.args + sub.args.kwonlyargs:
                            if arg.arg != "self":
                                yield arg.arg
                elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                    yield sub.target.id
                elif isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        if isinstance(target, ast.Name):
                            yield target.id
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            yield node.attr


_SNAKE = re.compile(r"^_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
_KEY_METHODS = frozenset({"get", "setdefault", "pop", "getattr", "hasattr", "setattr", "delattr"})


def iter_string_keys(tree: ast.Module) -> Iterator[str]:
    """``snake_case`` names code uses as data keys: dict keys, ``x["key"]``, ``.get("key")``, ``getattr(o, "key")``,
    and keyword-argument names of calls (``foo(key=...)``)."""
    for node in ast.walk(tree):
        candidates: List[ast.AST] = []
        if isinstance(node, ast.Dict):
            candidates = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Subscript):
            candidates = [node.slice]
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            if name in _KEY_METHODS:
                candidates = list(node.args[:2])
            for kw in node.keywords:
                if kw.arg and _SNAKE.match(kw.arg):
                    yield kw.arg
        for cand in candidates:
            if isinstance(cand, ast.Constant) and isinstance(cand.value, str) and _SNAKE.match(cand.value):
                yield cand.value


def collect_identifiers(
    modules: ModuleSet,
    paths: Iterable[str],
    with_params: bool = True,
    top_level_only: bool = False,
    with_keys: bool = False,
) -> List[str]:
    found: Set[str] = set()
    for path in paths:
        tree = modules.by_path(path).tree
        found.update(n for n in iter_identifiers(tree, with_params, top_level_only) if _keep_identifier(n))
        if with_keys:
            found.update(iter_string_keys(tree))
    return sorted(found)


def collect_literal_values(modules: ModuleSet, paths: Iterable[str]) -> List[str]:
    """String choices of ``Literal[...]`` annotations and string members of Enum-like classes."""
    found: Set[str] = set()
    for path in paths:
        module = modules.by_path(path)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Subscript) and unparse(node.value).endswith("Literal"):
                inner = node.slice
                for elt in inner.elts if isinstance(inner, ast.Tuple) else [inner]:
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        found.add(elt.value)
            elif isinstance(node, ast.ClassDef) and any("Enum" in b for b in base_names(node)):
                for sub in node.body:
                    if isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Name):
                        found.add(sub.targets[0].id)
                        if isinstance(sub.value, ast.Constant) and isinstance(sub.value.value, str):
                            found.add(sub.value.value)
    return sorted(v for v in found if v and len(v) <= 80 and "\n" not in v)

"""Checks of Python blocks: imports and ``*Config(...)`` keywords."""

from __future__ import annotations

import ast
from typing import Dict, Set

from .common import CLASS_RE, IMPORT_PACKAGES, UNJUDGED_ROOT_IMPORTS
from .failures import Failure
from .helpers import _package_label, _parse_python
from .markdown import CodeBlock
from .upstream import Context


class PythonChecks:
    """Imports and calls in Python blocks (part of ``Checker``)."""

    def check_python_block(self, rel: str, block: CodeBlock, ctx: Context) -> None:
        source = "\n".join(block.lines)
        if block.lang == "pycon":
            source = "\n".join(text[4:] for text in block.lines if text.startswith((">>> ", "... ")))
        tree = _parse_python(source)
        if tree is None:
            self.failures.append(
                Failure(
                    rel,
                    block.start_line,
                    "python-syntax",
                    block.lang,
                    "a parsable Python block",
                    note="the block does not parse; use a `text` fence for pseudo-code",
                )
            )
            return
        imported: Dict[str, str] = {}
        local_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            line = block.start_line + getattr(node, "lineno", 1) - 1
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                package = IMPORT_PACKAGES.get(node.module.split(".", 1)[0])
                for alias in node.names:
                    if package:
                        imported[alias.asname or alias.name] = package
                self._check_import(rel, line, node, ctx)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if ctx.module_exists(alias.name) is False:
                        self.fail(
                            rel,
                            line,
                            "module",
                            alias.name,
                            f"upstream modules@{ctx.label}",
                            ctx.modules.get(IMPORT_PACKAGES[alias.name.split(".")[0]], set()),
                        )
            elif isinstance(node, ast.Call):
                self._check_call(rel, line, node, ctx, imported, local_classes)
            elif (
                isinstance(node, ast.Subscript)
                and ast.unparse(node.value).endswith("environ")
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                self.check_env(rel, line, node.slice.value, ctx)

    def _check_import(self, rel: str, line: int, node: ast.ImportFrom, ctx: Context) -> None:
        module = node.module or ""
        exists = ctx.module_exists(module)
        if exists is None:
            return
        self.record(rel, line, "module", module)
        if not exists:
            package = IMPORT_PACKAGES[module.split(".", 1)[0]]
            self.fail(rel, line, "module", module, f"{package} modules@{ctx.label}", ctx.modules.get(package, set()))
            return
        package = IMPORT_PACKAGES[module.split(".", 1)[0]]
        if module in UNJUDGED_ROOT_IMPORTS:
            return
        names = ctx.package_names.get(package, set())
        for alias in node.names:
            if alias.name == "*":
                continue
            self.record(rel, line, "import", f"{module}.{alias.name}")
            if alias.name not in names and ctx.module_exists(f"{module}.{alias.name}") is not True:
                self.fail(
                    rel,
                    line,
                    "import",
                    f"{module}.{alias.name}",
                    f"names in {package}@{_package_label(ctx, package)}",
                    [n for n in names if n[:1] == alias.name[:1]],
                )

    def _check_call(
        self, rel: str, line: int, node: ast.Call, ctx: Context, imported: Dict[str, str], local_classes: Set[str]
    ) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("getenv", "get", "setdefault", "pop") and node.args:
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            if owner.endswith("environ") or ast.unparse(func) == "os.getenv":
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    self.check_env(rel, line, first.value, ctx)
            return
        if not name or name in local_classes:
            return
        is_claim_class = bool(CLASS_RE.match(name))
        infos = ctx.class_infos(name, imported.get(name))
        if not infos:
            if is_claim_class:
                self.record(rel, line, "class", name)
                self.fail(
                    rel,
                    line,
                    "class",
                    name,
                    f"upstream classes@{ctx.label}",
                    [n for n in ctx.classes if n[:1].isupper()],
                )
            return
        keywords: Set[str] = set()
        for info in infos if imported.get(name) is None else [i for i in infos if i.package == imported[name]] or infos:
            keywords |= info.keywords
        if not keywords and all(i.init_params is None for i in infos):
            return
        for kw in node.keywords:
            if kw.arg is None:
                continue
            self.record(rel, line, "kwarg", f"{name}.{kw.arg}")
            if kw.arg not in keywords:
                where = f"{name} fields@{infos[0].package} {ctx.selection.get(infos[0].package, ['?'])[0]}"
                self.fail(rel, line, "kwarg", f"{name}({kw.arg}=...)", where, keywords)

"""The layout of scripts/ and the one-way flow of its code, read from the source (ast), never by importing it.

Rules (each scan below is shown to catch a planted violation):

- (a) argparse stays in the commands. A module of a package (scripts/<pkg>/) imports argparse only when it is listed
  in ARGPARSE_MODULES with its reason (the shared --help formatter and flag types build parsers, they never read a
  parsed one); no function of a package has a parameter named ``args`` or annotated ``Namespace``; and a command
  passes no parsed Namespace to a function it imports from a package.
- (b) Stages flow one way: shared < inputs < compute < judge < render < entry. A module may import modules of its
  own stage or lower ones; a tool package imports only itself and ``common``; the import graph has no cycle.
  A module's stage comes from its name (``inputs``/``load``: inputs; ``rules*``: judge; ``render``: render;
  ``base``/``data`` and everything in ``common``: shared; any other: compute) unless STAGE_OF names it.
- (c) ``ls scripts/`` shows the commands (files that run ``main`` under ``__main__``) and the packages, and the
  data files listed in TOP_LEVEL_DATA with the reason they sit there.
- (d) Every module of a package has tests/test_<pkg>_<module>.py, or is listed in UNTESTED_BY_NAME with a reason.

The planner (scripts/planner/, scripts/plan_training.py) is being reworked: its current violations are listed in
PLANNER_NOT_YET and run as strict xfail, so each one that is fixed fails here until its entry is removed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

from conftest import REPO_ROOT, SCRIPTS_DIR

TESTS_DIR = REPO_ROOT / "tests"
STAGES = ("shared", "inputs", "compute", "judge", "render", "entry")
SHARED_PACKAGE = "common"
STAGE_OF: Dict[str, str] = {
    "diagnostic.report": "judge",  # gathers every fact, then judges: the report before it is rendered
    "diagnostic.crosschecks": "judge",
    "diagnostic.release_lines": "render",  # the release-differences section as text, for diagnostic.render
    "nodes.compare": "judge",
    "preflight.report": "render",  # builds the judged report and its text
    "planner.assemble": "judge",
    "planner.templates": "render",
    "planner.verdict": "judge",  # one verdict from the plan and the lint findings
    "stack.goals": "shared",  # the install planner's table of goals (what each backend id needs), read by every stage
}
ARGPARSE_MODULES: Dict[str, str] = {
    "common/output.py": "HelpFormatter: the --help layout every command's parser uses",
    "common/values.py": "bounded_float/bounded_int: argparse type= callables (they raise ArgumentTypeError)",
}
TOP_LEVEL_DATA: Dict[str, str] = {
    "check_optional_backends.schema.json": "the diagnostic's --json schema; its --help names this path",
}
UNTESTED_BY_NAME: Dict[str, str] = {
    "diagnostic/builds.py": "torch/DeepSpeed/bitsandbytes builds: tests/test_check_optional_backends.py",
    "diagnostic/compat.py": "compatibility rows: tests/test_check_optional_backends.py, test_release_history.py",
    "diagnostic/report.py": "the whole report: tests/test_check_optional_backends.py and its schema test",
    "stack/goals.py": "the goal table: tests/test_plan_install.py and tests/test_stack_resolve.py",
    "stack/inputs.py": "flags and the live environment: tests/test_plan_install.py (bad input, live metadata)",
    "stack/judge.py": "ranking and next steps: tests/test_stack_resolve.py and tests/test_stack_pip_answers.py",
    "stack/render.py": "text and --json: tests/test_plan_install.py",
}
# (scan, subject) pairs still to fix; each runs as a strict xfail until its entry is removed.
PLANNER_NOT_YET: Dict[Tuple[str, str], str] = {}


# --------------------------------------------------------------------------------------------------------------
# Reading the tree
# --------------------------------------------------------------------------------------------------------------


def packages(root: Path) -> List[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def commands(root: Path) -> List[Path]:
    return sorted(p for p in root.glob("*.py") if "__main__" in p.read_text(encoding="utf-8"))


def package_modules(root: Path) -> List[Path]:
    return sorted(p for pkg in packages(root) for p in (root / pkg).glob("*.py") if p.name != "__init__.py")


def module_name(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def stage(name: str) -> str:
    if "." not in name:
        return "entry"
    package, leaf = name.split(".", 1)
    if name in STAGE_OF:
        return STAGE_OF[name]
    if package == SHARED_PACKAGE or leaf in ("base", "data"):
        return "shared"
    if leaf in ("inputs", "load"):
        return "inputs"
    if leaf.startswith("rules"):
        return "judge"
    if leaf == "render":
        return "render"
    return "compute"


def imports(root: Path, path: Path) -> Set[str]:
    """Modules of ``root`` that ``path`` imports (at the top or inside a function)."""
    known = {module_name(root, p) for p in root.rglob("*.py")}
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if candidate in known:
                    found.add(candidate)
                elif node.module in known:
                    found.add(node.module)
    return found


def display(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


# --------------------------------------------------------------------------------------------------------------
# The scans: each returns the violations it finds
# --------------------------------------------------------------------------------------------------------------


def _is_namespace(annotation: Optional[ast.expr]) -> bool:
    text = ast.unparse(annotation) if annotation is not None else ""
    return text.split("[")[0].split(".")[-1].strip("'\"") == "Namespace" and "SimpleNamespace" not in text


def namespace_in_package_module(root: Path, path: Path) -> List[str]:
    """(a) in a package module: argparse imported (unless listed), a parameter ``args`` or typed Namespace."""
    where = display(root, path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and where not in ARGPARSE_MODULES:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if "argparse" in names:
                found.append(f"{where}:{node.lineno}: imports argparse")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for param in params:
                if param.arg == "args" or _is_namespace(param.annotation):
                    found.append(f"{where}:{node.lineno}: {node.name}() takes {param.arg!r}, a parsed command line")
    return found


def namespace_passed_down(root: Path, path: Path) -> List[str]:
    """(a) in a command: a parsed Namespace handed to a function imported from a package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package_names = set(packages(root))
    imported: Set[str] = set()  # functions and module aliases that come from a package
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in package_names:
            imported.update(a.asname or a.name for a in node.names)
    parsed: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr in ("parse_args", "parse_known_args"):
                parsed.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            parsed.update(p.arg for p in params if _is_namespace(p.annotation))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        callee = func.id if isinstance(func, ast.Name) else ""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            callee = func.value.id if func.value.id in imported else ""
        if callee not in imported:
            continue
        values = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(v, ast.Name) and v.id in parsed for v in values):
            found.append(f"{display(root, path)}:{node.lineno}: passes a parsed Namespace to {ast.unparse(func)}()")
    return found


def stage_violations(root: Path, path: Path) -> List[str]:
    """(b) imports of a higher stage, or of another tool package."""
    name = module_name(root, path)
    own = stage(name)
    package = name.split(".")[0] if "." in name else None
    found = []
    for target in sorted(imports(root, path)):
        target_package = target.split(".")[0] if "." in target else None
        if package and target_package not in (package, SHARED_PACKAGE):
            found.append(f"{name} ({own}) imports {target}: another tool's package (shared code goes to common)")
        elif STAGES.index(stage(target)) > STAGES.index(own):
            found.append(f"{name} ({own}) imports {target} ({stage(target)}), a later stage")
    return found


def import_cycles(root: Path, within: Optional[str] = None) -> List[str]:
    """(b) cycles in the import graph of ``root`` (of one package's modules when ``within`` is given)."""
    paths = [p for p in root.rglob("*.py") if p.name != "__init__.py"]
    graph = {module_name(root, p): imports(root, p) for p in paths}
    if within:
        graph = {
            k: {t for t in v if t.startswith(within + ".")} for k, v in graph.items() if k.startswith(within + ".")
        }
    cycles: List[str] = []
    state: Dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, trail: List[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*trail[trail.index(target) :], target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return cycles


def stray_top_level(root: Path) -> List[str]:
    """(c) entries of ``ls scripts/`` that are neither a command, a package nor listed data."""
    allowed = {p.name for p in commands(root)} | set(packages(root)) | set(TOP_LEVEL_DATA)
    return sorted(
        p.name
        for p in root.iterdir()
        if p.name not in allowed and p.name != "__pycache__" and not p.name.startswith(".")
    )


def missing_test(root: Path, tests: Path, path: Path) -> List[str]:
    """(d) the module's test file by name, unless the module is listed."""
    where = display(root, path)
    expected = tests / f"test_{path.parent.name}_{path.stem}.py"
    if expected.is_file() or where in UNTESTED_BY_NAME:
        return []
    return [f"{where}: no {expected.relative_to(tests.parent).as_posix()}"]


# --------------------------------------------------------------------------------------------------------------
# The bundle's scripts/
# --------------------------------------------------------------------------------------------------------------


def _params(scan: str, subjects: List[str]) -> List:
    params = []
    for subject in subjects:
        reason = PLANNER_NOT_YET.get((scan, subject))
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(subject, id=subject, marks=marks))
    return params


MODULES = [display(SCRIPTS_DIR, p) for p in package_modules(SCRIPTS_DIR)]
COMMANDS = [p.name for p in commands(SCRIPTS_DIR)]


@pytest.mark.parametrize("subject", _params("namespace", MODULES))
def test_no_package_module_sees_the_command_line(subject: str) -> None:
    assert namespace_in_package_module(SCRIPTS_DIR, SCRIPTS_DIR / subject) == []


@pytest.mark.parametrize("subject", _params("namespace", COMMANDS))
def test_commands_pass_a_request_not_the_namespace(subject: str) -> None:
    assert namespace_passed_down(SCRIPTS_DIR, SCRIPTS_DIR / subject) == []


@pytest.mark.parametrize("subject", _params("stages", MODULES + COMMANDS))
def test_imports_flow_from_later_stages_to_earlier_ones(subject: str) -> None:
    assert stage_violations(SCRIPTS_DIR, SCRIPTS_DIR / subject) == []


@pytest.mark.parametrize("subject", _params("cycles", packages(SCRIPTS_DIR)))
def test_no_import_cycle_within_a_package(subject: str) -> None:
    assert import_cycles(SCRIPTS_DIR, within=subject) == []


def test_no_import_cycle_across_scripts() -> None:
    """Cycles inside the planner are its own xfail above; everything else: none."""
    assert [c for c in import_cycles(SCRIPTS_DIR) if not c.startswith("planner.")] == []


def test_scripts_folder_shows_the_commands_and_packages() -> None:
    assert stray_top_level(SCRIPTS_DIR) == []
    shown = {"check_optional_backends.py", "check_vllm_server.py", "compare_nodes.py", "plan_training.py"}
    assert shown | {"plan_install.py", "triage_log.py", "find_fix.py"} <= set(COMMANDS)
    for path in commands(SCRIPTS_DIR):
        assert "def build_parser(" in path.read_text(encoding="utf-8"), path.name  # the claim checker reads it


@pytest.mark.parametrize("subject", _params("tests", MODULES))
def test_every_module_has_a_test_file_named_after_it(subject: str) -> None:
    assert missing_test(SCRIPTS_DIR, TESTS_DIR, SCRIPTS_DIR / subject) == []


def test_listed_exceptions_still_exist() -> None:
    """A list entry for a file that is gone hides nothing; remove it."""
    for listed in [*ARGPARSE_MODULES, *UNTESTED_BY_NAME, *TOP_LEVEL_DATA]:
        assert (SCRIPTS_DIR / listed).exists(), listed
    for scan, subject in PLANNER_NOT_YET:
        assert (SCRIPTS_DIR / subject).exists(), (scan, subject)
    for name in STAGE_OF:
        assert (SCRIPTS_DIR / (name.replace(".", "/") + ".py")).is_file(), name


# --------------------------------------------------------------------------------------------------------------
# Each scan catches a planted violation
# --------------------------------------------------------------------------------------------------------------


def plant(root: Path, files: Dict[str, str]) -> Path:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


CLEAN = {
    "tool.py": "from pkg.inputs import load\nfrom pkg.render import show\n\ndef build_parser(): ...\n\n"
    "def main():\n    args = build_parser().parse_args()\n    show(load(args.path))\n\n"
    "if __name__ == '__main__':\n    main()\n",
    "pkg/__init__.py": "",
    "pkg/inputs.py": "from common.read import read\n\ndef load(path: str) -> str:\n    return read(path)\n",
    "pkg/render.py": "from pkg.inputs import load\n\ndef show(text: str) -> str:\n    return text\n",
    "common/__init__.py": "",
    "common/read.py": "def read(path: str) -> str:\n    return path\n",
}


def test_the_clean_sample_passes_every_scan(tmp_path: Path) -> None:
    root = plant(tmp_path / "scripts", CLEAN)
    tests = plant(tmp_path / "tests", {"test_pkg_inputs.py": "", "test_pkg_render.py": "", "test_common_read.py": ""})
    for path in package_modules(root):
        assert namespace_in_package_module(root, path) == [] and stage_violations(root, path) == []
        assert missing_test(root, tests, path) == []
    assert namespace_passed_down(root, root / "tool.py") == []
    assert import_cycles(root) == [] and stray_top_level(root) == []


def test_scan_a_catches_argparse_and_a_namespace_below_the_command(tmp_path: Path) -> None:
    root = plant(
        tmp_path / "scripts",
        {
            **CLEAN,
            "pkg/inputs.py": "import argparse\n\ndef load(args: argparse.Namespace) -> str:\n    return args.path\n",
            "pkg/render.py": "def show(text, args=None):\n    return text\n",
            "tool.py": CLEAN["tool.py"].replace("show(load(args.path))", "show(load(args))"),
        },
    )
    found = namespace_in_package_module(root, root / "pkg" / "inputs.py")
    assert [f.split(": ", 1)[1] for f in found] == ["imports argparse", "load() takes 'args', a parsed command line"]
    assert len(namespace_in_package_module(root, root / "pkg" / "render.py")) == 1
    assert namespace_passed_down(root, root / "tool.py") == ["tool.py:8: passes a parsed Namespace to load()"]


def test_scan_b_catches_a_later_stage_another_package_and_a_cycle(tmp_path: Path) -> None:
    root = plant(
        tmp_path / "scripts",
        {
            **CLEAN,
            "pkg/inputs.py": "from pkg.render import show\nfrom other import rules\n",
            "other/__init__.py": "",
            "other/rules.py": "",
        },
    )
    assert stage_violations(root, root / "pkg" / "inputs.py") == [
        "pkg.inputs (inputs) imports other.rules: another tool's package (shared code goes to common)",
        "pkg.inputs (inputs) imports pkg.render (render), a later stage",
    ]
    assert import_cycles(root) == ["pkg.inputs -> pkg.render -> pkg.inputs"]
    assert import_cycles(root, within="pkg") == ["pkg.inputs -> pkg.render -> pkg.inputs"]


def test_scan_c_catches_a_helper_file_beside_the_commands(tmp_path: Path) -> None:
    root = plant(tmp_path / "scripts", {**CLEAN, "helper_utils.py": "def f(): ...\n", "notes.txt": ""})
    assert stray_top_level(root) == ["helper_utils.py", "notes.txt"]


def test_scan_d_catches_a_module_without_its_test_file(tmp_path: Path) -> None:
    root = plant(tmp_path / "scripts", CLEAN)
    tests = plant(tmp_path / "tests", {"test_pkg_inputs.py": "", "test_inputs.py": ""})
    assert missing_test(root, tests, root / "pkg" / "render.py") == ["pkg/render.py: no tests/test_pkg_render.py"]
    assert missing_test(root, tests, root / "common" / "read.py") == ["common/read.py: no tests/test_common_read.py"]

"""Install paths: manifests, the installed file set, tools/install_skill.py end to end, README blocks, the version.

- Manifests are checked against the fields and types their agent documents: Claude Code's ``marketplace.json``
  (code.claude.com plugins and marketplace reference; its one entry, ``strict: false``, is the plugin's whole
  manifest and its source is ``skills/``, which Codex's plugin route reads too) and Codex's ``agents/openai.yaml``
  (openai/codex ``codex-rs/core-skills/src/loader.rs``: ``interface``, ``dependencies``, ``policy``).
- The installable file set is ``INSTALLED_ENTRIES`` of the tool under ``skills/scaling-and-backends/``, walked without
  caches and dot files; every copy
  install (the tool for each agent, the README's plain copy) must yield exactly that set, and no ``__pycache__``.
- Layouts are read the way each agent reads them: Claude Code, Cursor and Gemini CLI register
  ``<skills>/<folder>/SKILL.md`` one level deep with name = folder; Codex walks the skills folder recursively
  (dot names skipped) and registers every ``SKILL.md`` with its ``agents/openai.yaml``.
- The tool runs as a subprocess with ``HOME`` and the working folder in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import yaml

import bundle_helpers as bundle
from conftest import REPO_ROOT, SKILL_DIR

TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import install_skill as tool  # noqa: E402

SKILL = "scaling-and-backends"
SKILL_REL = Path("skills") / SKILL  # where a checkout holds the skill
AGENT_USER_DIRS = {
    "claude": ".claude/skills",
    "codex": ".agents/skills",
    "cursor": ".cursor/skills",
    "gemini": ".gemini/skills",
}
KEBAB_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
SEMVER_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")
RESERVED_MARKETPLACE_NAMES = {
    "claude-code-marketplace",
    "claude-code-plugins",
    "claude-plugins-official",
    "anthropic-marketplace",
    "anthropic-plugins",
    "agent-skills",
    "life-sciences",
}


def installable(checkout: Path = REPO_ROOT) -> list[str]:
    return tool.installable_files(checkout / SKILL_REL)


def files_under(folder: Path) -> list[str]:
    """Every file under ``folder``, caches and dot files included (nothing hidden from the comparison)."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def run_tool(args: list[str], home: Path, cwd: Path, source: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(
        [sys.executable, str(source / "tools" / "install_skill.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_checkout(tmp_path: Path) -> Path:
    """A copy of this checkout's files as git lists them (what a fresh clone holds), plus a stray cache."""
    clone = tmp_path / "clone"
    for relative in bundle.list_files(REPO_ROOT):
        source = REPO_ROOT / relative
        if source.is_symlink() or not source.is_file():
            continue
        (clone / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, clone / relative)
    cache = clone / SKILL_REL / "scripts" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "versions.cpython-311.pyc").write_bytes(b"\0cache")
    return clone


# ======================================================================================================================
# How each agent reads a skills folder
# ======================================================================================================================


def frontmatter(path: Path) -> dict:
    raw = bundle.split_frontmatter(path.read_text(encoding="utf-8"))
    assert raw is not None, f"{path}: no frontmatter"
    data = yaml.safe_load("\n".join(raw))
    assert isinstance(data, dict)
    return data


def one_level_skills(skills_dir: Path) -> dict[str, Path]:
    """Claude Code, Cursor, Gemini CLI: ``<skills>/<folder>/SKILL.md``; name must equal the folder."""
    found = {}
    for skill_md in sorted(skills_dir.glob("*/SKILL.md")):
        name = frontmatter(skill_md)["name"]
        assert name == skill_md.parent.name, f"{skill_md}: name {name!r} is not the folder name"
        found[name] = skill_md.parent
    return found


def codex_skills(skills_dir: Path) -> dict[str, dict]:
    """Codex: every SKILL.md under the root to depth 6, dot names skipped; name from frontmatter else folder."""
    found: dict[str, dict] = {}

    def walk(folder: Path, depth: int) -> None:
        if depth > 6:
            return
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                walk(entry, depth + 1)
            elif entry.name == "SKILL.md":
                name = frontmatter(entry).get("name") or entry.parent.name
                meta_path = entry.parent / "agents" / "openai.yaml"
                meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
                assert name not in found, f"duplicate Codex skill name {name}"
                found[name] = {"folder": entry.parent, "meta": meta or {}}

    walk(skills_dir, 0)
    return found


def implicit(meta: dict) -> bool:
    return ((meta.get("policy") or {}).get("allow_implicit_invocation", True)) is not False


def assert_loadable(agent: str, skills_dir: Path) -> None:
    """The layout as the agent reads it: one skill named for its folder; for Codex one root and three helpers."""
    if agent == "codex":
        skills = codex_skills(skills_dir)
        assert set(skills) == {SKILL}, "the sub-skill indexes are README.md files, which Codex does not register"
        assert skills[SKILL]["folder"].name == SKILL
        assert not implicit(skills[SKILL]["meta"]), "explicit-only"
        assert skills[SKILL]["meta"]["interface"].get("default_prompt")
    else:
        assert list(one_level_skills(skills_dir)) == [SKILL]
        assert frontmatter(skills_dir / SKILL / "SKILL.md")["disable-model-invocation"] is True


# ======================================================================================================================
# Manifests
# ======================================================================================================================

PLUGIN_FIELDS = {
    "name": str,
    "version": str,
    "description": str,
    "author": dict,
    "homepage": str,
    "repository": str,
    "license": str,
    "keywords": list,
    "skills": (str, list),
    "commands": (str, list),
    "agents": (str, list),
    "hooks": (str, dict, list),
    "mcpServers": (str, dict, list),
    "lspServers": (str, dict, list),
    "outputStyles": (str, list),
}
MARKETPLACE_FIELDS = {"name": str, "owner": dict, "plugins": list, "metadata": dict, "$schema": str, "description": str}
MARKETPLACE_PLUGIN_FIELDS = {
    **PLUGIN_FIELDS,
    "source": (str, dict),
    "category": str,
    "tags": list,
    "strict": bool,
}


def load_json(relative: str) -> dict:
    data = json.loads((REPO_ROOT / relative).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def type_problems(data: dict, fields: dict, where: str) -> list[str]:
    problems = [f"{where}: unknown field {key!r}" for key in data if key not in fields]
    problems += [
        f"{where}.{key}: expected {fields[key]}, got {type(value).__name__}"
        for key, value in data.items()
        if key in fields and not isinstance(value, fields[key])
    ]
    return problems


def plugin_skill_dirs(plugin_root: Path, skills: object) -> list[Path]:
    paths = [skills] if isinstance(skills, str) else list(skills)  # type: ignore[arg-type]
    resolved = []
    for path in paths:
        assert isinstance(path, str) and path.startswith("./"), f"skill path {path!r} must start with ./"
        folder = (plugin_root / path).resolve()
        assert folder == plugin_root.resolve() or plugin_root.resolve() in folder.parents, f"{path} leaves the plugin"
        resolved.append(folder)
    return resolved


def test_claude_marketplace_manifest_matches_the_documented_schema() -> None:
    market = load_json(".claude-plugin/marketplace.json")
    assert type_problems(market, MARKETPLACE_FIELDS, "marketplace.json") == []
    assert KEBAB_RE.match(market["name"]) and market["name"] not in RESERVED_MARKETPLACE_NAMES
    assert isinstance(market["owner"].get("name"), str) and market["owner"]["name"]
    assert len(market["plugins"]) == 1
    entry = market["plugins"][0]
    assert type_problems(entry, MARKETPLACE_PLUGIN_FIELDS, "marketplace.json plugins[0]") == []
    assert KEBAB_RE.match(entry["name"]) and entry["name"] == SKILL
    assert SEMVER_RE.match(entry["version"])
    # The plugin is the skills/ folder alone (what Claude Code and Codex copy into their plugin caches), declared by
    # the marketplace entry itself: no plugin.json, which would have to sit inside the copied folder.
    assert entry["source"] == "./skills", "relative sources start with ./ and resolve inside the marketplace repository"
    assert entry["strict"] is False, "without a plugin.json the marketplace entry is the whole manifest"
    plugin_root = REPO_ROOT / entry["source"]
    assert plugin_skill_dirs(plugin_root, entry["skills"]) == [SKILL_DIR.resolve()], "exactly one skill"
    assert sorted(p.name for p in plugin_root.iterdir()) == [SKILL], (
        "the plugin folder holds the skill and nothing else"
    )
    assert not list(REPO_ROOT.glob("**/.claude-plugin/plugin.json")), "the marketplace entry is the manifest"
    assert not list((SKILL_DIR / "agents").glob("*.md")), "Claude Code reads agents/*.md as subagents"


def test_codex_openai_yaml_matches_the_loader_fields() -> None:
    path = SKILL_DIR / "agents" / "openai.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(data) <= {"interface", "dependencies", "policy"}
    interface = data["interface"]
    allowed = {"display_name", "short_description", "icon_small", "icon_large", "brand_color", "default_prompt"}
    assert set(interface) <= allowed
    assert all(isinstance(value, str) and value.strip() for value in interface.values())
    assert len(interface["display_name"]) <= 64
    assert all(len(interface.get(key, "")) <= 1024 for key in ("short_description", "default_prompt"))
    assert set(data["policy"]) <= {"allow_implicit_invocation", "products"}
    assert data["policy"]["allow_implicit_invocation"] is False
    if "default_prompt" in interface:
        assert f"${SKILL}" in interface["default_prompt"], "Codex mentions a skill explicitly as $name"


def test_every_skill_md_has_codex_metadata_and_no_other_openai_yaml_exists() -> None:
    skill_dirs = {path.parent for path in REPO_ROOT.glob("**/SKILL.md") if "tests" not in path.parts}
    yaml_dirs = {path.parent.parent for path in REPO_ROOT.glob("**/agents/openai.yaml") if "tests" not in path.parts}
    assert skill_dirs == yaml_dirs


# ======================================================================================================================
# Version and changelog
# ======================================================================================================================


def pyproject_version() -> str:
    match = re.search(r'^version = "([^"]+)"$', (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert match
    return match.group(1)


def test_one_version_everywhere() -> None:
    version = pyproject_version()
    market = load_json(".claude-plugin/marketplace.json")
    found = {
        "pyproject.toml": version,
        "SKILL.md metadata.version": frontmatter(SKILL_DIR / "SKILL.md")["metadata"]["version"],
        "install tool": tool.skill_version(SKILL_DIR),
        "marketplace.json metadata.version": market["metadata"]["version"],
        "marketplace.json plugins[0].version": market["plugins"][0]["version"],
    }
    assert set(found.values()) == {version}, found
    assert SEMVER_RE.match(version)


def test_changelog_follows_keep_a_changelog_and_has_the_current_version() -> None:
    text = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com" in text
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased"
    assert pyproject_version() in headings[1:], f"no '## [{pyproject_version()}]' section"
    sections = re.findall(r"^### (\w+)", text, re.M)
    assert set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


# ======================================================================================================================
# The installable set
# ======================================================================================================================


def test_installable_set_is_the_installed_unit_without_development_files() -> None:
    files = installable()
    assert {path.split("/")[0] for path in files} == set(tool.INSTALLED_ENTRIES)
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc") or "/." in f or f.startswith(".")]
    assert not [f for f in files if f.split("/")[0] in {"tests", "tools", ".claude-plugin"}]
    # Same unit as the bundle contract uses.
    assert set(tool.INSTALLED_ENTRIES) == set(bundle.INSTALLED_UNIT)
    expected = [f for f in bundle.list_files(SKILL_DIR) if f.split("/")[0] in tool.INSTALLED_ENTRIES]
    assert files == sorted(expected)


def test_a_symlink_in_the_unit_is_refused(tmp_path: Path) -> None:
    clone = fake_checkout(tmp_path)
    scripts = clone / SKILL_REL / "scripts"
    (scripts / "link.py").symlink_to(scripts / "common/versions.py")
    with pytest.raises(tool.InstallError, match="symbolic link"):
        tool.installable_files(clone / SKILL_REL)


# ======================================================================================================================
# The install tool, end to end
# ======================================================================================================================


@pytest.mark.parametrize("agent", sorted(AGENT_USER_DIRS))
def test_install_check_update_uninstall_for_each_agent(tmp_path: Path, agent: str) -> None:
    clone = fake_checkout(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    skills_dir = home / AGENT_USER_DIRS[agent]
    target = skills_dir / SKILL

    result = run_tool(["--agent", agent], home, tmp_path, clone)
    assert result.returncode == 0, result.stderr
    assert str(target) in result.stdout
    assert files_under(target) == sorted([*installable(clone), tool.STAMP_NAME])
    assert not list(target.rglob("__pycache__"))
    stamp = json.loads((target / tool.STAMP_NAME).read_text())
    assert stamp["version"] == pyproject_version() and stamp["agent"] == agent
    assert_loadable(agent, skills_dir)

    assert run_tool(["--agent", agent, "--check"], home, tmp_path, clone).returncode == 0
    again = run_tool(["--agent", agent], home, tmp_path, clone)
    assert again.returncode == 1 and "--update" in again.stderr

    # Running a script in the installed copy writes __pycache__: not an edit, not an extra file.
    (target / "scripts" / "__pycache__").mkdir()
    (target / "scripts" / "__pycache__" / "check_vllm_server.cpython-311.pyc").write_bytes(b"")
    assert run_tool(["--agent", agent, "--check"], home, tmp_path, clone).returncode == 0

    # A new release in the checkout: --check sees it, --update installs it.
    skill_md = clone / SKILL_REL / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace(f'version: "{pyproject_version()}"', 'version: "9.9.9"'))
    (clone / SKILL_REL / "scripts" / "new_helper.py").write_text("VALUE = 1\n")
    checked = run_tool(["--agent", agent, "--check"], home, tmp_path, clone)
    assert checked.returncode == 1
    assert "changed: SKILL.md" in checked.stdout and "missing: scripts/new_helper.py" in checked.stdout
    updated = run_tool(["--agent", agent, "--update"], home, tmp_path, clone)
    assert updated.returncode == 0, updated.stderr
    assert f"{pyproject_version()} -> 9.9.9" in updated.stdout
    assert files_under(target) == sorted([*installable(clone), tool.STAMP_NAME])
    assert run_tool(["--agent", agent, "--check"], home, tmp_path, clone).returncode == 0
    assert [p.name for p in skills_dir.iterdir()] == [SKILL], "no staging folder is left behind"

    removed = run_tool(["--agent", agent, "--uninstall"], home, tmp_path, clone)
    assert removed.returncode == 0, removed.stderr
    assert not target.exists()
    assert run_tool(["--agent", agent, "--check"], home, tmp_path, clone).returncode == 1
    assert run_tool(["--agent", agent, "--uninstall"], home, tmp_path, clone).returncode == 1


def test_the_installed_scripts_run_from_any_folder(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    assert run_tool(["--agent", "claude"], home, tmp_path).returncode == 0
    scripts = home / ".claude" / "skills" / SKILL / "scripts"
    for script, args in (
        ("check_optional_backends.py", ["--json"]),
        (
            "plan_training.py",
            ["--params", "7B", "--method", "lora", "--trainer", "sft", "--gpus", "1", "--gpu-memory-gib", "24"],
        ),
        ("check_vllm_server.py", ["--help"]),
    ):
        result = subprocess.run(
            [sys.executable, str(scripts / script), *args],
            cwd=elsewhere,
            env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (script, result.stderr)
        if script == "check_optional_backends.py":  # the diagnostic writes no bytecode (sys.dont_write_bytecode)
            assert not list(scripts.rglob("__pycache__"))
    # The other two may leave __pycache__ behind: --check neither counts it nor calls the copy edited.
    assert run_tool(["--agent", "claude", "--check"], home, tmp_path).returncode == 0


def test_project_scope_and_dest(tmp_path: Path) -> None:
    home, project, elsewhere = tmp_path / "home", tmp_path / "project", tmp_path / "my-skills"
    home.mkdir()
    project.mkdir()
    assert run_tool(["--agent", "codex", "--project"], home, project).returncode == 0
    assert_loadable("codex", project / ".agents" / "skills")
    assert not (home / ".agents").exists()
    assert run_tool(["--agent", "dir", "--dest", str(elsewhere)], home, project).returncode == 0
    assert files_under(elsewhere / SKILL) == sorted([*installable(), tool.STAMP_NAME])
    missing_dest = run_tool(["--agent", "dir"], home, project)
    assert missing_dest.returncode == 2 and "--dest" in missing_dest.stderr
    assert run_tool(["--agent", "nobody"], home, project).returncode == 2
    assert run_tool(["--agent", "claude", "--update", "--uninstall"], home, project).returncode == 2


@pytest.mark.parametrize("action", [[], ["--update"], ["--uninstall"]])
def test_a_foreign_folder_is_never_touched(tmp_path: Path, action: list[str]) -> None:
    home = tmp_path / "home"
    target = home / ".claude" / "skills" / SKILL
    target.mkdir(parents=True)
    (target / "SKILL.md").write_text("my own skill\n")
    result = run_tool(["--agent", "claude", *action], home, tmp_path)
    assert result.returncode == 1
    assert "not installed by this tool" in result.stderr or "was not installed" in result.stderr
    assert files_under(target) == ["SKILL.md"] and (target / "SKILL.md").read_text() == "my own skill\n"
    checked = run_tool(["--agent", "claude", "--check"], home, tmp_path)
    assert checked.returncode == 1 and "not installed by this tool" in checked.stdout


def test_a_file_in_the_way_and_an_empty_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    skills = home / ".claude" / "skills"
    skills.mkdir(parents=True)
    (skills / SKILL).write_text("a file")
    assert run_tool(["--agent", "claude"], home, tmp_path).returncode == 1
    (skills / SKILL).unlink()
    (skills / SKILL).mkdir()
    assert run_tool(["--agent", "claude"], home, tmp_path).returncode == 0


@pytest.mark.parametrize("edit", ["change", "add"])
def test_an_edited_copy_is_not_updated_or_removed(tmp_path: Path, edit: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert run_tool(["--agent", "claude"], home, tmp_path).returncode == 0
    target = home / ".claude" / "skills" / SKILL
    if edit == "change":
        (target / "LICENSE").write_text("edited")
    else:
        (target / "notes.md").write_text("mine")
    for action in (["--update"], ["--uninstall"]):
        result = run_tool(["--agent", "claude", *action], home, tmp_path)
        assert result.returncode == 1 and "edited after installing" in result.stderr
    assert target.is_dir()
    checked = run_tool(["--agent", "claude", "--check"], home, tmp_path)
    assert checked.returncode == 1
    assert ("changed: LICENSE" if edit == "change" else "extra: notes.md") in checked.stdout


def test_help_and_version_of_the_tool() -> None:
    result = subprocess.run([sys.executable, str(TOOLS_DIR / "install_skill.py"), "--help"], capture_output=True)
    assert result.returncode == 0 and b"--uninstall" in result.stdout


# ======================================================================================================================
# README install blocks in a fresh checkout
# ======================================================================================================================


def readme_install_blocks() -> dict[str, str]:
    """``<!-- install-test: NAME -->`` followed by a fenced bash block, from README.md."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    pattern = re.compile(r"<!-- install-test: (\w+) -->\n```bash\n(.*?)```", re.S)
    return {match.group(1): match.group(2) for match in pattern.finditer(text)}


def test_readme_has_one_tested_block_per_agent_and_the_plain_copy() -> None:
    assert set(readme_install_blocks()) == {"claude", "codex", "cursor", "gemini", "copy"}


@pytest.mark.parametrize("name", ["claude", "codex", "cursor", "gemini", "copy"])
def test_readme_install_block_gives_a_loadable_layout(tmp_path: Path, name: str) -> None:
    clone = fake_checkout(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    block = readme_install_blocks()[name]
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # python3 on PATH is this interpreter, as in the README's own set-up.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block], cwd=clone, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    agent = "claude" if name == "copy" else name
    skills_dir = home / AGENT_USER_DIRS[agent]
    installed = [f for f in files_under(skills_dir / SKILL) if f != tool.STAMP_NAME]
    assert installed == installable(clone), "exactly the installable files, no cache"
    assert_loadable(agent, skills_dir)


def test_readme_gives_the_plugin_and_client_routes_with_the_manifests_names() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    market = load_json(".claude-plugin/marketplace.json")
    plugin = f"{market['plugins'][0]['name']}@{market['name']}"
    install = text.split("\n## Install\n", 1)[1].split("\n### Update, check, uninstall", 1)[0]
    assert f"/plugin install {plugin}" in install and f"codex plugin add {plugin}" in install
    assert "gemini skills install skills/scaling-and-backends" in install
    unsupported = install.split("**Not supported**", 1)[1].split("\n\n", 1)[0]
    assert "gemini extensions install" in unsupported


# ======================================================================================================================
# The validator and the extension fields
# ======================================================================================================================

EXTENSION_FIELDS = ("disable-model-invocation", "metadata.version", "metadata.disco-role")


def agentskills_command() -> Optional[str]:
    return shutil.which("agentskills", path=str(Path(sys.executable).parent))


def test_agentskills_command_reports_only_the_designed_extension_field(tmp_path: Path) -> None:
    command = agentskills_command()
    if command is None:
        pytest.skip("the agentskills command (skills-ref 0.1.1, Python 3.11+) is not installed")
    home = tmp_path / "home"
    home.mkdir()
    assert run_tool(["--agent", "codex"], home, tmp_path).returncode == 0
    skills = codex_skills(home / ".agents" / "skills")
    for name, skill in skills.items():
        result = subprocess.run([command, "validate", str(skill["folder"])], capture_output=True, text=True)
        assert result.returncode == 1, name
        findings = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("- ")]
        assert findings == ["- " + bundle.SKILLS_REF_EXPECTED_ERRORS[0]], (name, result.stderr)


def test_docs_list_each_extension_field_with_what_each_host_does() -> None:
    text = (REPO_ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for field in (*EXTENSION_FIELDS, "policy.allow_implicit_invocation"):
        row = next((line for line in rows if line.startswith(f"| `{field}")), None)
        assert row is not None, f"docs/clients.md has no row for {field}"
        assert row.count("|") >= 6, f"{field}: the row needs a column per host"
    # The frontmatter holds no other non-spec field than the one listed.
    for relative, _ in bundle.skill_md_paths():
        keys = set(frontmatter(SKILL_DIR / relative))
        assert keys - {"name", "description", "license", "compatibility", "metadata", "allowed-tools"} == {
            "disable-model-invocation"
        }
        assert set(frontmatter(SKILL_DIR / relative)["metadata"]) <= {"disco-role", "version"}


# ======================================================================================================================
# Hostile copies and stamps (issue 21): bounded reads, clean refusals, user files never deleted
# ======================================================================================================================


def _installed(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    assert run_tool(["--agent", "claude"], home, tmp_path).returncode == 0
    return home, home / ".claude" / "skills" / SKILL


@pytest.mark.parametrize(
    "relative", ["scripts/__pycache__/notes.pyc", "scripts/__pycache__/mine.txt", "agents/keep.pyc"]
)
def test_user_files_named_like_caches_are_extra_and_never_deleted(tmp_path: Path, relative: str) -> None:
    home, target = _installed(tmp_path)
    (target / relative).parent.mkdir(parents=True, exist_ok=True)
    (target / relative).write_text("mine")
    for action in (["--update"], ["--uninstall"]):
        result = run_tool(["--agent", "claude", *action], home, tmp_path)
        assert result.returncode == 1 and "edited after installing" in result.stderr
    assert (target / relative).read_text() == "mine"
    assert f"extra: {relative}" in run_tool(["--agent", "claude", "--check"], home, tmp_path).stdout


def test_check_sees_a_symlink_to_a_folder(tmp_path: Path) -> None:
    home, target = _installed(tmp_path)
    (target / "scripts" / "elsewhere").symlink_to(tmp_path)
    checked = run_tool(["--agent", "claude", "--check"], home, tmp_path)
    assert checked.returncode == 1 and "extra: scripts/elsewhere" in checked.stdout


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep-json", "huge", "outside-path"])
def test_a_hostile_stamp_is_not_ours_and_nothing_hangs(tmp_path: Path, kind: str) -> None:
    """With --project a cloned repository supplies the stamp: a FIFO, a link to /dev/zero, 100,000-deep JSON, an
    over-long one and one that names files outside the copy are all 'not installed by this tool'."""
    project = tmp_path / "repo"
    target = project / ".claude" / "skills" / SKILL
    target.mkdir(parents=True)
    (target / "SKILL.md").write_text("the repository's own file")
    stamp = target / tool.STAMP_NAME
    if kind == "fifo":
        os.mkfifo(stamp)
    elif kind == "dev-zero":
        stamp.symlink_to("/dev/zero")
    elif kind == "deep-json":
        stamp.write_text('{"tool": "' + tool.STAMP_TOOL + '", "files": {}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif kind == "huge":
        stamp.write_text('{"tool": "x", "pad": "' + "x" * 5_000_000 + '"}')
    else:
        stamp.write_text(json.dumps({"tool": tool.STAMP_TOOL, "files": {"../../../etc/hostname": "0" * 64}}))
    home = tmp_path / "home"
    home.mkdir()
    for action in (["--uninstall"], ["--update"], ["--check"]):
        result = run_tool(["--agent", "claude", "--project", *action], home, project)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr and "not installed by this tool" in result.stdout + result.stderr
    assert (target / "SKILL.md").read_text() == "the repository's own file"


def test_a_fifo_or_dev_zero_link_in_the_copy_and_a_deep_folder_are_refused_cleanly(tmp_path: Path) -> None:
    home, target = _installed(tmp_path)
    os.mkfifo(target / "LICENSE.fifo")
    os.unlink(target / "LICENSE")
    (target / "LICENSE").symlink_to("/dev/zero")
    result = run_tool(["--agent", "claude", "--check"], home, tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    deep = target / "scripts"
    levels = []
    for _ in range(1100):
        deep = deep / "d"
        deep.mkdir()  # one level at a time: os.makedirs recurses
        levels.append(deep)
    try:
        for action in (["--check"], ["--uninstall"]):
            result = run_tool(["--agent", "claude", *action], home, tmp_path)
            assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
            assert "nests deeper than" in result.stderr
        assert target.is_dir()
    finally:
        for level in reversed(levels):  # pytest's own cleanup (shutil.rmtree) recurses and would fail later
            level.rmdir()


def test_non_utf8_source_skill_md_and_control_characters_in_paths(tmp_path: Path) -> None:
    clone = fake_checkout(tmp_path)
    (clone / SKILL_REL / "SKILL.md").write_bytes(b"---\nname: \xff\xfe\n---\n")
    home = tmp_path / "home"
    home.mkdir()
    result = run_tool(["--agent", "claude"], home, tmp_path, clone)
    assert result.returncode == 1 and "not UTF-8" in result.stderr and "Traceback" not in result.stderr
    odd = tmp_path / "odd\x1b[2Kdir"
    result = run_tool(["--agent", "dir", "--dest", str(odd), "--uninstall"], home, tmp_path)
    assert result.returncode == 1 and "\x1b" not in result.stderr and "\\x1b" in result.stderr

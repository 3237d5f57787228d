"""Bundle contract: the installed skill unit is well-formed, small, portable and free of drifting facts.

The bundle root is ``skills/scaling-and-backends/`` of the repository. The installed unit is its root
``SKILL.md``, ``LICENSE``, ``agents/`` (Codex metadata), ``backend-selection/``, ``vllm-reference/``,
``troubleshooting/`` and ``scripts/``. Each sub-skill's index is its ``README.md`` (Codex, Gemini CLI and the skills
CLI register every ``SKILL.md`` as a skill of its own). Skill Markdown files are the root ``SKILL.md`` and every
``.md`` file inside a sub-skill folder (its index and its reference files). Each rule is a ``check_*`` function in
``tests/bundle_helpers.py`` that takes a bundle root and returns a list of problems; the same functions run on the
real skill folder (which must give no problem) and on fixture bundles (a good one built at import time from
``tests/fixtures/bundle/scaling-and-backends/`` into ``<tmp>/skills/``, whose root ``SKILL.fixture.md`` becomes
``SKILL.md``, and broken copies of it made in ``tmp_path``).

Rules:

- Layout: the installed unit's entries exist (exact case), hold no symbolic links, the only ``SKILL.md`` is the
  root's, and Markdown elsewhere in the unit is not allowed. The repository's top-level entries (``git ls-files``,
  tracked plus untracked-not-ignored, in a checkout; a walk otherwise) are ``skills`` (holding only
  ``scaling-and-backends/``) plus ``.ci``, ``.claude-plugin``, ``.gitignore``, ``CHANGELOG.md``, ``docs``, ``LICENSE``,
  ``README.md``, ``pyproject.toml``, ``tests`` and ``tools``.
- Frontmatter of the root ``SKILL.md`` and of each sub-skill index (``yaml.safe_load``, repeated keys rejected):
  exactly the keys ``name``,
  ``description``, ``disable-model-invocation``, ``metadata`` and ``license``. ``name`` matches
  ``^[a-z0-9]+(-[a-z0-9]+)*$``, has at most 64 characters, is ``scaling-and-backends`` at the root and the folder
  name in a sub-skill, and is unique. ``description`` is written as a double-quoted scalar (its line starts with
  ``description: "``; it may continue over several lines), is a non-empty string of at most 500 characters and has
  no angle brackets. ``disable-model-invocation`` is the boolean ``true`` (not the string). ``metadata`` maps
  strings to strings and has ``disco-role: operating``; the root's ``metadata.version`` is the release number
  (MAJOR.MINOR.PATCH, kept equal to the other copies by ``tests/test_install.py``). ``license`` is ``Apache-2.0``
  and the root ``LICENSE`` file holds the Apache License 2.0 text.
- Spec validator: skills-ref 0.1.1 (Python API, Python 3.11+; skipped with a reason elsewhere) runs on a copy of
  each skill at ``<tmp>/<name>/`` (the root's copy is the installed unit). ``validate()`` must return exactly the
  one known error for the ``disable-model-invocation`` extension field, and ``validate_metadata()`` on the parsed
  frontmatter without that key must return nothing, so any other drift fails loudly.
- Links: every Markdown link, image and reference definition in the prose of a skill Markdown file (code spans and
  fenced code are not links) that is not ``http(s)://``, ``mailto:`` or a pure ``#anchor`` is a relative path
  (``#fragment`` and ``?query`` stripped, %-escapes decoded) that resolves from the linking file to an existing
  entry inside the installed unit, every path component spelt with exactly the case of the directory listing.
- Reference depth one level: a reference file (a Markdown file in a sub-skill folder other than its index) may link
  the root and the indexes but never another reference file; the root links every sub-skill's index; each
  reference file is linked from its own sub-skill's index; every script under ``scripts/`` that is a command
  (it has a module-level ``if __name__ == "__main__":`` block; helper modules such as ``common/versions.py`` do not) is
  named by its path, ``scripts/<file>.py``, in the root ``SKILL.md``.
- Size budgets: the root ``SKILL.md`` has at most 120 lines (frontmatter included); every skill Markdown file stays
  under 5,000 estimated tokens, where the estimate is the number of characters divided by 4, rounded up (so under
  20,000 characters).
- Machine paths: no tracked text file of the repository (any UTF-8 file without NUL bytes) holds an absolute path
  under /work, /tmp, /root, /home/<user>, /Users or a Windows drive (C: and a backslash). A path counts as
  absolute when the slash does not follow a word character, ".", "~", ">", "}", "$" or "-", so
  ``~/.claude/skills/...``, ``~/.cache/...``, a relative or placeholder-rooted tmp folder, and URLs pass. The
  patterns are written so that this module and the helpers do not match themselves; the broken fixtures build such
  paths at run time.
- Time-sensitive wording: each skill Markdown file has exactly one ``## Versions (time-sensitive)`` heading; the
  section runs to the next level-1 or level-2 heading. Outside it these fail, reported as file, line and matched
  text:
  - everywhere (prose, inline code, fenced code, frontmatter): a package name followed by a version number with
    at least one dot (``TRL 1.16``, ``vllm==0.27.1``, ``transformers>=5.2``, ``vLLM 0.30+``, ``trl[vllm]>=1.11``,
    ``torch-2.13``, ``python3.11``, ``PEFT 0.x``), for the names TRL, vLLM, Accelerate, PEFT, Transformers,
    DeepSpeed, bitsandbytes, liger-kernel/Liger, kernels, torch/PyTorch, flash-attn/flash-attention, Unsloth,
    huggingface_hub and Python, in any case; and a bare tag such as ``v1.11``;
  - in prose and frontmatter only (not in code, where ``latest`` can be a file or tag name): the words "latest",
    "currently", "as of", "recently", "nowadays", "new in", "at the time of writing", "this week/month/year", and
    the years 2019-2039 (not after ``#``, ``/``, ``.``, ``:`` or ``-``, so issue numbers and URLs pass).
  Bare numbers are not versions: ``compute capability 8.0``, ``--beta 0.3``, ``bf16``, ``CUDA 12.4``, ``/v1/models``
  and ``python3`` pass. A claims-checker directive line ``<!-- check: vllm==0.27.1 -->`` is exempt.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

import bundle_helpers as bundle
from conftest import REPO_ROOT, SKILL_DIR

# The good fixture is stored with its SKILL.md files named SKILL.fixture.md, so no agent client that scans a clone
# (Codex, Gemini CLI, the skills CLI) offers it as a skill; it is built under its real names once per session.
GOOD_FIXTURE = bundle.build_fixture_bundle(
    Path(__file__).resolve().parent / "fixtures" / "bundle" / "scaling-and-backends"
)
SKILLS_REF_SKIP_REASON = "skills-ref 0.1.1 is not importable (its wheel needs Python 3.11+; install '.[test]')"


def _report(problems: list[str]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(f"  - {problem}" for problem in problems)


# ======================================================================================================================
# The real repository
# ======================================================================================================================


@pytest.mark.parametrize("check_name", sorted(bundle.CHECKS))
def test_real_bundle(check_name: str) -> None:
    problems = bundle.CHECKS[check_name](SKILL_DIR)
    assert not problems, _report(problems)


def test_real_bundle_passes_skills_ref(tmp_path: Path) -> None:
    pytest.importorskip("skills_ref", reason=SKILLS_REF_SKIP_REASON)
    problems = bundle.check_skills_ref(SKILL_DIR, tmp_path)
    assert not problems, _report(problems)


def test_skills_ref_is_the_pinned_release() -> None:
    pytest.importorskip("skills_ref", reason=SKILLS_REF_SKIP_REASON)
    assert importlib.metadata.version("skills-ref") == bundle.SKILLS_REF_VERSION


def test_real_repository_files_come_from_git_and_skip_ignored_entries() -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = bundle.list_files(REPO_ROOT)
    assert "skills/scaling-and-backends/SKILL.md" in files
    assert "tests/test_bundle_contract.py" in files
    assert not [path for path in files if path.startswith((".git/", ".venv/")) or "__pycache__" in path]


# ======================================================================================================================
# The good fixture passes every check
# ======================================================================================================================


@pytest.mark.parametrize("check_name", sorted(bundle.CHECKS))
def test_good_fixture_passes(check_name: str) -> None:
    problems = bundle.CHECKS[check_name](GOOD_FIXTURE)
    assert not problems, _report(problems)


def test_good_fixture_passes_skills_ref(tmp_path: Path) -> None:
    pytest.importorskip("skills_ref", reason=SKILLS_REF_SKIP_REASON)
    problems = bundle.check_skills_ref(GOOD_FIXTURE, tmp_path)
    assert not problems, _report(problems)


def test_fixture_files_come_from_a_walk_that_skips_caches(tmp_path: Path) -> None:
    copy = _copy_good(tmp_path)
    (copy / "scripts" / "__pycache__").mkdir()
    (copy / "scripts" / "__pycache__" / "check_demo.cpython-311.pyc").write_bytes(b"\0")
    assert bundle.list_files(copy) == bundle.list_files(GOOD_FIXTURE)
    assert "backend-selection/deepspeed.md" in bundle.list_files(copy)


# ======================================================================================================================
# Broken copies of the good fixture each fail their check
# ======================================================================================================================


def _copy_good(tmp_path: Path) -> Path:
    """A copy of the good fixture's repository; returns its bundle root, ``<copy>/skills/scaling-and-backends``."""
    shutil.copytree(GOOD_FIXTURE.parent.parent, tmp_path / "repo")
    return tmp_path / "repo" / bundle.SKILLS_FOLDER / bundle.ROOT_SKILL_NAME


def _replace(root: Path, relative: str, old: str, new: str) -> None:
    path = root / relative
    text = path.read_text(encoding="utf-8")
    assert old in text, f"fixture drifted: {old!r} not in {relative}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


BODY_LINE = "Back to the [router](../SKILL.md)."  # line 12 of vllm-reference/README.md and troubleshooting/README.md
SECTION = "## Versions (time-sensitive)\n"
REFERENCE = "# A reference\n\nBack to [the sub-skill](README.md).\n\n" + SECTION + "\nNone.\n"
COMMAND = 'def main() -> int:\n    return 0\n\n\nif __name__ == "__main__":\n    raise SystemExit(main())\n'
HOME_PATH = "/" + "home/alice/models"  # built at run time: this module must not hold a machine path itself
TMP_PATH = "/" + "tmp/cache"


def _pad_root(root: Path, total_lines: int) -> None:
    path = root / "SKILL.md"
    text = path.read_text(encoding="utf-8")
    missing = total_lines - len(text.splitlines())
    path.write_text(text + "Filler line.\n" * missing, encoding="utf-8")


def _two_level_chain(root: Path) -> None:
    _write(root, "backend-selection/zero.md", REFERENCE)
    _replace(root, "backend-selection/README.md", "(deepspeed.md).", "(deepspeed.md) and [ZeRO](zero.md).")
    _replace(root, "backend-selection/deepspeed.md", "(../SKILL.md).", "(../SKILL.md). Then read [ZeRO](zero.md).")


def _symlink(root: Path) -> None:
    try:
        os.symlink("check_demo.py", root / "scripts" / "alias.py")
    except OSError as error:  # pragma: no cover - platforms without symlinks
        pytest.skip(f"cannot create a symlink here: {error}")


Mutation = Callable[[Path], None]
BROKEN_BUNDLES: list[tuple[str, Mutation, str, tuple[str, ...]]] = [
    # (id, mutation, check that must fail, fragments that one problem must contain)
    (
        "root-name-format",
        lambda r: _replace(r, "SKILL.md", "name: scaling-and-backends", "name: scaling_and_backends"),
        "frontmatter",
        ("SKILL.md: name 'scaling_and_backends' must match",),
    ),
    (
        "sub-name-differs-from-folder",
        lambda r: _replace(r, "backend-selection/README.md", "name: backend-selection", "name: backend-choice"),
        "frontmatter",
        ("backend-selection/README.md: name 'backend-choice' must be 'backend-selection'",),
    ),
    (
        "duplicate-name",
        lambda r: _replace(r, "vllm-reference/README.md", "name: vllm-reference", "name: troubleshooting"),
        "frontmatter",
        ("troubleshooting/README.md: name 'troubleshooting' is already used by vllm-reference/README.md",),
    ),
    (
        "single-quoted-description",
        lambda r: _replace(
            r,
            "backend-selection/README.md",
            '"Fixture sub-skill: pick a backend."',
            "'Fixture sub-skill: pick a backend.'",
        ),
        "frontmatter",
        ("backend-selection/README.md: description must be a double-quoted YAML scalar",),
    ),
    (
        "plain-description",
        lambda r: _replace(
            r,
            "backend-selection/README.md",
            '"Fixture sub-skill: pick a backend."',
            "Fixture sub-skill, pick a backend.",
        ),
        "frontmatter",
        ("description must be a double-quoted YAML scalar",),
    ),
    (
        "description-angle-brackets",
        lambda r: _replace(r, "backend-selection/README.md", "pick a backend.", "pick a <backend>."),
        "frontmatter",
        ("backend-selection/README.md: description must not contain angle brackets",),
    ),
    (
        "description-too-long",
        lambda r: _replace(r, "backend-selection/README.md", "pick a backend.", "x" * 490),
        "frontmatter",
        ("backend-selection/README.md: description has 509 characters; the limit is 500",),
    ),
    (
        "string-true",
        lambda r: _replace(r, "SKILL.md", "disable-model-invocation: true", 'disable-model-invocation: "true"'),
        "frontmatter",
        ("SKILL.md: disable-model-invocation must be the boolean true, got 'true'",),
    ),
    (
        "missing-license-key",
        lambda r: _replace(r, "troubleshooting/README.md", "license: Apache-2.0\n", ""),
        "frontmatter",
        ("troubleshooting/README.md: missing frontmatter keys ['license']",),
    ),
    (
        "other-license",
        lambda r: _replace(r, "troubleshooting/README.md", "license: Apache-2.0", "license: MIT"),
        "frontmatter",
        ("troubleshooting/README.md: license must be 'Apache-2.0', got 'MIT'",),
    ),
    (
        "extra-key",
        lambda r: _replace(r, "SKILL.md", "license: Apache-2.0\n", "license: Apache-2.0\ncompatibility: any\n"),
        "frontmatter",
        ("SKILL.md: unexpected frontmatter keys ['compatibility']",),
    ),
    (
        "repeated-key",
        lambda r: _replace(r, "SKILL.md", "license: Apache-2.0\n", "license: Apache-2.0\nlicense: MIT\n"),
        "frontmatter",
        ("SKILL.md: frontmatter is not valid YAML", "duplicate key 'license'"),
    ),
    (
        "wrong-disco-role",
        lambda r: _replace(r, "vllm-reference/README.md", "disco-role: operating", "disco-role: advisory"),
        "frontmatter",
        ("vllm-reference/README.md: metadata.disco-role must be 'operating', got 'advisory'",),
    ),
    (
        "root-version-not-semver",
        lambda r: _replace(r, "SKILL.md", 'version: "1.2.3"', 'version: "1.2"'),
        "frontmatter",
        ("SKILL.md: metadata.version must be a MAJOR.MINOR.PATCH string, got '1.2'",),
    ),
    (
        "metadata-number",
        lambda r: _replace(
            r, "vllm-reference/README.md", "disco-role: operating\n", "disco-role: operating\n  rev: 1.0\n"
        ),
        "frontmatter",
        ("vllm-reference/README.md: metadata entry 'rev': 1.0 must map a string to a string",),
    ),
    (
        "no-frontmatter",
        lambda r: _write(r, "troubleshooting/README.md", "# troubleshooting\n\n" + SECTION),
        "frontmatter",
        ("troubleshooting/README.md: no YAML frontmatter",),
    ),
    ("missing-license-file", lambda r: (r / "LICENSE").unlink(), "license", ("LICENSE: missing",)),
    (
        "license-file-not-apache",
        lambda r: _write(r, "LICENSE", "MIT License\n"),
        "license",
        ("LICENSE: does not contain 'Version 2.0, January 2004'",),
    ),
    (
        "link-wrong-case",
        lambda r: _replace(r, "SKILL.md", "(backend-selection/README.md)", "(Backend-Selection/README.md)"),
        "links",
        ("SKILL.md:16: broken link (Backend-Selection/README.md)", "case-sensitive"),
    ),
    (
        "link-file-wrong-case",
        lambda r: _replace(r, "backend-selection/README.md", "(deepspeed.md)", "(DeepSpeed.md)"),
        "links",
        ("backend-selection/README.md:12: broken link (DeepSpeed.md)",),
    ),
    (
        "link-missing-target",
        lambda r: _replace(r, "vllm-reference/README.md", "(../SKILL.md)", "(servers.md#modes)"),
        "links",
        ("vllm-reference/README.md:12: broken link (servers.md#modes): vllm-reference/servers.md does not exist",),
    ),
    (
        "link-leaves-unit",
        lambda r: _replace(r, "vllm-reference/README.md", "(../SKILL.md)", "(../../README.md)"),
        "links",
        ("vllm-reference/README.md:12: broken link (../../README.md): the target lies outside the installed unit",),
    ),
    (
        "link-to-dev-file",
        lambda r: _replace(r, "vllm-reference/README.md", "(../SKILL.md)", "(../tests/README.md)"),
        "links",
        ("outside the installed unit",),
    ),
    (
        "absolute-link",
        lambda r: _replace(r, "vllm-reference/README.md", "(../SKILL.md)", "(/SKILL.md)"),
        "links",
        ("vllm-reference/README.md:12: broken link (/SKILL.md): links must be relative paths",),
    ),
    ("two-level-chain", _two_level_chain, "reference_depth", ("backend-selection/deepspeed.md:3:", "one level deep")),
    (
        "reference-not-linked",
        lambda r: _write(r, "troubleshooting/nccl.md", REFERENCE),
        "reference_depth",
        ("troubleshooting/nccl.md: not linked from troubleshooting/README.md",),
    ),
    (
        "root-misses-a-sub-skill",
        lambda r: _replace(
            r, "SKILL.md", '- [Troubleshooting](<troubleshooting/README.md> "failures"): failed runs.\n', ""
        ),
        "reference_depth",
        ("SKILL.md: does not link troubleshooting/README.md",),
    ),
    (
        "command-not-mentioned",
        lambda r: _write(r, "scripts/check_other.py", COMMAND),
        "reference_depth",
        ("SKILL.md: does not mention the command scripts/check_other.py",),
    ),
    (
        "machine-path-in-script",
        lambda r: _write(r, "scripts/demo_helpers.py", f'MODELS = "{HOME_PATH}"\n'),
        "machine_paths",
        (f"scripts/demo_helpers.py:1: machine path '{HOME_PATH[:-6]}",),
    ),
    (
        "machine-path-in-markdown",
        lambda r: _replace(r, "vllm-reference/README.md", BODY_LINE, f"{BODY_LINE} Cache: `{TMP_PATH}`."),
        "machine_paths",
        ("vllm-reference/README.md:12: machine path '/",),
    ),
    (
        "version-outside-section",
        lambda r: _replace(r, "troubleshooting/README.md", BODY_LINE, f"{BODY_LINE} Needs TRL 1.16.0 or newer."),
        "time_sensitive",
        ("troubleshooting/README.md:12: time-sensitive package version 'TRL 1.16.0' outside",),
    ),
    (
        "pin-in-code-outside-section",
        lambda r: _replace(
            r, "troubleshooting/README.md", BODY_LINE, f'{BODY_LINE}\n\n```bash\npip install "vllm==0.31.0"\n```'
        ),
        "time_sensitive",
        ("troubleshooting/README.md:15: time-sensitive package version 'vllm==0.31.0'",),
    ),
    (
        "word-outside-section",
        lambda r: _replace(r, "troubleshooting/README.md", BODY_LINE, f"{BODY_LINE} This is currently the default."),
        "time_sensitive",
        ("troubleshooting/README.md:12: time-sensitive word 'currently'",),
    ),
    (
        "year-in-description",
        lambda r: _replace(r, "troubleshooting/README.md", 'troubleshooting."', 'troubleshooting, since 2025."'),
        "time_sensitive",
        ("troubleshooting/README.md:3: time-sensitive year '2025'",),
    ),
    (
        "tag-outside-section",
        lambda r: _replace(r, "troubleshooting/README.md", BODY_LINE, f"{BODY_LINE} Fixed in v1.11."),
        "time_sensitive",
        ("troubleshooting/README.md:12: time-sensitive version tag 'v1.11'",),
    ),
    (
        "version-after-the-section",
        lambda r: _replace(r, "SKILL.md", "Ask before starting a server.", "Ask before starting vLLM 0.31.0 servers."),
        "time_sensitive",
        ("SKILL.md:36: time-sensitive package version 'vLLM 0.31.0'",),
    ),
    (
        "missing-version-section",
        lambda r: _replace(r, "vllm-reference/README.md", SECTION, "## Versions\n"),
        "time_sensitive",
        ("vllm-reference/README.md: needs exactly one '## Versions (time-sensitive)' heading, found 0",),
    ),
    (
        "reference-without-version-section",
        lambda r: _replace(r, "backend-selection/deepspeed.md", SECTION, ""),
        "time_sensitive",
        ("backend-selection/deepspeed.md: needs exactly one", "found 0"),
    ),
    (
        "two-version-sections",
        lambda r: _write(r, "vllm-reference/README.md", (r / "vllm-reference/README.md").read_text() + "\n" + SECTION),
        "time_sensitive",
        ("vllm-reference/README.md: needs exactly one", "found 2 (lines 14, 18)"),
    ),
    (
        "root-121-lines",
        lambda r: _pad_root(r, 121),
        "sizes",
        ("SKILL.md: 121 lines; the root budget is 120",),
    ),
    (
        "reference-over-token-budget",
        lambda r: _write(r, "backend-selection/deepspeed.md", REFERENCE + "y" * 20_000),
        "sizes",
        ("backend-selection/deepspeed.md: about 5022 tokens",),
    ),
    (
        "stray-top-level-file",
        lambda r: _write(r.parent.parent, "notes.txt", "scratch\n"),
        "top_level",
        ("notes.txt: unexpected top-level entry",),
    ),
    (
        "second-skill-in-the-skills-folder",
        lambda r: _write(r.parent, "other/SKILL.md", "# other\n"),
        "top_level",
        ("skills/other: the skills folder holds only scaling-and-backends/",),
    ),
    (
        "missing-sub-skill",
        lambda r: shutil.rmtree(r / "troubleshooting"),
        "installed_unit",
        ("troubleshooting: missing from the installed unit",),
    ),
    (
        "nested-skill",
        lambda r: _write(r, "backend-selection/deep/SKILL.md", "# nested\n"),
        "installed_unit",
        ("backend-selection/deep/SKILL.md: only the root may hold a SKILL.md",),
    ),
    (
        "sub-skill-index-named-skill-md",
        lambda r: (r / "troubleshooting/README.md").rename(r / "troubleshooting/SKILL.md"),
        "installed_unit",
        ("troubleshooting/SKILL.md: only the root may hold a SKILL.md", "index is README.md"),
    ),
    (
        "markdown-in-scripts",
        lambda r: _write(r, "scripts/NOTES.md", "# notes\n"),
        "installed_unit",
        ("scripts/NOTES.md: Markdown in the installed unit belongs in a sub-skill folder",),
    ),
    ("symlink-in-unit", _symlink, "installed_unit", ("scripts/alias.py: symbolic links are not allowed",)),
]


@pytest.mark.parametrize(
    ("mutate", "check_name", "fragments"),
    [pytest.param(mutate, check, fragments, id=name) for name, mutate, check, fragments in BROKEN_BUNDLES],
)
def test_broken_bundle_fails_its_check(
    tmp_path: Path, mutate: Mutation, check_name: str, fragments: tuple[str, ...]
) -> None:
    root = _copy_good(tmp_path)
    mutate(root)
    problems = bundle.CHECKS[check_name](root)
    assert any(all(fragment in problem for fragment in fragments) for problem in problems), (
        f"expected a {check_name} problem containing {fragments}; got {_report(problems)}"
    )


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        pytest.param(
            lambda r: _replace(r, "backend-selection/README.md", "name: backend-selection", "name: backend-choice"),
            "Directory name 'backend-selection' must match skill name 'backend-choice'",
            id="name-differs-from-folder",
        ),
        pytest.param(
            lambda r: _replace(r, "SKILL.md", "license: Apache-2.0\n", "license: Apache-2.0\nuser-invocable: true\n"),
            "disable-model-invocation, user-invocable",
            id="another-extension-field",
        ),
        pytest.param(
            lambda r: _replace(
                r, "vllm-reference/README.md", 'description: "Fixture sub-skill: vllm-reference."\n', ""
            ),
            "Missing required field in frontmatter: description",
            id="missing-description",
        ),
        pytest.param(
            lambda r: _replace(r, "troubleshooting/README.md", "---\nname:", "name:"),
            "must start with YAML frontmatter",
            id="no-frontmatter",
        ),
    ],
)
def test_broken_bundle_fails_skills_ref(tmp_path: Path, mutate: Mutation, fragment: str) -> None:
    pytest.importorskip("skills_ref", reason=SKILLS_REF_SKIP_REASON)
    root = _copy_good(tmp_path)
    mutate(root)
    problems = bundle.check_skills_ref(root, tmp_path / "copies")
    assert any(fragment in problem for problem in problems), _report(problems)


# ======================================================================================================================
# The detectors, on small texts
# ======================================================================================================================


@pytest.mark.parametrize(
    ("text", "kind", "found"),
    [
        ("Use TRL 1.16.0 here.", "package version", "TRL 1.16.0"),  # a pin; "TRL 1.16" alone is a release scope
        ("Pin `vllm==0.27.1` first.", "package version", "vllm==0.27.1"),
        ("Needs transformers>=5.2.", "package version", "transformers>=5.2"),
        ("Works with vLLM 0.30.1+ only.", "package version", "vLLM 0.30.1+"),
        ("Scopes name TRL or vLLM only: PEFT ≥ 0.21.", "package version", "PEFT ≥ 0.21"),
        ('Run `pip install "trl[vllm]>=1.11"`.', "package version", "trl[vllm]>=1.11"),
        ("```bash\npip install 'vllm==0.31.0'\n```", "package version", "vllm==0.31.0"),
        ("Requires Python 3.11.", "package version", "Python 3.11"),
        ("Run `python3.11 -m venv .venv`.", "package version", "python3.11"),
        ("Built for PyTorch 2.13 and torch-2.13.0.", "package version", "torch-2.13.0"),
        ("Liger-Kernel 0.8.5 patches the model.", "package version", "Liger-Kernel 0.8.5"),
        ("PEFT 0.x and DeepSpeed 0.19 differ.", "package version", "PEFT 0.x"),
        ("PEFT 0.x and DeepSpeed 0.19 differ.", "package version", "DeepSpeed 0.19"),
        ("flash-attn 2.8 and huggingface_hub 1.0 and Unsloth 2025.3", "package version", "huggingface_hub 1.0"),
        ("Accelerate (1.15) and bitsandbytes 0.50 and kernels 0.17", "package version", "bitsandbytes 0.50"),
        ("Fixed in v1.11.", "version tag", "v1.11"),
        ("Use the latest release.", "word", "latest"),
        ("This is Currently the default.", "word", "Currently"),
        ("As of now it works.", "word", "As of"),
        ("It was recently renamed.", "word", "recently"),
        ("Nowadays people use FSDP2.", "word", "Nowadays"),
        ("New in this release: colocate.", "word", "New in"),
        ("At the time of writing it fails.", "word", "At the time of writing"),
        ("Changed this month.", "word", "this month"),
        ("Released in 2025.", "year", "2025"),
    ],
)
def test_time_sensitive_text_is_found(text: str, kind: str, found: str) -> None:
    hits = bundle.time_sensitive_hits(text)
    assert (kind, found) in [(hit_kind, hit_text) for _, hit_kind, hit_text in hits], hits


@pytest.mark.parametrize(
    "text",
    [
        "Needs compute capability 8.0 or newer for bf16.",
        "Set `--beta 0.3` and `--vllm_gpu_memory_utilization 0.9`.",
        "CUDA 12.4 wheels and NCCL timeouts.",
        "Query `/v1/models`, then run `python3 scripts/check_optional_backends.py`.",
        "DeepSpeed writes a `latest` file; ZeRO-3 shards parameters.",
        "Reported in huggingface/trl#2025, see https://github.com/huggingface/trl/pull/2031.",
        "```bash\naccelerate launch --num_processes 8 train.py  # latest\n```",
        "4-bit QLoRA with bitsandbytes nf4; torchrun works too.",
        "such as offloading; a new instance; as often as needed.",
        "<!-- check: vllm==0.27.1 -->",
        "## Versions (time-sensitive)\n\nTRL 1.16.0, latest as of 2026, v0.31.0.\n\n### Pins\n\nvllm==0.31.0",
        # Inline release scopes (the claims checker verifies them against the release history).
        "The merged fallback warns (TRL ≥ 1.14); on TRL <= 1.10 the old server runs.",
        "| TRL 1.11–1.13 | dev-mode server | since TRL 1.11, until TRL 1.13, removed in TRL 1.8 |",
        "Sleep mode needs vLLM ≥ 0.22 (vLLM 0.27-0.31, vLLM 0.22+, TRL 1.11 to 1.13, deprecated in TRL 1.15).",
    ],
)
def test_time_insensitive_text_passes(text: str) -> None:
    assert bundle.time_sensitive_hits(text) == []


def test_time_sensitive_text_after_the_section_is_found() -> None:
    text = "# Title\n\n## Versions (time-sensitive)\n\nTRL 1.16.0\n\n## Next\n\nTRL 1.16.0\n"
    assert bundle.time_sensitive_hits(text) == [(9, "package version", "TRL 1.16.0")]


@pytest.mark.parametrize(
    "text",
    [
        "model: " + "/" + "work/main/model",
        "cache " + "/" + "tmp/x",
        'HOME="' + "/" + 'root/.cache"',
        "see (" + "/" + "home/alice/x)",
        "path=" + "/" + "Users/bob/x",
        "C:" + "\\" + "Users\\bob",
    ],
)
def test_machine_paths_are_found(text: str) -> None:
    assert bundle.machine_path_hits(text), text


@pytest.mark.parametrize(
    "text",
    [
        "cp -R SKILL.md ~/.claude/skills/scaling-and-backends/",
        "HF_HOME=~/.cache/huggingface",
        # Built at run time so that simple repository-wide path scans do not flag this file.
        "<output_dir>{s}tmp{s}x and ${{OUT}}{s}tmp{s}y and .{s}tmp{s}z and out{s}tmp{s}w".format(s="/"),
        "https://example.com{s}root{s}x and https://example.com{s}home{s}x{s}".format(s="/"),
        "$HOME{s}work{s}x".format(s="/"),
    ],
)
def test_relative_and_home_paths_pass(text: str) -> None:
    assert bundle.machine_path_hits(text) == []


@pytest.mark.parametrize(
    ("source", "is_command"),
    [
        ('if __name__ == "__main__":\n    main()\n', True),
        ("if '__main__' == __name__:\n    main()\n", True),
        ("def main():\n    pass\n", False),
        ('def f():\n    if __name__ == "__main__":\n        pass\n', False),
    ],
)
def test_command_scripts_are_detected_by_their_main_block(source: str, is_command: bool) -> None:
    assert bundle.has_main_block(source) is is_command


def test_links_in_code_and_footnotes_are_not_links(tmp_path: Path) -> None:
    root = _copy_good(tmp_path)
    _replace(
        root,
        "vllm-reference/README.md",
        BODY_LINE,
        f"{BODY_LINE} Code `[a](missing.md)` is not a link.\n\n```python\nx = [a](missing.md)\n```\n\n[^1]: A note.",
    )
    assert bundle.check_links(root) == []


def test_reference_definitions_and_images_are_links(tmp_path: Path) -> None:
    root = _copy_good(tmp_path)
    _replace(root, "vllm-reference/README.md", BODY_LINE, f"{BODY_LINE} ![plot](plot.png)\n\n[ref]: Missing.md")
    problems = bundle.check_links(root)
    assert [problem.split(":")[1] for problem in problems] == ["12", "14"], _report(problems)

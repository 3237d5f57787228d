"""Version and requirement helpers shared by the bundle's scripts.

Standard library only. When ``packaging`` is importable it is used for exact PEP 440 / PEP 508
semantics; otherwise a small fallback handles what Python package metadata uses in practice
(release numbers, pre/post/dev tags, local labels, ``==``/``!=``/``<``/``<=``/``>``/``>=``/``~=``/``===``
and ``.*`` wildcards, and ``extra``/``python_version`` markers).

Every function returns ``None`` instead of raising when it cannot decide, so callers can report
"unknown" rather than crash on odd metadata.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from types import SimpleNamespace
from typing import Dict, NamedTuple, Optional, Tuple

from common.lazy_re import lazy

# ``packaging`` is optional. Finding it is cheap; importing it costs tens of milliseconds, which matters to the
# diagnostic's speed budget, so its modules are imported on first use only.
HAVE_PACKAGING = importlib.util.find_spec("packaging") is not None
_PACKAGING: Optional[SimpleNamespace] = None


def _packaging() -> Optional[SimpleNamespace]:
    """The ``packaging`` classes this module uses, imported once; ``None`` when unusable."""
    global _PACKAGING, HAVE_PACKAGING
    if _PACKAGING is None and HAVE_PACKAGING:
        try:
            from packaging.markers import InvalidMarker, Marker
            from packaging.requirements import InvalidRequirement, Requirement
            from packaging.specifiers import InvalidSpecifier, SpecifierSet
            from packaging.version import InvalidVersion, Version
        except Exception:  # a broken packaging install: fall back rather than fail
            HAVE_PACKAGING = False
            return None
        _PACKAGING = SimpleNamespace(
            Marker=Marker,
            InvalidMarker=InvalidMarker,
            Requirement=Requirement,
            InvalidRequirement=InvalidRequirement,
            SpecifierSet=SpecifierSet,
            InvalidSpecifier=InvalidSpecifier,
            Version=Version,
            InvalidVersion=InvalidVersion,
        )
    return _PACKAGING if HAVE_PACKAGING else None


_VERSION_RE = lazy(
    r"""^\s*v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d+)?)?
    (?P<post>(?:-(?P<post_n1>\d+))|(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post_n2>\d+)?))?
    (?P<dev>[-_.]?dev[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)
# A version or specifier past these bounds is not one this bundle reads: ``packaging`` (and ``int()``) raise
# ValueError on a 5,000-digit number, and no release has a number over 40 digits or a version over 256 characters.
MAX_VERSION_CHARS = 256
MAX_NUMBER_DIGITS = 40
_LONG_NUMBER = lazy(rf"\d{{{MAX_NUMBER_DIGITS + 1}}}")


def oversized(text: str) -> bool:
    """True when ``text`` is too long to be a version or specifier, or holds a number of more than 40 digits."""
    return len(text) > MAX_VERSION_CHARS or _LONG_NUMBER.search(text) is not None


_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}

VersionKey = Tuple[
    int, Tuple[int, ...], Tuple[int, int], Tuple[int, int], Tuple[int, int], Tuple[Tuple[int, int, str], ...]
]


_NAME_SEPARATORS = lazy(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503 normalised project name: lower case, runs of ``-_.`` become ``-``."""
    return _NAME_SEPARATORS.sub("-", name).lower().strip()


def _fallback_key(text: str) -> Optional[VersionKey]:
    if oversized(text):
        return None
    match = _VERSION_RE.match(text)
    if not match:
        return None
    release = tuple(int(part) for part in match.group("release").split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    inf = 1 << 62
    pre_label = match.group("pre_l")
    post_number = match.group("post_n1") or match.group("post_n2")
    has_post = match.group("post") is not None
    has_dev = match.group("dev") is not None
    # Ordering: dev-only releases sort before pre-releases, which sort before the final release.
    if pre_label:
        pre = (_PRE_ORDER[pre_label.lower()], int(match.group("pre_n") or 0))
    elif has_dev and not has_post:
        pre = (-1, 0)
    else:
        pre = (inf, 0)
    post = (1, int(post_number or 0)) if has_post else (0, 0)
    dev = (0, int(match.group("dev_n") or 0)) if has_dev else (1, 0)
    local_parts = re.split(r"[-_.]", (match.group("local") or "").lower()) if match.group("local") else []
    # PEP 440: a local label sorts after the same public version; numeric segments beat alphanumeric ones.
    local = tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in local_parts)
    return (int(match.group("epoch") or 0), release, pre, post, dev, local)


def is_valid_version(text: str) -> bool:
    """True when ``text`` parses as a PEP 440 version."""
    return version_key(text) is not None


def version_key(text: str) -> Optional[object]:
    """A sortable key for a version string, or ``None`` if it does not parse (or is :func:`oversized`)."""
    if not isinstance(text, str) or oversized(text):
        return None
    pkg = _packaging()
    if pkg is not None:
        try:
            return pkg.Version(text)
        except pkg.InvalidVersion:
            return None
    return _fallback_key(text)


def base_version(text: str) -> Optional[str]:
    """The release part of a version (``0.27.1+cu129`` -> ``0.27.1``), or ``None``."""
    match = _VERSION_RE.match(text)
    if not match:
        return None
    return ((match.group("epoch") + "!") if match.group("epoch") else "") + match.group("release")


def compare_versions(left: str, right: str) -> Optional[int]:
    """-1, 0 or 1 like ``cmp``; ``None`` when either side does not parse."""
    a, b = version_key(left), version_key(right)
    if a is None or b is None:
        return None
    return (a > b) - (a < b)  # type: ignore[operator]


def _is_prerelease(text: str) -> bool:
    key = _fallback_key(text)
    return bool(key and (key[2][0] < (1 << 62) or key[4][0] == 0))


def _is_postrelease(text: str) -> bool:
    key = _fallback_key(text)
    return bool(key and key[3][0] == 1)


def _release_prefix_match(version: str, prefix: str) -> Optional[bool]:
    vmatch, pmatch = _VERSION_RE.match(version), _VERSION_RE.match(prefix)
    if not vmatch or not pmatch:
        return None
    vparts = [int(p) for p in vmatch.group("release").split(".")]
    pparts = [int(p) for p in pmatch.group("release").split(".")]
    vparts += [0] * max(0, len(pparts) - len(vparts))
    return vparts[: len(pparts)] == pparts


def _fallback_clause(version: str, operator: str, target: str) -> Optional[bool]:
    if operator == "===":
        return version.strip() == target.strip()
    if target.endswith(".*"):
        if operator not in ("==", "!="):
            return None
        prefix_match = _release_prefix_match(base_version(version) or version, target[:-2])
        if prefix_match is None:
            return None
        return prefix_match if operator == "==" else not prefix_match
    if operator == "~=":
        parts = target.split(".")
        if len(parts) < 2:
            return None
        lower = compare_versions(version, target)
        upper_prefix = ".".join(parts[:-1])
        inside = _release_prefix_match(base_version(version) or version, base_version(upper_prefix) or upper_prefix)
        if lower is None or inside is None:
            return None
        return lower >= 0 and inside
    # Local version labels are ignored unless the specifier itself has one (PEP 440).
    candidate = version if "+" in target else (base_version_with_tags(version) or version)
    order = compare_versions(candidate, target)
    if order is None:
        return None
    if operator == "==":
        return order == 0
    if operator == "!=":
        return order != 0
    same_release = base_version(candidate) == base_version(target)
    if operator == "<":
        # "<V" never admits a pre-release of V itself, unless V is a pre-release.
        return order < 0 and not (same_release and _is_prerelease(candidate) and not _is_prerelease(target))
    if operator == "<=":
        return order <= 0
    if operator == ">":
        # ">V" never admits a post-release of V itself, unless V is a post-release.
        return order > 0 and not (same_release and _is_postrelease(candidate) and not _is_postrelease(target))
    if operator == ">=":
        return order >= 0
    return None


def base_version_with_tags(text: str) -> Optional[str]:
    """The version without its local label (``0.27.1+cu129`` -> ``0.27.1``; ``1.0rc1`` stays)."""
    if not _VERSION_RE.match(text):
        return None
    return text.split("+", 1)[0].strip()


_CLAUSE_RE = lazy(r"^\s*(===|==|!=|~=|<=|>=|<|>)\s*([^\s,;]+)\s*$")


def specifier_contains(specifier: str, version: str, allow_prereleases: bool = True) -> Optional[bool]:
    """Whether ``version`` satisfies a specifier such as ``>=0.22.0,<=0.31.0``.

    An empty specifier accepts everything. Pre-releases are accepted by default because an
    installed pre-release is a fact to judge, not a candidate to pick. ``None`` means undecidable.
    """
    specifier = (specifier or "").strip()
    if not specifier:
        return True
    if version_key(version) is None or len(specifier) > 4 * MAX_VERSION_CHARS or _LONG_NUMBER.search(specifier):
        return None
    pkg = _packaging()
    if pkg is not None:
        try:
            return pkg.SpecifierSet(specifier).contains(version, prereleases=allow_prereleases)
        except (pkg.InvalidSpecifier, pkg.InvalidVersion):
            return None
    results = []
    for clause in specifier.split(","):
        if not clause.strip():
            continue
        match = _CLAUSE_RE.match(clause)
        if not match:
            return None
        results.append(_fallback_clause(version, match.group(1), match.group(2)))
    if any(result is False for result in results):
        return False
    if any(result is None for result in results):
        return None
    return True


class Requirement(NamedTuple):
    """One parsed ``Requires-Dist`` line."""

    name: str  # as written
    key: str  # PEP 503 normalised
    extras: Tuple[str, ...]
    specifier: str  # "" when unpinned, e.g. ">=0.22.0,<=0.31.0"
    marker: str  # "" when absent
    raw: str

    def applies(self, extra: Optional[str] = None, python_version: Optional[str] = None) -> Optional[bool]:
        """Whether this requirement is active for ``extra`` (``None``: the base install)."""
        return evaluate_marker(self.marker, extra=extra, python_version=python_version)


_REQ_RE = lazy(
    r"""^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*
    (?:\[(?P<extras>[^\]]*)\])?\s*
    (?:\((?P<paren>[^)]*)\)|(?P<spec>(?:===|==|!=|~=|<=|>=|<|>)[^;@]*))?\s*
    (?:@\s*(?P<url>[^;]+?))?\s*
    (?:;\s*(?P<marker>.*))?$""",
    re.VERBOSE,
)


def parse_requirement(line: str) -> Optional[Requirement]:
    """Parse a PEP 508 requirement line; ``None`` if it is malformed."""
    line = (line or "").strip()
    if not line or _LONG_NUMBER.search(line):
        return None  # a 5,000-digit version in a pin or marker is no requirement (packaging would raise on it)
    pkg = _packaging()
    if pkg is not None:
        try:
            req = pkg.Requirement(line)
        except pkg.InvalidRequirement:
            return None
        specs = sorted(str(s) for s in req.specifier)
        return Requirement(
            name=req.name,
            key=normalize_name(req.name),
            extras=tuple(sorted(req.extras)),
            specifier=",".join(specs),
            marker=str(req.marker) if req.marker else "",
            raw=line,
        )
    match = _REQ_RE.match(line)
    if not match:
        return None
    spec = (match.group("paren") or match.group("spec") or "").strip()
    clauses = [c.strip().replace(" ", "") for c in spec.split(",") if c.strip()]
    if any(not _CLAUSE_RE.match(c) for c in clauses):
        return None
    extras = tuple(sorted(e.strip() for e in (match.group("extras") or "").split(",") if e.strip()))
    return Requirement(
        name=match.group("name"),
        key=normalize_name(match.group("name")),
        extras=extras,
        specifier=",".join(sorted(clauses)),
        marker=(match.group("marker") or "").strip(),
        raw=line,
    )


def _marker_environment(extra: Optional[str], python_version: Optional[str]) -> dict:
    info = sys.version_info
    return {
        "extra": extra or "",
        "python_version": python_version or f"{info[0]}.{info[1]}",
        "python_full_version": f"{info[0]}.{info[1]}.{info[2]}",
        "sys_platform": sys.platform,
        "platform_system": {"linux": "Linux", "darwin": "Darwin", "win32": "Windows"}.get(sys.platform, sys.platform),
        "os_name": "nt" if sys.platform == "win32" else "posix",
        "implementation_name": sys.implementation.name,
        "platform_machine": _machine(),
        "platform_python_implementation": "CPython" if sys.implementation.name == "cpython" else "PyPy",
    }


def _machine() -> str:
    """``platform.machine()`` without importing platform where ``os.uname`` has it (every POSIX system)."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return uname().machine
    try:
        import platform

        return platform.machine()
    except Exception:  # pragma: no cover
        return ""


_ATOM_RE = lazy(
    r"""^\s*(?:(?P<lvar>[a-z_]+)\s*(?P<op1>===|==|!=|~=|<=|>=|<|>|not\s+in|in)\s*(?P<rq>['"])(?P<rval>[^'"]*)(?P=rq)
    |(?P<lq>['"])(?P<lval>[^'"]*)(?P=lq)\s*(?P<op2>===|==|!=|~=|<=|>=|<|>|not\s+in|in)\s*(?P<rvar>[a-z_]+))\s*$""",
    re.VERBOSE,
)


_BOOLEAN_WORDS = {word: lazy(rf"\s{word}\s") for word in ("and", "or")}


def _split_top(expr: str, word: str) -> list:
    """Split ``expr`` on a boolean keyword at parenthesis depth 0."""
    parts, depth, start, i = [], 0, 0, 0
    pattern = _BOOLEAN_WORDS[word]
    while i < len(expr):
        char = expr[i]
        if char in "'\"":
            end = expr.find(char, i + 1)
            i = len(expr) if end < 0 else end + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            match = pattern.match(expr, i)
            if match:
                parts.append(expr[start:i])
                start = i = match.end()
                continue
        i += 1
    parts.append(expr[start:])
    return parts


def _eval_fallback_marker(expr: str, env: dict) -> Optional[bool]:
    expr = expr.strip()
    ors = _split_top(expr, "or")
    if len(ors) > 1:
        values = [_eval_fallback_marker(part, env) for part in ors]
        if any(v is True for v in values):
            return True
        return None if any(v is None for v in values) else False
    ands = _split_top(expr, "and")
    if len(ands) > 1:
        values = [_eval_fallback_marker(part, env) for part in ands]
        if any(v is False for v in values):
            return False
        return None if any(v is None for v in values) else True
    if expr.startswith("(") and expr.endswith(")"):
        return _eval_fallback_marker(expr[1:-1], env)
    match = _ATOM_RE.match(expr)
    if not match:
        return None
    if match.group("lvar"):
        var, op, value, var_on_left = match.group("lvar"), match.group("op1"), match.group("rval"), True
    else:
        var, op, value, var_on_left = match.group("rvar"), match.group("op2"), match.group("lval"), False
    if var not in env:
        return None
    actual = env[var]
    op = re.sub(r"\s+", " ", op)
    if var == "extra":
        actual, value = normalize_name(actual), normalize_name(value)
    if op in ("in", "not in"):
        left, right = (actual, value) if var_on_left else (value, actual)
        return (left in right) if op == "in" else (left not in right)
    if var in ("python_version", "python_full_version", "implementation_version"):
        left, right = (actual, value) if var_on_left else (value, actual)
        return specifier_contains(f"{op}{right}", left)
    if op == "==":
        return actual == value
    if op == "!=":
        return actual != value
    return None


_MARKER_RESULTS: Dict[Tuple[str, Optional[str], Optional[str], bool], Optional[bool]] = {}


def evaluate_marker(marker: str, extra: Optional[str] = None, python_version: Optional[str] = None) -> Optional[bool]:
    """Evaluate a PEP 508 marker for this interpreter and the given extra; ``None`` if undecidable.

    Results are remembered per (marker, extra, python_version, evaluator): the rest of the environment they depend
    on is this process's."""
    if not marker:
        return True
    if _LONG_NUMBER.search(marker):
        return None
    pkg = _packaging()
    key = (marker, extra, python_version, pkg is not None)
    if key not in _MARKER_RESULTS:
        _MARKER_RESULTS[key] = _evaluate_marker(marker, extra, python_version, pkg)
    return _MARKER_RESULTS[key]


def _evaluate_marker(
    marker: str, extra: Optional[str], python_version: Optional[str], pkg: Optional[SimpleNamespace]
) -> Optional[bool]:
    env = _marker_environment(extra, python_version)
    if pkg is not None:
        try:
            return bool(pkg.Marker(marker).evaluate(env))
        except Exception:  # InvalidMarker, or an undefined marker variable
            return None
    return _eval_fallback_marker(marker, env)


def marker_extras(marker: str) -> Tuple[str, ...]:
    """The extra names a marker mentions (``extra == "vllm"`` -> ``("vllm",)``)."""
    found = re.findall(r"""extra\s*==\s*['"]([^'"]+)['"]|['"]([^'"]+)['"]\s*==\s*extra""", marker or "")
    return tuple(sorted({normalize_name(a or b) for a, b in found}))

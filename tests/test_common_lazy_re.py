"""scripts/common/lazy_re.py: a pattern compiled on its first use, then as fast as a compiled one, and the same
answers as ``re.compile`` for every method the scripts call."""

from __future__ import annotations

import re
import subprocess
import sys

from common.lazy_re import lazy

from conftest import SCRIPTS_DIR


def test_nothing_is_compiled_until_a_method_is_read() -> None:
    pattern = lazy(r"(?P<name>[a-z]+)=(\d+)", re.IGNORECASE)
    assert "_compiled" not in vars(pattern)
    assert pattern.search("x ABC=12").group("name") == "ABC"
    assert "_compiled" in vars(pattern) and "search" in vars(pattern)  # bound: no __getattr__ on later calls


def test_every_method_answers_as_the_compiled_pattern() -> None:
    source, text = r"(\w+)@(\w+)", "a@b c@d"
    compiled, stand_in = re.compile(source), lazy(source)
    assert stand_in.sub(r"\2@\1", text) == compiled.sub(r"\2@\1", text)
    assert stand_in.subn("x", text) == compiled.subn("x", text)
    assert stand_in.findall(text) == compiled.findall(text)
    assert [m.span() for m in stand_in.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert stand_in.split(text) == compiled.split(text)
    assert stand_in.fullmatch("a@b") is not None and stand_in.match(" a@b") is None
    assert (stand_in.pattern, stand_in.groups, stand_in.groupindex) == (source, 2, compiled.groupindex)


def test_a_bad_pattern_fails_where_it_is_used_not_at_import() -> None:
    broken = lazy("(unclosed")
    try:
        broken.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("a bad pattern must raise re.error on use")


def test_importing_the_scrubber_compiles_none_of_its_patterns() -> None:
    """The default diagnostic imports common.output; its ~25 secret patterns compile only when a value needs them."""
    code = (
        "import re, sys; sys.path.insert(0, sys.argv[1]); calls = []; original = re._compile\n"
        "re._compile = lambda p, f: calls.append(p) or original(p, f)\n"
        "import common.output as o\n"
        "from common.lazy_re import LazyPattern\n"
        "assert o.scrub('plain words and 1.2.3') == 'plain words and 1.2.3'\n"
        "own = [v._source for v in vars(o).values() if isinstance(v, LazyPattern)]\n"
        "print(len(own), len([p for p in calls if p in own]))\n"
    )
    run = subprocess.run([sys.executable, "-B", "-S", "-c", code, str(SCRIPTS_DIR)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    patterns, compiled = map(int, run.stdout.split())
    assert patterns >= 20 and compiled == 0

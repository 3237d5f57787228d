"""diagnostic/interpreter.py: the interpreter and platform facts of the report, read without running a process."""

from __future__ import annotations

import os
import sys

from diagnostic.interpreter import platform_facts, python_facts


def test_python_facts_describe_this_interpreter() -> None:
    facts = python_facts()
    assert facts["version"] == ".".join(map(str, sys.version_info[:3]))
    assert facts["executable"] == sys.executable and facts["prefix"] == sys.prefix
    assert facts["kind"] in ("system", "venv", "uv", "conda")
    if os.path.isfile(os.path.join(sys.prefix, "pyvenv.cfg")):
        assert facts["kind"] in ("venv", "uv")
    assert isinstance(facts["pip"], bool) and isinstance(facts["packaging"], bool)


def test_platform_facts_come_from_uname() -> None:
    facts = platform_facts()
    uname = os.uname()
    assert (facts["system"], facts["release"], facts["machine"]) == (uname.sysname, uname.release, uname.machine)
    assert facts["platform"].startswith(f"{uname.sysname}-{uname.release}-{uname.machine}")
    if facts["libc"]:
        assert facts["platform"].endswith("-with-" + facts["libc"].replace(" ", ""))

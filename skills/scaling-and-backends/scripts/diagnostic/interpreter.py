"""The Python interpreter and platform the diagnostic runs under."""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict

from common import versions

from diagnostic.base import read_text


def python_facts() -> Dict[str, Any]:
    """Interpreter version, executable and environment kind (venv, uv, conda or system)."""
    kind = "system"
    cfg = read_text(os.path.join(sys.prefix, "pyvenv.cfg"), limit=100_000)
    if cfg is not None:
        kind = "uv" if re.search(r"^\s*uv\s*=", cfg, re.MULTILINE) else "venv"
    elif os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        kind = "conda"
    import importlib.util

    return {
        "version": ".".join(str(p) for p in sys.version_info[:3]),
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "kind": kind,
        "pip": importlib.util.find_spec("pip") is not None,
        "packaging": versions.HAVE_PACKAGING,
    }


def platform_facts() -> Dict[str, Any]:
    """OS, kernel release, machine and libc, without ``platform.uname().processor`` (it runs ``uname -p``)."""
    try:
        uname = os.uname()
        system, release, machine = uname.sysname, uname.release, uname.machine
    except AttributeError:  # Windows
        import platform

        system, release, machine = platform.system(), platform.release(), platform.machine()
    libc = ""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        libc = ""
    text = f"{system}-{release}-{machine}" + (f"-with-{libc.replace(' ', '')}" if libc else "")
    return {"system": system, "release": release, "machine": machine, "libc": libc or None, "platform": text}

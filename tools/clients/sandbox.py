"""Where the check runs: an npm prefix holding the clients, a snapshot of the checkout, and fresh homes.

Every client runs with ``HOME`` set to a new empty folder, telemetry and update checks off, stdin closed and a
timeout; nothing here reads the user's own home or configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, NamedTuple, Optional

from clients import pins

QUIET_ENV = {
    "DO_NOT_TRACK": "1",
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "GEMINI_CLI_TRUST_WORKSPACE": "true",
    "CI": "1",
    "NO_COLOR": "1",
    "FORCE_COLOR": "0",
}
# Keys that would point a client at a real account or model: never passed on.
DROPPED_ENV_PREFIXES = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CODEX_", "CLAUDE_", "XDG_")


class Ran(NamedTuple):
    argv: list[str]
    returncode: int
    output: str  # stdout then stderr
    stdout: str


class NpmUnavailable(Exception):
    """npm is missing or the registry cannot be reached; the message says which."""


def install_clients(prefix: Path, clients: Iterable[str] = tuple(pins.CLIENTS), timeout: float = 600) -> Path:
    """Install the pinned packages these clients need into ``prefix``; returns its ``.bin`` folder.

    A prefix that already holds them (its ``installed.txt`` lists what was installed) is reused as it is; otherwise
    what it held and what is wanted are installed together, so a later run for other clients reuses it too.
    """
    bin_dir = prefix / "node_modules" / ".bin"
    stamp = prefix / "installed.txt"
    held = stamp.read_text().split() if stamp.is_file() else []
    needed = pins.npm_specs(clients)
    if set(needed) <= set(held):
        return bin_dir
    wanted_specs = sorted(set(held) | set(needed))
    wanted = "\n".join(wanted_specs)
    npm = shutil.which("npm")
    if npm is None:
        raise NpmUnavailable("npm is not on PATH")
    prefix.mkdir(parents=True, exist_ok=True)
    argv = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save", *wanted_specs]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        raise NpmUnavailable(f"npm install did not finish in {timeout:.0f} s") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise NpmUnavailable("npm install failed: " + " | ".join(tail))
    stamp.write_text(wanted)
    return bin_dir


def snapshot_checkout(checkout: Path, into: Path) -> Path:
    """Copy what a fresh clone holds (tracked and untracked-but-not-ignored files) into a new git repository.

    A user's checkout may also hold ignored files (``.venv``); a route that copies them is reported from this clean
    snapshot, so the report shows what the route itself adds, not what one machine happens to have.
    """
    listed = subprocess.run(
        ["git", "-C", str(checkout), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    target = into / "scaling-and-backends"
    for relative in sorted(filter(None, listed.split("\0"))):
        source = checkout / relative
        if not source.is_file():
            continue  # deleted in the working tree but still in the index
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / relative)
    git = ["git", "-C", str(target), "-c", "user.name=check", "-c", "user.email=check@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot"], check=True)
    return target


class Home:
    """A fresh home folder (and a work folder inside it) for one route."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="home-", dir=root))
        self.work = self.path / "work"
        self.work.mkdir()
        self.bin_dir = bin_dir

    def env(self, extra: Optional[dict] = None) -> dict:
        env = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED_ENV_PREFIXES)}
        env.update(QUIET_ENV)
        env["HOME"] = str(self.path)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra or {})
        return env

    def run(self, argv: list[str], timeout: float = 120, stdin: str = "", extra_env: Optional[dict] = None) -> Ran:
        try:
            done = subprocess.run(
                argv,
                cwd=self.work,
                env=self.env(extra_env),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as error:
            output = (error.stdout or b"").decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
            return Ran(argv, 124, output + f"\n[timed out after {timeout:.0f} s]", output)
        return Ran(argv, done.returncode, (done.stdout or "") + (done.stderr or ""), done.stdout or "")

"""Input stage of the diagnostic: the flags' values, checked, as one typed ``Request``.

The entry script parses the command line; ``load_request`` turns those plain values into a ``Request`` (backend and
package ids resolved, ``--probe-network`` targets parsed, the ``--accelerate-config`` file checked) or raises
``UsageError`` with the message to print. Nothing below this stage sees the command line.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from common.lazy_re import lazy
from common.output import escape_controls
from common.read import InputError, read_bytes

from diagnostic.base import BACKEND_IDS, STACK, STACK_IDS

MAX_TARGETS = 16
TARGET_RE = lazy(r"^(?:\[(?P<v6>[0-9A-Fa-f:.%\w]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>\d{1,5})$")


class UsageError(Exception):
    """A flag value the diagnostic cannot use; the message follows ``error: `` (exit 2)."""


class TargetError(ValueError):
    """A ``--probe-network`` value that is not a list of HOST:PORT."""


class Request(NamedTuple):
    """What the diagnostic was asked to do."""

    json: bool = False
    verbose: bool = False
    required_ids: Tuple[str, ...] = ()  # backends that must be ready (--require)
    probe_torch: bool = False
    probe_imports: bool = False
    probe_import_ids: Optional[Tuple[str, ...]] = None  # None: every installed stack package
    probe_network_targets: Optional[Tuple[Tuple[str, int], ...]] = None
    timeout: Optional[float] = None  # None: each subprocess's own default
    accelerate_config: Optional[str] = None  # None: the default config path

    @property
    def probing(self) -> bool:
        return bool(self.probe_imports or self.probe_torch or self.probe_network_targets)


def parse_ids(
    text: str, allowed: Sequence[str], aliases: Optional[Dict[str, str]] = None
) -> Tuple[List[str], List[str]]:
    """(known ids in order, without repeats; unknown parts) of a comma list."""
    chosen, unknown = [], []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name = (aliases or {}).get(part, part)
        (chosen if name in allowed else unknown).append(name if name in allowed else part)
    return list(dict.fromkeys(chosen)), unknown


def parse_targets(text: str) -> List[Tuple[str, int]]:
    """``host:port,[v6]:port`` -> [(host, port)]; raises TargetError with the offending part."""
    targets: List[Tuple[str, int]] = []
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        match = TARGET_RE.match(part)
        port = int(match.group("port")) if match else 0
        if not match or not 1 <= port <= 65535:
            raise TargetError(f"{part!r} is not HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)")
        targets.append((match.group("v6") or match.group("host"), port))
    if not targets:
        raise TargetError("no HOST:PORT given")
    if len(targets) > MAX_TARGETS:
        raise TargetError(f"{len(targets)} targets; at most {MAX_TARGETS}")
    return list(dict.fromkeys(targets))


def config_file_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be read as a config file (it is checked again when read), or None."""
    try:
        read_bytes(path, limit=0)
    except InputError as error:
        return str(error)
    return None


def load_request(
    *,
    json: bool = False,
    verbose: bool = False,
    require: str = "",
    probe_torch: bool = False,
    probe_imports: Optional[str] = None,
    probe_network: Optional[str] = None,
    timeout: Optional[float] = None,
    accelerate_config: Optional[str] = None,
) -> Request:
    """The checked request; UsageError names the first unusable value (in the order of the checks below)."""
    required, unknown = parse_ids(require, BACKEND_IDS)
    if unknown:
        raise UsageError(f"unknown backend id(s) {', '.join(unknown)}; valid: {', '.join(BACKEND_IDS)}")
    import_ids = None
    if probe_imports is not None and probe_imports != "all":
        aliases = {modules[0]: pid for pid, _, modules in STACK}
        aliases.update({m: pid for pid, _, modules in STACK for m in modules})
        ids, unknown = parse_ids(probe_imports, STACK_IDS, aliases)
        if unknown or not ids:
            raise UsageError(
                f"unknown package(s) for --probe-imports: {', '.join(unknown) or '(empty)'}; "
                f"valid: {', '.join(STACK_IDS)}"
            )
        import_ids = tuple(ids)
    targets = None
    if probe_network is not None:
        try:
            targets = tuple(parse_targets(probe_network))
        except TargetError as error:
            raise UsageError(f"--probe-network: {escape_controls(str(error))}") from None
    if accelerate_config is not None:
        problem = config_file_problem(accelerate_config)
        if problem:
            raise UsageError(f"--accelerate-config {escape_controls(problem)}")
    return Request(
        json=json,
        verbose=verbose,
        required_ids=tuple(required),
        probe_torch=probe_torch,
        probe_imports=probe_imports is not None,
        probe_import_ids=import_ids,
        probe_network_targets=targets,
        timeout=timeout,
        accelerate_config=accelerate_config,
    )

"""Validation of parsed values for the bundle's scripts: one place for numbers, JSON and tree size.

- :func:`number` / :func:`integer` accept a finite number within bounds (``bool`` is not a number; a numeric
  string over :data:`MAX_DIGITS` characters, ``nan``, ``inf`` and ``1e400`` are refused) and raise
  :class:`InvalidValue` with a message that names the value's label, never echoing a long value.
- :func:`bounded_float` / :func:`bounded_int` are the same checks as ``argparse`` ``type=`` callables.
- :func:`load_json` parses strict RFC 8259 JSON (no ``NaN``/``Infinity``, no integer over :data:`MAX_DIGITS`
  digits, no float that overflows) within a byte cap, a nesting depth (measured before parsing,
  ``common.read.measure_json``) and a node count.
- :func:`check_tree` bounds depth and node count of any parsed tree (YAML included, where aliases make one node
  count once per reference).

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Callable, Optional, Union

from common.read import StructureError, measure_json

__all__ = [
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_NODES",
    "InvalidValue",
    "NotJson",
    "bounded_float",
    "bounded_int",
    "check_tree",
    "integer",
    "load_json",
    "number",
    "short",
]

MAX_DIGITS = 40  # no count this bundle reads needs more digits; Python's own int() guard sits at 4,300
MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_JSON_BYTES = 8 * 1024 * 1024

Number = Union[int, float]


class InvalidValue(ValueError):
    """A value of the wrong type or out of range. The message names the value and says what was expected."""


class NotJson(InvalidValue):
    """Text that is not JSON at all (a syntax error or not UTF-8), as opposed to JSON out of bounds."""


def short(value: Any, limit: int = 40) -> str:
    """A value shown in a message: ``repr`` shortened to ``limit`` characters (never a whole hostile string)."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + f"... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**MAX_DIGITS:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    text = repr(value) if not isinstance(value, (dict, list, tuple, set)) else f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + "..."


def _coerce(value: Any, label: str) -> Number:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidValue(f"{label} must be a number, not {type(value).__name__}")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if len(text) > MAX_DIGITS:
            raise InvalidValue(f"{label} must be a number of at most {MAX_DIGITS} characters")
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise InvalidValue(f"{label} must be a number, not {short(value)}") from None
    if isinstance(value, int) and value.bit_length() > MAX_DIGITS * 4:
        raise InvalidValue(f"{label} is out of range ({short(value)})")
    return value


def number(
    value: Any,
    label: str,
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
    *,
    exclusive_minimum: bool = False,
) -> Number:
    """``value`` as a finite int or float within [minimum, maximum] (minimum exclusive when asked)."""
    result = _coerce(value, label)
    if isinstance(result, float) and not math.isfinite(result):
        raise InvalidValue(f"{label} must be a finite number, not {short(value)}")
    if minimum is not None and (result <= minimum if exclusive_minimum else result < minimum):
        relation = "greater than" if exclusive_minimum else "at least"
        raise InvalidValue(f"{label} must be {relation} {minimum:g}, not {short(value)}")
    if maximum is not None and result > maximum:
        raise InvalidValue(f"{label} must be at most {maximum:g}, not {short(value)}")
    return result


def integer(value: Any, label: str, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    """``value`` as an int within [minimum, maximum]; a float is accepted only when it is integral."""
    result = number(value, label, minimum, maximum)
    if isinstance(result, float):
        if not result.is_integer():
            raise InvalidValue(f"{label} must be a whole number, not {short(value)}")
        result = int(result)
    return result


def bounded_float(
    minimum: Optional[float] = None, maximum: Optional[float] = None, *, exclusive_minimum: bool = False
) -> Callable[[str], float]:
    """An argparse ``type=``: a finite float within bounds."""

    def parse(text: str) -> float:
        try:
            return float(number(text, "value", minimum, maximum, exclusive_minimum=exclusive_minimum))
        except InvalidValue as error:
            raise argparse.ArgumentTypeError(str(error).replace("value ", "", 1)) from None

    parse.__name__ = "number"
    return parse


def bounded_int(minimum: Optional[int] = None, maximum: Optional[int] = None) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number within bounds."""

    def parse(text: str) -> int:
        try:
            return integer(text, "value", minimum, maximum)
        except InvalidValue as error:
            raise argparse.ArgumentTypeError(str(error).replace("value ", "", 1)) from None

    parse.__name__ = "integer"
    return parse


_CONTAINERS = (dict, list, tuple, set, frozenset)


def check_tree(value: Any, label: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Raise :class:`InvalidValue` when ``value`` nests deeper than ``max_depth`` or holds more than ``max_nodes``
    nodes, counting a shared (aliased) node once per reference. Iterative: never a RecursionError."""
    if not isinstance(value, _CONTAINERS):
        return
    stack = [(value, 1)]
    seen = 1
    while stack:
        node, depth = stack.pop()
        children: Any = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if not children:
            continue
        if depth >= max_depth:
            raise InvalidValue(f"{label} nests deeper than {max_depth} levels")
        # Scalars are counted, not pushed: a shipped 30 kB table is checked in a fraction of its parse time.
        inner = [child for child in children if isinstance(child, _CONTAINERS)]
        seen += len(children)
        if seen > max_nodes:
            raise InvalidValue(f"{label} is too large (more than {max_nodes:,} values, aliases expanded)")
        stack.extend((child, depth + 1) for child in inner)


def _parse_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_DIGITS:
        raise InvalidValue(f"an integer of {len(digits):,} digits")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_DIGITS * 2:
        raise InvalidValue(f"a number of {len(text):,} characters")
    value = float(text)
    if not math.isfinite(value):
        raise InvalidValue(f"a number out of range ({text[:20]})")
    return value


def _parse_constant(name: str) -> Any:
    raise InvalidValue(f"{name} is not JSON")


def load_bundled_json(data: str, label: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON file the bundle ships (generated, read within ``max_bytes``): the standard parser alone, about a
    tenth of :func:`load_json`'s checked cost; a damaged copy still ends in :class:`InvalidValue`, never a
    traceback (a nesting past the interpreter's limit included)."""
    if len(data) > max_bytes:
        raise InvalidValue(f"{label} is larger than {max_bytes:,} bytes")
    try:
        return json.loads(data)
    except RecursionError:
        raise InvalidValue(f"{label} nests too deep") from None
    except ValueError as error:
        raise NotJson(f"{label} is not valid JSON ({type(error).__name__})") from None


def load_json(
    data: Union[str, bytes],
    label: str,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> Any:
    """Strict JSON within bounds; raises :class:`InvalidValue` naming ``label`` and what was wrong."""
    if len(data) > max_bytes:
        raise InvalidValue(f"{label} is larger than {max_bytes:,} bytes")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise NotJson(f"{label} is not UTF-8 text") from None
    try:
        measure_json(data, max_depth)  # before json.loads recurses into it
    except StructureError as error:
        raise InvalidValue(f"{label} {error}") from None
    try:
        value = json.loads(data, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except InvalidValue as error:
        raise InvalidValue(f"{label} is not valid JSON: {error}") from None
    except RecursionError:
        raise InvalidValue(f"{label} nests deeper than {max_depth} levels") from None
    except ValueError as error:
        message = str(error).split(":")[0] if isinstance(error, json.JSONDecodeError) else type(error).__name__
        where = f" (line {error.lineno}, column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
        raise NotJson(f"{label} is not valid JSON: {message}{where}") from None
    check_tree(value, label, max_depth, max_nodes)
    return value

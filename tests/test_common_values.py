"""scripts/common/values.py: finite numbers within bounds, strict and bounded JSON, bounded trees."""

from __future__ import annotations

import argparse

import pytest
from common.values import (
    MAX_DIGITS,
    InvalidValue,
    bounded_float,
    bounded_int,
    check_tree,
    integer,
    load_json,
    number,
    short,
)


@pytest.mark.parametrize(
    "value",
    ["nan", "inf", "-Infinity", "1e400", float("nan"), float("inf"), "9" * 5000, 10**5000, True, None, [1]],
    ids=["nan", "inf", "-inf", "1e400", "fnan", "finf", "5000-digit-str", "5000-digit-int", "bool", "none", "list"],
)
def test_number_refuses_non_finite_huge_and_wrong_types(value) -> None:
    with pytest.raises(InvalidValue) as info:
        number(value, "--params")
    assert str(info.value).startswith("--params ")
    assert len(str(info.value)) < 120  # never echoes a 5,000-digit value


def test_number_bounds_and_integers() -> None:
    assert number("1.5", "x", 0, 2) == 1.5
    assert number(3, "x") == 3
    with pytest.raises(InvalidValue, match="at least 0"):
        number(-1, "x", 0)
    with pytest.raises(InvalidValue, match="greater than 0"):
        number(0, "x", 0, exclusive_minimum=True)
    with pytest.raises(InvalidValue, match="at most 10"):
        number(11, "x", maximum=10)
    assert integer("8", "gpus", 1, 100) == 8 and integer(4.0, "gpus") == 4
    with pytest.raises(InvalidValue, match="whole number"):
        integer(2.5, "gpus")
    with pytest.raises(InvalidValue, match="at most 100"):
        integer("100000000", "gpus", 1, 100)


def test_argparse_types_turn_errors_into_usage_errors() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=bounded_float(0, 1e6, exclusive_minimum=True))
    parser.add_argument("--gpus", type=bounded_int(1, 4096))
    assert parser.parse_args(["--gib", "80", "--gpus", "8"]).gib == 80.0
    for argv in (["--gib", "nan"], ["--gib", "1e300"], ["--gpus", "100000000"], ["--gib", "0"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)


def test_load_json_is_strict() -> None:
    assert load_json('{"a": [1, 2.5, "x", null, true]}', "cfg") == {"a": [1, 2.5, "x", None, True]}
    for text, why in (
        ('{"a": NaN}', "NaN"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": 1e400}', "out of range"),
        ('{"a": ' + "9" * (MAX_DIGITS + 1) + "}", "digits"),
        ("{", "Expecting"),
        (b"\xff\xfe", "UTF-8"),
    ):
        with pytest.raises(InvalidValue, match=why) as info:
            load_json(text, "config.json")
        assert str(info.value).startswith("config.json ")


def test_load_json_bounds_depth_size_and_nodes() -> None:
    with pytest.raises(InvalidValue, match="deeper"):
        load_json("[" * 100_000 + "]" * 100_000, "deep.json")
    with pytest.raises(InvalidValue, match="deeper than 64"):
        load_json("[" * 70 + "]" * 70, "deep.json")
    with pytest.raises(InvalidValue, match="larger than 10 bytes"):
        load_json("[1, 2, 3, 4, 5]", "x", max_bytes=10)
    with pytest.raises(InvalidValue, match="too large"):
        load_json("[" + ",".join(["0"] * 1000) + "]", "x", max_nodes=100)


def test_check_tree_counts_shared_nodes_once_per_reference() -> None:
    node: list = ["x"]
    for _ in range(30):  # 2**30 leaves if expanded
        node = [node, node]
    with pytest.raises(InvalidValue, match="aliases expanded"):
        check_tree(node, "bomb", max_depth=100, max_nodes=10_000)


def test_short_never_prints_a_whole_hostile_value() -> None:
    assert len(short("x" * 10_000)) < 80
    assert "digits" in short(10**5000)


def test_a_bundled_json_file_is_parsed_plainly_and_a_damaged_copy_is_refused_cleanly() -> None:
    from common.values import InvalidValue, NotJson, load_bundled_json

    assert load_bundled_json('{"a": [1, 2.5]}', "table") == {"a": [1, 2.5]}
    with pytest.raises(InvalidValue, match="nests too deep"):
        load_bundled_json("[" * 100_000 + "]" * 100_000, "table")
    with pytest.raises(NotJson):
        load_bundled_json('{"a": ', "table")
    with pytest.raises(InvalidValue, match="larger than"):
        load_bundled_json("[]" * 10, "table", max_bytes=4)

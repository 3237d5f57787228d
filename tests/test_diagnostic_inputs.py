"""diagnostic/inputs.py: the flags' values become one checked Request, or a UsageError naming the bad value."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostic.base import BACKEND_IDS
from diagnostic.inputs import Request, TargetError, UsageError, load_request, parse_ids, parse_targets


def test_defaults_are_a_static_run() -> None:
    request = load_request()
    assert request == Request()
    assert not request.probing and request.required_ids == () and request.probe_import_ids is None


def test_ids_are_resolved_in_order_without_repeats() -> None:
    assert parse_ids("b, a,,b,x", ["a", "b"]) == (["b", "a"], ["x"])
    assert parse_ids("yaml", ["pyyaml"], {"yaml": "pyyaml"}) == (["pyyaml"], [])
    request = load_request(require=f"{BACKEND_IDS[1]},{BACKEND_IDS[0]},{BACKEND_IDS[1]}", probe_imports="torch,trl")
    assert request.required_ids == (BACKEND_IDS[1], BACKEND_IDS[0])
    assert request.probe_imports and request.probe_import_ids == ("torch", "trl") and request.probing
    everything = load_request(probe_imports="all")
    assert everything.probe_imports and everything.probe_import_ids is None


def test_parse_targets_accepts_hosts_ipv4_and_bracketed_ipv6() -> None:
    assert parse_targets("node-1.cluster:29500, 10.0.0.2:8000,[::1]:51216,node-1.cluster:29500") == [
        ("node-1.cluster", 29500),
        ("10.0.0.2", 8000),
        ("::1", 51216),
    ]
    with pytest.raises(TargetError):
        parse_targets(",".join(f"h{i}:1" for i in range(17)))
    assert load_request(probe_network="h:1").probe_network_targets == (("h", 1),)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"require": "ddp,nope"}, "unknown backend id(s) nope; valid: "),
        ({"probe_imports": "torch,notapackage"}, "unknown package(s) for --probe-imports: notapackage; valid: "),
        ({"probe_imports": ""}, "unknown package(s) for --probe-imports: (empty)"),
        ({"probe_network": "node1:70000"}, "--probe-network: 'node1:70000' is not HOST:PORT"),
        ({"probe_network": "h\x1b[2J:1"}, "--probe-network: 'h\\x1b[2J:1'"),
    ],
)
def test_unusable_values_are_usage_errors(values: dict, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        load_request(**values)
    assert str(caught.value).startswith(message)
    assert "\x1b" not in str(caught.value)


def test_the_accelerate_config_file_is_checked_before_anything_runs(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("distributed_type: FSDP\n", encoding="utf-8")
    assert load_request(accelerate_config=str(config)).accelerate_config == str(config)
    with pytest.raises(UsageError, match=r"^--accelerate-config "):
        load_request(accelerate_config=str(tmp_path / "absent.yaml"))
    with pytest.raises(UsageError):
        load_request(accelerate_config=str(tmp_path))  # a folder is not a config file

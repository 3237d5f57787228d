"""nodes/load.py: reports read from files or standard input, split (concatenated, srun --label, pdsh) and checked
against the shape check_optional_backends.py --json writes; every unusable input is an InputError naming why."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest
from nodes.load import (
    MAX_INPUT_BYTES,
    InputError,
    Request,
    UsageError,
    check_report,
    load_nodes,
    load_request,
    read_input,
    split_documents,
)


def report(hostname: str = "n0", **changes: Any) -> Dict[str, Any]:
    """The smallest report check_report accepts."""
    node = {key: {} for key in ("nccl", "network", "infiniband", "env", "accelerate")}
    value = {
        "tool": "check_optional_backends",
        "schema_version": 1,
        "node": {**node, "hostname": hostname},
        **{key: {} for key in ("packages", "python", "torch_build", "accelerators", "launch")},
        "findings": [],
    }
    value.update(changes)
    return value


def test_one_concatenated_and_labelled_inputs_are_split() -> None:
    texts = [json.dumps(report(f"n{i}"), indent=1) for i in range(3)]
    assert [s for s, _ in split_documents(texts[0], "a.json")] == ["a.json"]
    assert [s for s, _ in split_documents("\n".join(texts), "all.json")] == [
        "all.json [0]",
        "all.json [1]",
        "all.json [2]",
    ]
    srun = "".join(f"{i}: {line}\n" for i, text in enumerate(texts) for line in text.splitlines())
    split = split_documents(srun, "<stdin>")
    assert [(s, v["node"]["hostname"]) for s, v in split] == [
        ("<stdin> [0]", "n0"),
        ("<stdin> [1]", "n1"),
        ("<stdin> [2]", "n2"),
    ]
    with pytest.raises(InputError, match=r"line 2 has no 'label: ' prefix"):
        split_documents('0: {"a": 1,\n"b": 2}\n', "mixed")
    with pytest.raises(InputError, match=r"x.json: not JSON"):
        split_documents("{not json", "x.json")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"tool": "check_vllm_server", "schema_version": 1}, "not a check_optional_backends.py --json report"),
        ({"schema_version": 1}, "no 'tool' field"),
        ([1, 2], "expected the JSON object"),
        (report(schema_version=2), "schema_version 2; this compare_nodes.py reads schema_version 1"),
        ({k: v for k, v in report().items() if k != "node"}, "has no node facts (written by an older"),
        (report(packages=[]), "'packages' is missing or not a JSON object"),
        (report(findings={}), "'findings' is missing or not a JSON array"),
        (report(node={"env": "x"}), "node.nccl is missing or not a JSON object"),
    ],
)
def test_reports_of_another_tool_schema_or_shape_are_refused(value: Any, message: str) -> None:
    with pytest.raises(InputError, match=r"^r\.json: ") as caught:
        check_report("r.json", value)
    assert message in str(caught.value)
    assert check_report("r.json", report()) == report()


def test_inputs_are_read_bounded_and_without_blocking(tmp_path: Path) -> None:
    assert read_input("-", io.StringIO("text")) == "text"
    with pytest.raises(InputError, match="cannot read"):
        read_input(str(tmp_path / "absent.json"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="cannot read"):
        read_input(str(fifo))  # refused, not waited on
    big = tmp_path / "big.json"
    with big.open("wb") as out:
        out.truncate(MAX_INPUT_BYTES + 1)
    with pytest.raises(InputError, match="larger than 64 MiB"):
        read_input(str(big))


def test_nodes_are_numbered_across_roles(tmp_path: Path) -> None:
    train = tmp_path / "train.json"
    train.write_text(json.dumps(report("t0")) + json.dumps(report("t1")), encoding="utf-8")
    server = tmp_path / "server.json"
    server.write_text(json.dumps(report(None)), encoding="utf-8")
    nodes = load_nodes([str(train)], [str(server)])
    assert [(n["index"], n["role"], n["hostname"], n["source"]) for n in nodes] == [
        (0, "train", "t0", f"{train} [0]"),
        (1, "train", "t1", f"{train} [1]"),
        (2, "vllm-server", "?", str(server)),
    ]
    (tmp_path / "empty.json").write_text("\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"empty\.json: empty"):
        load_nodes([str(tmp_path / "empty.json")], [])


def test_a_request_needs_two_reports_and_standard_input_once(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps(report("a")), encoding="utf-8")
    two = tmp_path / "two.json"
    two.write_text(json.dumps(report("b")), encoding="utf-8")
    nodes = load_request(Request((str(one),), (str(two),)))
    assert [(n["hostname"], n["role"]) for n in nodes] == [("a", "train"), ("b", "vllm-server")]
    with pytest.raises(UsageError, match="need reports from at least two nodes, got 1"):
        load_request(Request((str(one),)))
    with pytest.raises(UsageError, match="can be given once"):
        load_request(Request(("-",), ("-",)), io.StringIO(""))


# ---- issue 21: bounded standard input, reports never trusted, no hostname is no duplicate ---------------------------


def test_standard_input_past_64_mib_says_so_instead_of_comparing_a_prefix() -> None:
    from nodes.load import MAX_INPUT_BYTES, InputError, read_input

    with pytest.raises(InputError, match="larger than 64 MiB; stopped there and compared nothing"):
        read_input("-", io.StringIO(" " * (MAX_INPUT_BYTES + 1)))


@pytest.mark.parametrize(
    ("name", "value", "hidden"),
    [
        ("VLLM_API_KEY", "JBSWY3DPEHPK3PXPQ7RZ2M4NW6", True),
        ("NCCL_IB_AUTH_KEY", "84729103657482019376", True),
        ("HF_TOKEN", "anything-at-all", True),
        ("NCCL_DEBUG_FILE", "/x?password=hunter2hunter2", True),
        ("CACHE_KEY", "3.11", False),
        ("NCCL_SOCKET_IFNAME", "eth0", False),
    ],
)
def test_a_reports_env_is_scrubbed_again_by_the_name_rules(name: str, value: str, hidden: bool) -> None:
    from nodes.load import rescrub_env

    shown = rescrub_env({name: value})[name]
    assert (value not in shown) is hidden

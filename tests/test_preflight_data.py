"""scripts/preflight/data.py: strict, bounded parsing of answers and the shapes the rules may read."""

from __future__ import annotations

import json

import pytest
from preflight import data as vdata

from fake_vllm_server import model_list, server_info


def _response(route: str, body) -> vdata.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return vdata.Response(route, status=200, body=raw)


def test_good_answers_have_no_shape_problem() -> None:
    for route, body in (
        (vdata.ROUTE_VERSION, {"version": "0.31.0"}),
        (vdata.ROUTE_MODELS, model_list(["trl-policy-v3"])),
        (vdata.ROUTE_SERVER_INFO, server_info("0.31.0")),
        (vdata.ROUTE_SERVER_INFO, server_info("0.27.1")),
    ):
        assert _response(route, body).shape_problem() is None, route


@pytest.mark.parametrize(
    ("route", "body", "needle"),
    [
        (vdata.ROUTE_SERVER_INFO, "hello", "JSON str, not an object"),
        (vdata.ROUTE_VERSION, {"version": "0." + "9" * 5000}, "not a version string"),
        (vdata.ROUTE_VERSION, {"version": ["0.31.0"]}, "not a version string"),
        (vdata.ROUTE_MODELS, {"data": "x"}, "`data` is str"),
        (vdata.ROUTE_MODELS, {"data": [{"id": 5}]}, "`data[0].id` is int"),
        (vdata.ROUTE_MODELS, {"data": [{"id": "m", "max_model_len": -1}]}, "out of range"),
        (vdata.ROUTE_SERVER_INFO, {"vllm_config": {"model_config": [1]}}, "model_config` is list"),
        (
            vdata.ROUTE_SERVER_INFO,
            {"vllm_config": {"model_config": {"logprobs_mode": ["raw_logprobs"]}}},
            "logprobs_mode` is list",
        ),
        (vdata.ROUTE_SERVER_INFO, {"vllm_config": {"parallel_config": {"data_parallel_size": True}}}, "bool"),
        (vdata.ROUTE_SERVER_INFO, {"vllm_config": {}, "vllm_env": []}, "`vllm_env` is list"),
    ],
)
def test_shape_problems_name_the_field(route, body, needle) -> None:
    response = _response(route, body)
    assert needle in (response.shape_problem() or ""), response.shape_problem()
    snap = vdata.Snapshot(url="http://a:8000", responses={route: response})
    assert snap.ok_json(route) is None  # the rules see a malformed route as unanswered


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"version": NaN}', "NaN"),
        (b"[" * 100_000 + b"]" * 100_000, "deeper"),
        (b'{"a": ' + b"9" * 5000 + b"}", "digits"),
        (b"<html>sign in</html>", "an HTML page"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_bodies_that_are_not_strict_json_say_why(body: bytes, why: str) -> None:
    data, reason = vdata.Response(vdata.ROUTE_VERSION, status=200, body=body).json()
    assert data is None and why in reason


def test_a_non_json_snippet_is_scrubbed_before_it_is_cut() -> None:
    body = b"<html>Authorization: Bearer hf_" + b"A1b2C3d4E5" * 4 + b" trailing text to cut</html>"
    reason = vdata.describe_non_json(body, "text/html")
    assert "A1b2C3d4" not in reason and "<redacted>" in reason

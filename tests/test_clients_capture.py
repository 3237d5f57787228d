"""tools/clients/capture.py: the loopback model stand-in records requests, answers 400, refuses past its bound."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

from clients.capture import ModelStandIn


def post(url: str, body: dict) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    return caught.value.code


def test_records_each_request_and_answers_with_an_error() -> None:
    with ModelStandIn(max_requests=2) as api:
        assert api.url.startswith("http://127.0.0.1:")
        assert post(api.url + "/v1/messages", {"system": "skills: a, b"}) == 400
        recorded = api.requests
    assert [(r.method, r.path) for r in recorded] == [("POST", "/v1/messages")]
    assert json.loads(recorded[0].body) == {"system": "skills: a, b"}


def test_refuses_requests_past_its_bound_so_a_retrying_client_ends() -> None:
    with ModelStandIn(max_requests=1) as api:
        codes = [post(api.url + "/v1/x", {"n": n}) for n in range(3)]
        assert len(api.requests) == 1
    assert codes == [400, 503, 503]

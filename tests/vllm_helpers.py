"""Builders shared by the vLLM pre-flight unit tests: snapshots from the loopback server's vLLM-shaped bodies, an
intent, and shortcuts to judge them (tests/test_vllm_*.py)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from preflight import data as vdata
from preflight import rules_replicas as vreplicas
from preflight import rules_server as vrules

from fake_vllm_server import model_list, server_info


def snapshot(
    url: str = "http://replica-a:8000",
    *,
    version: str = "0.31.0",
    adapters: tuple = ("trl-policy-v3",),
    models: Optional[Dict[str, Any]] = None,
    info: Optional[Dict[str, Any]] = None,
    info_status: int = 200,
    info_body: Optional[bytes] = None,
    health: int = 200,
) -> vdata.Snapshot:
    """A parsed snapshot as probe_server would leave it after four answered GETs."""
    if info is None:  # the fixture closest to the reported version
        info = server_info("0.27.1" if version.startswith("0.27") else "0.31.0")
    snap = vdata.Snapshot(url=url)
    snap.responses[vdata.ROUTE_HEALTH] = vdata.Response(vdata.ROUTE_HEALTH, status=health, body=b"")
    snap.responses[vdata.ROUTE_VERSION] = vdata.Response(
        vdata.ROUTE_VERSION, status=200, body=json.dumps({"version": version}).encode()
    )
    snap.responses[vdata.ROUTE_MODELS] = vdata.Response(
        vdata.ROUTE_MODELS, status=200, body=json.dumps(models or model_list(adapters)).encode()
    )
    if info_status == 200:
        body = json.dumps(info).encode()
    else:
        body = info_body if info_body is not None else b'{"detail":"Not Found"}'
    snap.responses[vdata.ROUTE_SERVER_INFO] = vdata.Response(vdata.ROUTE_SERVER_INFO, status=info_status, body=body)
    return snap


def intent(**overrides: Any) -> vdata.Intent:
    values: Dict[str, Any] = {
        "trainer": "async-grpo",
        "lora_rank": 16,
        "max_staleness": 4,
        "max_length": 4096,
        "model": None,
        "adapters": (),
        "importance_sampling_correction": True,
        "auth_env": None,
    }
    values.update(overrides)
    return vdata.Intent(**values)


TRL_RANGE = {"trl_installed": False, "trl_version": "1.16.0", "vllm_spec": ">=0.22.0,<=0.31.0", "source": "test"}


def judge(snap: vdata.Snapshot, the_intent: vdata.Intent, local_vllm: Optional[str] = None):
    return vrules.judge_server(snap, the_intent, TRL_RANGE, local_vllm)


def ids(findings: List[vdata.Finding], severity: Optional[str] = None) -> List[str]:
    return [f.id for f in findings if severity is None or f.severity == severity]


def by_id(findings: List[vdata.Finding], finding_id: str) -> vdata.Finding:
    matches = [f for f in findings if f.id == finding_id]
    assert len(matches) == 1, (finding_id, ids(findings))
    return matches[0]


def lora(info: Dict[str, Any]) -> Dict[str, Any]:
    return info["vllm_config"]["lora_config"]


def replicas(*snaps: vdata.Snapshot, the_intent: Optional[vdata.Intent] = None) -> List[vdata.Finding]:
    the_intent = the_intent or intent()
    outcomes = [judge(s, the_intent)[0] for s in snaps]
    return vreplicas.check_replicas(snaps, outcomes, the_intent)

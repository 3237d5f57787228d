"""Assembles the report: gathers every fact, runs the opt-in probes, judges the backends and adds findings."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from common.read import SKIPPED_PATH_ENTRIES, Started

from diagnostic.base import (
    DEFAULT_NETWORK_TIMEOUT,
    DEFAULT_PROBE_TIMEOUT,
    SCHEMA_VERSION,
    STACK,
    STACK_IDS,
    TOOL,
    new_finding,
)
from diagnostic.builds import bnb_native_libraries, cuda_toolkit, deepspeed_build, nccl_wheels, torch_build
from diagnostic.compat import compatibility
from diagnostic.crosschecks import environment_findings
from diagnostic.gpus import DEFAULT_SMI_TIMEOUT, gather_accelerators, start_nvidia_query
from diagnostic.inputs import Request
from diagnostic.interpreter import platform_facts, python_facts
from diagnostic.interpreter_hint import gather_interpreter_facts, interpreter_hint_json, judge_interpreter
from diagnostic.launch import accelerate_config_path, gather_env, read_accelerate_config
from diagnostic.node import gather_node, node_findings
from diagnostic.packages import gather_packages, scan_distributions
from diagnostic.release_diff import release_differences
from diagnostic.rules import Context, judge_backends, verdict_line


def collect(request: Request, env: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, Any], List[str]]:
    """Gather every fact, run the probes asked for, judge the backends, and return (report, secrets to scrub)."""
    start = time.perf_counter()
    gpu_query = start_nvidia_query()  # the driver answers while the packages are read
    try:
        return _collect(request, env, start, gpu_query)
    except BaseException:
        if gpu_query is not None:
            gpu_query.cancel()
        raise


def _collect(
    request: Request, env: Optional[Dict[str, str]], start: float, gpu_query: Optional[Started]
) -> Tuple[Dict[str, Any], List[str]]:
    env = dict(os.environ if env is None else env)
    smi_timeout = request.timeout if request.timeout is not None else DEFAULT_SMI_TIMEOUT
    probe_timeout = request.timeout if request.timeout is not None else DEFAULT_PROBE_TIMEOUT
    path_entries = list(sys.path)
    findings: List[Dict[str, str]] = []
    dists = scan_distributions(path_entries)
    packages, chosen = gather_packages(path_entries, dists)
    build = torch_build(packages)
    build["cuda_toolkit"] = cuda_toolkit()
    build["nccl_wheels"] = nccl_wheels(dists)
    report: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL,
        "elapsed_seconds": 0.0,
        "python": python_facts(),
        "platform": platform_facts(),
        "packages": packages,
        "torch_build": build,
    }
    interpreter = gather_interpreter_facts(packages["torch"]["installed"], environ=env)
    report["interpreter"] = interpreter_hint_json(interpreter, judge_interpreter(interpreter))
    report["compatibility"] = compatibility(packages, chosen, findings)
    report["release_differences"] = release_differences(packages)
    report["accelerators"] = gather_accelerators(env, smi_timeout, gpu_query)
    config_path = request.accelerate_config or accelerate_config_path(env)
    env_selected, secrets = gather_env(env)
    report["launch"] = {
        "accelerate_config": read_accelerate_config(config_path, packages),
        "env": env_selected,
    }
    report["node"] = gather_node(env, dists, chosen, report["launch"]["accelerate_config"], packages)
    report["deepspeed_build"] = deepspeed_build(packages) if packages["deepspeed"]["installed"] else None
    report["bitsandbytes_libraries"] = bnb_native_libraries(packages) if packages["bitsandbytes"]["installed"] else []
    probes: Dict[str, Any] = {}
    failed_probes: List[Dict[str, str]] = []
    if request.probe_torch or request.probe_imports:
        from diagnostic.probes import probe_findings, probe_imports, probe_torch  # opt-in: not loaded by default
    if request.probe_torch:
        probes["torch"] = probe_torch(probe_timeout, path_entries)
    if request.probe_imports:
        targets = []
        wanted = request.probe_import_ids
        for pid, _, _ in STACK:
            if (wanted is None and packages[pid]["installed"]) or (wanted is not None and pid in wanted):
                targets.append((pid, packages[pid]["module"]))
        probes["imports"] = probe_imports(targets, probe_timeout, path_entries)
    if probes:
        failed_probes = probe_findings(probes)  # crashes, hangs and import errors of the probes above
    network_targets = request.probe_network_targets
    if network_targets:
        from diagnostic.network import probe_network  # opt-in: the default run never loads the socket code

        probes["network"] = probe_network(
            network_targets, request.timeout if request.timeout is not None else DEFAULT_NETWORK_TIMEOUT
        )
    if probes:
        report["probes"] = probes
    ctx = Context(report, chosen)
    report["backends"] = judge_backends(ctx)
    report["findings"] = environment_findings(report) + findings + failed_probes + node_findings(report["node"])
    if probes.get("network"):
        from diagnostic.network import network_findings

        report["findings"] += network_findings(probes["network"])
    if packages["torch"]["installed"] and not packages["trl"]["installed"]:
        report["findings"].append(
            new_finding("warning", "trl_missing", "trl is not installed here; the verdicts judge the backends alone")
        )
    if not any(packages[pid]["installed"] for pid in STACK_IDS):
        report["findings"].insert(
            0,
            new_finding(
                "info",
                "nothing_installed",
                f"none of the training stack is installed for {sys.executable}; install with: pip install trl",
            ),
        )
    if SKIPPED_PATH_ENTRIES:
        report["findings"].append(
            new_finding(
                "warning",
                "path_entry_skipped",
                f"PATH holds {', '.join(repr(e) for e in SKIPPED_PATH_ENTRIES[:5])}: an empty or relative entry "
                "names the working folder, so GPU tools were looked up only in absolute PATH entries",
            )
        )
    report["verdict"] = verdict_line(report["backends"], request.required_ids, bool(probes.get("imports")))
    report["elapsed_seconds"] = round(time.perf_counter() - start, 3)
    return report, secrets

"""Hostile input never wins: every input channel of the three scripts, fed hostile forms, in real subprocesses.

Each case asserts exit 0, 1 or 2 (2 with a one-line message naming the input), no traceback, done within its
timeout plus one second, peak memory under 256 MB, and no planted secret or any 8-character fragment of it in
stdout or stderr (see tests/hostile_helpers.py). All cases run once, four at a time, in a module fixture; each
test then judges one case. Inputs are generated here at test time.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import os
import platform
import random
import re
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest
import yaml

from diagnostic_helpers import add_dist, add_torch, cat, write_tool
from hostile_helpers import (
    Case,
    HostileServer,
    Result,
    _json,
    _send,
    planted,
    problems,
    run_all,
    secret_forms,
    serve_vllm_like,
    silent_listener,
    text_width_problem,
)

TOKEN = "hf_" + hashlib.sha256(b"hostile-suite").hexdigest()[:34]
ODD_TOKEN = 'tk"q\\' + hashlib.sha256(b"odd").hexdigest()[:30]  # a quote and a backslash: JSON-escaped when reflected
WIDE_TOKEN = "tk_" + hashlib.sha256(b"wide").hexdigest()[:20] + "\u20ac" + hashlib.sha256(b"w2").hexdigest()[:12]
PASSWORD = "pw" + hashlib.sha256(b"password").hexdigest()[:20]


# --------------------------------------------------------------------------------------------------------------
# vLLM servers that misbehave
# --------------------------------------------------------------------------------------------------------------


def _reflect_html(handler, route: str) -> None:
    auth = handler.headers.get("Authorization", "")
    _send(handler, 200, f"<html><body>Sign in. You sent {auth} to {route}</body></html>".encode(), "text/html")


def _reflect_models(handler, route: str) -> None:
    auth = handler.headers.get("Authorization", "").replace("Bearer ", "")
    if route == "/v1/models":
        _json(handler, {"object": "list", "data": [{"id": auth, "object": "model", "max_model_len": 4096}]})
    elif route == "/version":
        _json(handler, {"version": auth})
    else:
        serve_vllm_like()(handler, route)


def _redirect_loop(handler, route: str) -> None:
    _send(handler, 302, b"", Location=handler.path)


def _big(handler, route: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    chunk = b" " * 65536
    for _ in range(160):  # 10 MB, over the 8 MiB cap
        handler.wfile.write(chunk)


def _gzip(handler, route: str) -> None:
    _send(handler, 200, gzip.compress(b'{"version": "0.31.0"}'), Content_Encoding="gzip")


def _drip(handler, route: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    for _ in range(100):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.1)


def _hang(handler, route: str) -> None:
    time.sleep(20)


def _raw(body: bytes, only: Optional[str] = None):
    def behaviour(handler, route: str) -> None:
        if only is None or route.startswith(only):
            _send(handler, 200, body)
        else:
            serve_vllm_like()(handler, route)

    return behaviour


BEHAVIOURS = {
    "reflect-html": _reflect_html,
    "reflect-models": _reflect_models,
    "redirect-loop": _redirect_loop,
    "big": _big,
    "gzip": _gzip,
    "drip": _drip,
    "hang": _hang,
    "good": serve_vllm_like(),
    "empty": lambda handler, route: _send(handler, 200, b""),
    "server-info-string": serve_vllm_like({"/server_info?config_format=json": "hello"}),
    "model-config-list": serve_vllm_like(
        {"/server_info?config_format=json": {"vllm_config": {"model_config": [1, 2]}, "vllm_env": {}}}
    ),
    "logprobs-list": serve_vllm_like(
        {
            "/server_info?config_format=json": {
                "vllm_config": {"model_config": {"logprobs_mode": ["raw_logprobs"], "max_model_len": 8192}},
                "vllm_env": {},
            }
        }
    ),
    "models-deep": _raw(b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "/v1/models"),
    "version-digits": _raw(b'{"version": "0.' + b"9" * 5000 + b'"}', "/version"),
    "transfer-nan": _raw(
        b'{"vllm_config": {"weight_transfer_config": {"backend": "nccl", "x": NaN, "y": -Infinity}}, "vllm_env": {}}',
        "/server_info",
    ),
    "len-digits": _raw(
        b'{"object": "list", "data": [{"id": "m", "max_model_len": ' + b"9" * 5000 + b"}]}", "/v1/models"
    ),
    "control-chars": serve_vllm_like(
        {
            "/v1/models": {
                "object": "list",
                "data": [{"id": "evil\x1b[2K\r\nVerdict: OK\u202e", "object": "model", "max_model_len": 4096}],
            }
        }
    ),
    "models-wrong-types": serve_vllm_like({"/v1/models": {"object": "list", "data": [{"id": 5, "parent": []}]}}),
}


def _endless(handler, route: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    chunk = b" " * 65536
    with contextlib.suppress(OSError):
        while True:  # never ends: the reader must stop at its cap
            handler.wfile.write(chunk)


def _lora_limits() -> object:
    from fake_vllm_server import server_info

    info = server_info("0.31.0")
    info["vllm_config"]["lora_config"] = {"max_lora_rank": 8, "max_loras": 1}
    info["vllm_env"] = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
    return serve_vllm_like({"/server_info?config_format=json": info})


BEHAVIOURS.update(
    {
        "endless": _endless,
        "empty-object": lambda handler, route: _json(handler, {}),
        "lora-limits": _lora_limits(),
    }
)


def _not_vllm_without_dev_mode_advice(result: Result) -> Optional[str]:
    flat = " ".join(result.stdout.split())
    if "not vLLM, so these checks do not apply" not in flat:
        return "the report does not say the server is not vLLM"
    return "VLLM_SERVER_DEV_MODE is suggested to a server that is not vLLM" if "VLLM_SERVER_DEV_MODE" in flat else None


def _both_lora_limits(result: Result) -> Optional[str]:
    missing = [i for i in ("lora-rank-too-low", "lora-slots-too-few") if i not in result.stdout]
    return f"not listed at once: {missing}" if missing else None


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def _mutations(seed: int) -> Dict[str, object]:
    """One deterministic malformed answer: a field the rules read, replaced by a value of another type or range."""
    from fake_vllm_server import model_list, server_info

    rng = random.Random(seed)
    hostile = [
        "x" * 5000,
        ["list"],
        {"a": {"b": [1]}},
        10**30,
        -1,
        None,
        True,
        1.5,
        "",
        [[[[[[]]]]]],
        {"": None},
    ]
    models, info = model_list(["trl-policy-v1"]), server_info("0.31.0")
    targets = [
        ("/version", lambda v: v),
        ("/v1/models", lambda v: v),
        ("/server_info?config_format=json", lambda v: v),
        ("/version", lambda v: {"version": v}),
        ("/v1/models", lambda v: {**models, "data": v}),
        ("/v1/models", lambda v: {**models, "data": [{**models["data"][0], "id": v}]}),
        ("/v1/models", lambda v: {**models, "data": [{**models["data"][0], "max_model_len": v}]}),
        ("/v1/models", lambda v: {**models, "data": [models["data"][0], {**models["data"][1], "parent": v}]}),
        ("/server_info?config_format=json", lambda v: {**info, "vllm_config": v}),
        ("/server_info?config_format=json", lambda v: {**info, "vllm_env": v}),
    ]
    for section in ("model_config", "parallel_config", "lora_config", "weight_transfer_config"):
        targets.append(
            (
                "/server_info?config_format=json",
                lambda v, s=section: {**info, "vllm_config": {**info["vllm_config"], s: v}},
            )
        )
        for key in ("max_model_len", "logprobs_mode", "data_parallel_size", "max_lora_rank", "max_loras", "backend"):
            targets.append(
                (
                    "/server_info?config_format=json",
                    lambda v, s=section, k=key: {
                        **info,
                        "vllm_config": {**info["vllm_config"], s: {**(info["vllm_config"].get(s) or {}), k: v}},
                    },
                )
            )
    route, build = rng.choice(targets)
    return {route: build(rng.choice(hostile))}


FUZZ = 40
for _seed in range(FUZZ):
    BEHAVIOURS[f"fuzz-{_seed}"] = serve_vllm_like(_mutations(_seed))


def _every_fuzzed_server_reported(result: Result) -> Optional[str]:
    problem = _strict_json(result)
    if problem:
        return problem
    report = json.loads(result.stdout)
    if len(report["servers"]) != FUZZ:
        return f"{len(report['servers'])} of {FUZZ} servers reported"
    return None


def _one_verdict_line(result: Result) -> Optional[str]:
    if "\x1b" in result.stdout or "\r" in result.stdout or "\u202e" in result.stdout:
        return "a control character from the server reached the output"
    verdicts = [line for line in result.stdout.splitlines() if line.startswith("Verdict")]
    return None if len(verdicts) == 1 else f"{len(verdicts)} lines start with Verdict"


def _finding(finding_id: str) -> Callable[[Result], Optional[str]]:
    def check(result: Result) -> Optional[str]:
        found = f" {finding_id}: " in result.stdout or f": {finding_id}: " in result.stdout
        return None if found else f"no {finding_id!r} finding in the report"

    return check


def _strict_json(result: Result) -> Optional[str]:
    try:
        json.loads(result.stdout, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    except ValueError as error:
        return f"--json output is not strict JSON: {error}"
    return None


def _good_replica_still_judged(result: Result) -> Optional[str]:
    problem = _strict_json(result)
    if problem:
        return problem
    report = json.loads(result.stdout)
    verdicts = {server["url"].rsplit("/", 1)[-1]: server for server in report["servers"]}
    good = verdicts.get("good") or {}
    if good.get("vllm_version") != "0.31.0":
        return "the good replica was not reported"
    ids = [f["id"] for f in report["findings"] if f["server"] and f["server"].endswith("logprobs-list")]
    return None if "malformed-answer" in ids else f"no malformed-answer finding for the bad replica: {ids}"


def _text_layout(result: Result) -> Optional[str]:
    problem = text_width_problem(result.stdout)
    if problem:
        return problem
    lines = result.stdout.rstrip("\n").splitlines()
    if not lines[-1].startswith("Require: ") or not any(line.startswith("Verdict: ") for line in lines[-6:]):
        return f"the verdict and --require result are not the last lines: {lines[-6:]}"
    return None


VLLM = "vllm"


def vllm_cases(silent_url: str) -> List[Case]:
    auth = {"SERVER_TOKEN": TOKEN}
    cases = [
        Case("vllm-reflect-html", VLLM, ["--vllm-url", "{url}/reflect-html", "--auth-env", "SERVER_TOKEN"], 6,
             auth, secrets=[TOKEN], check=_finding("non-json")),
        Case("vllm-reflect-html-json", VLLM, ["--vllm-url", "{url}/reflect-html", "--auth-env", "SERVER_TOKEN",
             "--json"], 6, auth, secrets=[TOKEN], check=_strict_json),
        Case("vllm-reflect-models", VLLM, ["--vllm-url", "{url}/reflect-models", "--auth-env", "SERVER_TOKEN"], 6,
             auth, secrets=[TOKEN]),
        Case("vllm-reflect-escaped-json", VLLM, ["--vllm-url", "{url}/reflect-models", "--auth-env", "ODD",
             "--json"], 6, {"ODD": ODD_TOKEN}, secrets=[ODD_TOKEN], check=_strict_json),
        Case("vllm-auth-env-is-a-token", VLLM, ["--vllm-url", "{url}/good", "--auth-env", TOKEN], 6,
             secrets=[TOKEN], codes=(2,), names="--auth-env"),
        Case("vllm-token-not-latin1", VLLM, ["--vllm-url", "{url}/reflect-html", "--auth-env", "WIDE"], 6,
             {"WIDE": WIDE_TOKEN}, secrets=[WIDE_TOKEN, "\u20ac"], codes=(2,), names="--auth-env"),
        Case("vllm-url-credentials", VLLM, ["--vllm-url", f"http://user:{PASSWORD}@127.0.0.1:1"], 6,
             secrets=[PASSWORD], codes=(2,), names="--vllm-url"),
        Case("vllm-server-info-string", VLLM, ["--vllm-url", "{url}/server-info-string"], 6,
             check=_finding("malformed-answer")),
        Case("vllm-model-config-list", VLLM, ["--vllm-url", "{url}/model-config-list"], 6,
             check=_finding("malformed-answer")),
        Case("vllm-one-bad-replica", VLLM, ["--vllm-url", "{url}/good", "--vllm-url", "{url}/logprobs-list",
             "--json"], 6, check=_good_replica_still_judged),
        Case("vllm-models-deep", VLLM, ["--vllm-url", "{url}/models-deep"], 6, check=_finding("non-json")),
        Case("vllm-version-5000-digits", VLLM, ["--vllm-url", "{url}/version-digits"], 6,
             check=_finding("malformed-answer")),
        Case("vllm-nan-in-json", VLLM, ["--vllm-url", "{url}/transfer-nan", "--json"], 6, check=_strict_json),
        Case("vllm-max-model-len-5000-digits", VLLM, ["--vllm-url", "{url}/len-digits"], 6,
             check=_finding("non-json")),
        Case("vllm-models-wrong-types", VLLM, ["--vllm-url", "{url}/models-wrong-types"], 6,
             check=_finding("malformed-answer")),
        Case("vllm-control-characters", VLLM, ["--vllm-url", "{url}/control-chars"], 6, check=_one_verdict_line),
        Case("vllm-redirect-loop", VLLM, ["--vllm-url", "{url}/redirect-loop"], 6, check=_finding("redirect-loop")),
        Case("vllm-body-over-cap", VLLM, ["--vllm-url", "{url}/big"], 6, check=_finding("body-too-long")),
        # issue 21, round 2
        Case("vllm-endless-body", VLLM, ["--vllm-url", "{url}/endless"], 6, check=_finding("body-too-long")),
        Case("vllm-url-not-ascii", VLLM, ["--vllm-url", "{url}/caf\u00e9"], 4, codes=(2,), names="URL not encodable"),
        Case("vllm-empty-object-everywhere", VLLM, ["--vllm-url", "{url}/empty-object"], 6, codes=(0, 1),
             check=_not_vllm_without_dev_mode_advice),
        Case("vllm-404-everywhere", VLLM, ["--vllm-url", "{url}/nothing-here"], 6, codes=(0, 1),
             check=_not_vllm_without_dev_mode_advice),
        Case("vllm-lora-limits-at-once", VLLM, ["--vllm-url", "{url}/lora-limits", "--trainer", "async-grpo",
             "--lora-rank", "16"], 6, codes=(0, 1), check=_both_lora_limits),
        Case("vllm-gzip-body", VLLM, ["--vllm-url", "{url}/gzip"], 6, check=_finding("encoded")),
        Case("vllm-drip", VLLM, ["--vllm-url", "{url}/drip", "--deadline", "1.5"], 1.5, check=_finding("deadline")),
        Case("vllm-hang", VLLM, ["--vllm-url", "{url}/hang", "--deadline", "1.5", "--timeout", "5"], 1.5,
             check=_finding("deadline")),
        Case("vllm-300-silent-urls", VLLM,
             [a for i in range(300) for a in ("--vllm-url", f"{silent_url}/s{i}")] + ["--deadline", "2"], 2),
        Case("vllm-timeout-inf", VLLM, ["--vllm-url", "{url}/good", "--timeout", "inf"], 4, codes=(2,),
             names="--timeout"),
        Case("vllm-deadline-nan", VLLM, ["--vllm-url", "{url}/good", "--deadline", "nan"], 4, codes=(2,),
             names="--deadline"),
        Case("vllm-max-length-1e400", VLLM, ["--vllm-url", "{url}/good", "--max-length", "1e400"], 4, codes=(2,),
             names="--max-length"),
        Case("vllm-lora-rank-5000-digits", VLLM, ["--vllm-url", "{url}/good", "--lora-rank", "9" * 5000], 4,
             codes=(2,), names="--lora-rank"),
        Case("vllm-fuzz-40-malformed-answers", VLLM,
             [a for i in range(FUZZ) for a in ("--vllm-url", f"{{url}}/fuzz-{i}")] + ["--json", "--deadline", "8"], 8,
             check=_every_fuzzed_server_reported),
        Case("vllm-empty-bodies", VLLM, ["--vllm-url", "{url}/empty"], 4, check=_finding("non-json")),
        Case("vllm-trl-metadata-fifo", VLLM, ["--vllm-url", "{url}/good"], 4, {"PYTHONPATH": "{tmp}/site"},
             setup=lambda d: _fifo(d / "site" / "trl-1.16.0.dist-info" / "METADATA")),
        Case("vllm-text-layout", VLLM, ["--vllm-url", "{url}/good", "--vllm-url", "{url}/logprobs-list",
             "--max-length", "99999", "--require"], 6, codes=(1,), check=_text_layout),
    ]  # fmt: skip
    return cases


# --------------------------------------------------------------------------------------------------------------
# The diagnostic: package metadata, files beside it, git metadata, build files, accelerate config, GPU tools, env
# --------------------------------------------------------------------------------------------------------------

DIAG = "diag"
SK_KEY = "sk-live-" + hashlib.sha256(b"sk").hexdigest()[:32]
GH_TOKEN = "ghp_" + hashlib.sha256(b"gh").hexdigest()[:36]
PLAIN_SECRET = "pv" + hashlib.sha256(b"plain").hexdigest()[:22]
SITE_ENV = {"PYTHONPATH": "{tmp}/site"}
WITH_PYYAML = {"PYTHONPATH": str(Path(yaml.__file__).resolve().parent.parent)}  # PyYAML expands aliases and tags


def _tool(name: str, body: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        write_tool(folder / "bin", name, body)

    return setup


def _then(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        for step in steps:
            step(folder)

    return setup


def _file(relative: str, content, mode: str = "text") -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content() if callable(content) else content
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    return setup


def _site(folder: Path) -> None:
    add_torch(folder / "site", cuda="12.8")
    add_dist(folder / "site", "accelerate", "1.15.0")
    add_dist(folder / "site", "deepspeed", "0.19.8")


def _site_trl(folder: Path) -> None:
    _site(folder)
    add_dist(folder / "site", "trl", "1.16.0")


def _fifo_at(relative: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / relative
        if path.exists():
            path.unlink()
        _fifo(path)

    return setup


def _symlink_loop(relative: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / relative
        if path.exists():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        other = path.with_name(path.name + ".loop")
        path.symlink_to(other)
        other.symlink_to(path)

    return setup


def _smi_output(text: bytes) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / "bin").mkdir(parents=True, exist_ok=True)
        (folder / "bin" / "out.bin").write_bytes(text)
        write_tool(folder / "bin", "nvidia-smi", f'exec {cat()} "{folder / "bin" / "out.bin"}"\n')

    return setup


def _rocm_output(text: bytes) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / "bin").mkdir(parents=True, exist_ok=True)
        (folder / "bin" / "rocm.json").write_bytes(text)
        write_tool(folder / "bin", "rocm-smi", f'exec {cat()} "{folder / "bin" / "rocm.json"}"\n')

    return setup


def _alias_bomb(levels: int = 9) -> str:
    lines = ["compute_environment: LOCAL_MACHINE", "distributed_type: MULTI_GPU", 'a0: &a0 ["x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join([*lines, f"gpu_ids: *a{levels - 1}"]) + "\n"


ACCEL = "home/.cache/huggingface/accelerate/default_config.yaml"
H100_ROW = "0, GPU-5c1e7c3a-0f5b-6a6e-8a6e-3b1c1d2e4f01, {name}, {total}, 4, 81004, 550.54.15, 9.0\n"


def _python_version_kept(result: Result) -> Optional[str]:
    import platform

    version = platform.python_version()
    if f"Python {version}" not in result.stdout:
        return f"'Python {version}' is not printed intact (a short value was scrubbed)"
    if "CACHE_KEY" in result.stdout and "3.11" not in result.stdout.split("CACHE_KEY", 1)[1][:10]:
        return "CACHE_KEY=3.11 was scrubbed"
    return None


def _contains(text: str) -> Callable[[Result], Optional[str]]:
    def check(result: Result) -> Optional[str]:
        flat = " ".join(result.stdout.split())
        return None if text in flat else f"{text!r} is not in the report"

    return check


def _diag_layout(result: Result) -> Optional[str]:
    problem = text_width_problem(result.stdout)
    lines = result.stdout.rstrip().splitlines()
    if problem:
        return problem
    if not lines[-1].startswith("Require ddp,qlora: "):
        return "the --require result is not the last line"
    counts = re.findall(r"\b\d+ (?:missing|outside|unknown)\b", result.stdout)
    return f"bare counts instead of named lists: {counts}" if counts else None


def _path_entry_skipped(result: Result) -> Optional[str]:
    if "PLANTED-SMI-RAN" in result.stdout + result.stderr:
        return "ran ./nvidia-smi from the working folder (an empty PATH entry)"
    return (
        None
        if "path_entry_skipped" in result.stdout or "PATH holds" in " ".join(result.stdout.split())
        else ("the skipped PATH entry is not reported")
    )


def _planted_smi(folder: Path) -> None:
    planted = folder / "nvidia-smi"  # in the working folder, which an empty PATH entry names
    planted.write_text("#!/bin/sh\necho PLANTED-SMI-RAN\n")
    planted.chmod(0o755)


def _accelerate_status(status: str) -> Callable[[Result], Optional[str]]:
    def check(result: Result) -> Optional[str]:
        problem = _strict_json(result)
        if problem:
            return problem
        found = json.loads(result.stdout)["launch"]["accelerate_config"]["status"]
        return None if found == status else f"accelerate config status {found!r}, expected {status!r}"

    return check


def _link_at(relative: str, target: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    return setup


def _long_versions(folder: Path) -> None:
    for name, version in (("trl", "1." + "9" * 5000), ("vllm", "0." + "9" * 5000)):
        add_dist(folder / "site", name, "1.0", metadata=f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _no_line_over(width: int) -> Callable[[Result], Optional[str]]:
    def check(result: Result) -> Optional[str]:
        if "9" * 200 in result.stdout.replace("\n", "").replace(" ", ""):
            return "a 5,000-digit version was printed whole"
        return text_width_problem(result.stdout, width)

    return check


def _odd_sys_root(folder: Path) -> None:
    net = folder / "root" / "sys" / "class" / "net" / "eth0"
    net.mkdir(parents=True)
    (net / "mtu").write_text("9000\u00b2\n")  # a superscript two: str.isdigit() says yes, int() says no
    (net / "operstate").write_text("up\n")
    (net / "type").write_text("1\n")
    ports = folder / "root" / "sys" / "class" / "infiniband" / "mlx5_0" / "ports"
    for port in range(1, 2001):
        (ports / str(port)).mkdir(parents=True)
        (ports / str(port) / "state").write_text("4: ACTIVE\n")


def _ports_capped(result: Result) -> Optional[str]:
    problem = _strict_json(result)
    if problem:
        return problem
    node = json.loads(result.stdout)["node"]
    ports = [p for d in node["infiniband"]["devices"] for p in d["ports"]]
    return None if len(ports) <= 64 else f"{len(ports)} InfiniBand ports listed (uncapped)"


def _empty_venv_python(folder: Path) -> None:
    python = folder / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")  # 0 bytes, not executable
    site = folder / ".venv" / "lib" / "python3.11" / "site-packages" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")


def diag_cases() -> List[Case]:
    return [
        Case("diag-metadata-fifo", DIAG, [], 8, SITE_ENV, _then(_site, _fifo_at("site/torch-2.13.0.dist-info/METADATA")),
             check=_contains("unreadable")),
        Case("diag-pkg-info-fifo", DIAG, [], 8, SITE_ENV,
             _then(_site, _fifo_at("site/flash_attn-2.8.0.egg-info/PKG-INFO"))),
        Case("diag-metadata-symlink-loop", DIAG, [], 8, SITE_ENV,
             _then(_site, _symlink_loop("site/torch-2.13.0.dist-info/METADATA"))),
        Case("diag-metadata-10mb-binary", DIAG, [], 8, SITE_ENV,
             _then(_site, _file("site/torch-2.13.0.dist-info/METADATA",
                                lambda: b"Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n\n" + b"\xff\0" * 5_000_000))),
        Case("diag-torch-version-fifo", DIAG, [], 8, SITE_ENV, _then(_site, _fifo_at("site/torch/version.py"))),
        Case("diag-torch-version-deep", DIAG, [], 8, SITE_ENV,
             _then(_site, _file("site/torch/version.py", "__version__ = " + "[" * 5000 + "]" * 5000 + "\n"))),
        Case("diag-git-head-fifo", DIAG, [], 8, SITE_ENV, _then(_site_trl, _fifo_at("site/.git/HEAD"))),
        Case("diag-git-ref-fifo", DIAG, [], 8, SITE_ENV,
             _then(_site_trl, _file("site/.git/HEAD", "ref: refs/heads/main\n"), _fifo_at("site/.git/refs/heads/main"))),
        Case("diag-git-ref-nul", DIAG, [], 8, SITE_ENV, _then(_site_trl, _file("site/.git/HEAD", "ref: refs/heads/ma\0in\n"))),
        Case("diag-cuda-home-fifo", DIAG, [], 8, {**SITE_ENV, "CUDA_HOME": "{tmp}/cuda"},
             _then(_site, _fifo_at("cuda/version.json"))),
        Case("diag-cuda-version-json-wrong-types", DIAG, ["--json"], 8, {**SITE_ENV, "CUDA_HOME": "{tmp}/cuda"},
             _then(_site, _file("cuda/version.json", '{"cuda": ["12.8"], "x": ' + "[" * 3000 + "]" * 3000 + "}")),
             check=_strict_json),
        Case("diag-direct-url-deep", DIAG, [], 8, SITE_ENV,
             _then(_site, _file("site/torch-2.13.0.dist-info/direct_url.json", "[" * 100_000 + "]" * 100_000))),
        Case("diag-direct-url-wrong-types", DIAG, ["--json"], 8, SITE_ENV,
             _then(_site, _file("site/torch-2.13.0.dist-info/direct_url.json",
                                '{"dir_info": [1], "vcs_info": {"commit_id": {"a": 1}}, "url": 5}')),
             check=_strict_json),
        Case("diag-deepspeed-build-mixed-keys", DIAG, [], 8, SITE_ENV,
             _then(_site, _file("site/deepspeed/git_version_info_installed.py",
                                "installed_ops = {1: True, 'cpu_adam': True, None: True}\n"
                                "accelerator_name = ['cuda']\ntorch_info = {'version': [1]}\n"))),
        Case("diag-accelerate-config-alias-bomb", DIAG, [], 8, WITH_PYYAML,
             _file(ACCEL, _alias_bomb()), check=_contains("aliases")),
        Case("diag-accelerate-config-fifo", DIAG, ["--accelerate-config", "{tmp}/cfg.yaml"], 4, setup=_fifo_at("cfg.yaml"),
             codes=(2,), names="FIFO"),
        Case("diag-accelerate-config-dir", DIAG, ["--accelerate-config", "{tmp}"], 4, codes=(2,), names="directory"),
        Case("diag-accelerate-config-2mb", DIAG, [], 8, setup=_file(ACCEL, "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n" + "# padding\n" * 220_000),
             check=_contains("larger than")),
        Case("diag-accelerate-config-nan-and-wrong-types", DIAG, ["--json"], 8,
             setup=_file(ACCEL, "compute_environment: LOCAL_MACHINE\ndistributed_type: NO\nnum_processes: .nan\n"
                                "num_machines: [1]\ngpu_ids: {a: 1}\nmixed_precision: .inf\nfsdp_config: 5\n"),
             check=_strict_json),
        Case("diag-accelerate-config-binary-secret", DIAG, [], 8, WITH_PYYAML,
             setup=_file(ACCEL, "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                                f"main_process_ip: !!binary {base64.b64encode(TOKEN.encode()).decode()}\n"
                                f"gpu_ids: !!set {{{GH_TOKEN}: null}}\n"),
             secrets=[TOKEN, GH_TOKEN]),
        Case("diag-accelerate-config-control-chars", DIAG, [], 8,
             setup=_file(ACCEL, 'compute_environment: LOCAL_MACHINE\ndistributed_type: "MULTI_GPU\\e[2K\\rVerdict: OK"\n'),
             check=_one_verdict_line),
        Case("diag-nvidia-smi-dev-zero", DIAG, ["--timeout", "3"], 3, setup=_tool("nvidia-smi", f"exec {cat()} /dev/zero\n")),
        Case("diag-nvidia-smi-flood", DIAG, ["--timeout", "3"], 3,
             setup=_tool("nvidia-smi", "exec /usr/bin/yes '0, GPU-x, name, 1, 1, 1, 1, 9.0'\n")),
        Case("diag-nvidia-smi-hang", DIAG, ["--timeout", "1"], 3, setup=_tool("nvidia-smi", "exec /bin/sleep 30\n")),
        Case("diag-nvidia-smi-131k-field", DIAG, [], 8,
             setup=_smi_output(H100_ROW.format(name='"' + "N" * 131_100 + '"', total=81559).encode())),
        Case("diag-nvidia-smi-nul", DIAG, [], 8, setup=_smi_output(H100_ROW.format(name="H\0100", total=81559).encode())),
        Case("diag-nvidia-smi-inf-memory", DIAG, [], 8, setup=_smi_output(H100_ROW.format(name="H100", total="inf").encode())),
        Case("diag-nvidia-smi-control-chars", DIAG, [], 8,
             setup=_smi_output(H100_ROW.format(name="H100\x1b[2K\rVerdict: OK", total=81559).encode()),
             check=_one_verdict_line),
        Case("diag-nvidia-smi-error-with-key", DIAG, [], 8,
             setup=_tool("nvidia-smi", f"echo 'NVIDIA-SMI has failed: license server rejected key {SK_KEY} for this "
                                       f"host, contact your administrator for details' >&2\nexit 9\n"),
             secrets=[SK_KEY]),
        Case("diag-rocm-smi-deep", DIAG, [], 8, setup=_rocm_output(b'{"card0": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")),
        Case("diag-rocm-smi-huge-numbers", DIAG, ["--json"], 8,
             setup=_rocm_output(json.dumps({"card0": {"VRAM Total Memory (B)": "9" * 5000, "Card Series": "MI300X"},
                                            "card" + "9" * 5000: {"a": 1}}).encode()), check=_strict_json),
        Case("diag-visible-devices-5000-digits", DIAG, [], 8, {"CUDA_VISIBLE_DEVICES": "9" * 5000 + ",0"},
             _smi_output(H100_ROW.format(name="H100", total=81559).encode())),
        Case("diag-metadata-empty", DIAG, [], 8, SITE_ENV, _then(_site, _file("site/torch-2.13.0.dist-info/METADATA", ""))),
        Case("diag-nvidia-smi-empty-output", DIAG, [], 8, setup=_smi_output(b"")),
        Case("diag-nvidia-smi-slow-nonzero-exit", DIAG, ["--timeout", "3"], 3,
             setup=_tool("nvidia-smi", "/bin/sleep 0.5\necho 'NVIDIA-SMI has failed' >&2\nexit 3\n"),
             check=_contains("exit 3")),
        Case("diag-accelerate-config-empty", DIAG, [], 8, setup=_file(ACCEL, "")),
        Case("diag-accelerate-config-non-utf8", DIAG, [], 8, setup=_file(ACCEL, b"distributed_type: \xff\xfe\n")),
        Case("diag-timeout-inf", DIAG, ["--timeout", "inf"], 4, codes=(2,), names="--timeout"),
        Case("diag-env-secrets", DIAG, [], 8,
             {"NCCL_IB_HCA": GH_TOKEN, "NCCL_SOCKET_IFNAME": SK_KEY, "NCCL_DEBUG_SUBSYS": f"INIT,token={PLAIN_SECRET}",
              "NCCL_NET": f"x?token={PLAIN_SECRET}&y=1", "MASTER_ADDR": f"user:{PASSWORD}@10.0.0.1:29500",
              "HTTPS_PROXY": f"http://user:{PASSWORD}/x@y@proxy:3128", "HF_TOKEN": TOKEN,
              "CACHE_KEY": "3.11", "SSH_AUTH_SOCK": "/root"},
             secrets=[GH_TOKEN, SK_KEY, PLAIN_SECRET, PASSWORD, TOKEN], check=_python_version_kept),
        Case("diag-short-common-values-kept", DIAG, [], 8,
             {"CACHE_KEY": ".".join(platform.python_version_tuple()[:2]), "SSH_AUTH_SOCK": "/root",
              "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0"},
             check=_python_version_kept),
        Case("diag-probe-import-error-with-key", DIAG, ["--probe-imports=accelerate", "--timeout", "10"], 10, SITE_ENV,
             _then(_site, _file("site/accelerate/__init__.py",
                                f"raise ImportError('cannot load plugin: api key {SK_KEY} was rejected by the server')\n")),
             secrets=[SK_KEY]),
        Case("diag-text-layout", DIAG, ["--require", "ddp,qlora"], 8, SITE_ENV, _site, codes=(1,), check=_diag_layout),
        # issue 21, round 2
        Case("diag-key-auth-secrets-of-any-shape", DIAG, [], 8,
             {"VLLM_API_KEY": "JBSWY3DPEHPK3PXPQ7RZ2M4NW6", "NCCL_IB_AUTH_KEY": "84729103657482019376"},
             secrets=["JBSWY3DPEHPK3PXPQ7RZ2M4NW6", "84729103657482019376"]),
        Case("diag-accelerate-config-secret-across-a-wrap", DIAG, [], 8,
             setup=_file(ACCEL, "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                                f"main_process_ip: https://user:{PASSWORD * 4}@host.example\n"
                                f"{SK_KEY.replace('sk-live-', 'sk-proj-')}: 1\n"),
             secrets=[PASSWORD * 4, SK_KEY.replace("sk-live-", "sk-proj-")]),
        Case("diag-empty-path-entry", DIAG, [], 8, {"PATH": ":{tmp}/bin"},
             _planted_smi, check=_path_entry_skipped),
        Case("diag-accelerate-config-directory", DIAG, ["--json"], 8, setup=lambda d: (d / ACCEL).mkdir(parents=True),
             check=_accelerate_status("not_regular")),
        Case("diag-accelerate-config-fifo", DIAG, ["--json"], 8, setup=_fifo_at(ACCEL),
             check=_accelerate_status("not_regular")),
        Case("diag-accelerate-config-dev-zero", DIAG, ["--json"], 8, setup=_link_at(ACCEL, "/dev/zero"),
             check=_accelerate_status("not_regular")),
        Case("diag-accelerate-config-2mb", DIAG, ["--json"], 8,
             setup=_file(ACCEL, lambda: "distributed_type: MULTI_GPU\n" + "# pad\n" * 350_000),
             check=_accelerate_status("too_large")),
        Case("diag-version-5000-digits", DIAG, [], 8, SITE_ENV, _then(_site, _long_versions), codes=(0, 1),
             check=_no_line_over(100)),
        Case("diag-sys-mtu-non-ascii-digit-and-many-ib-ports", DIAG, ["--json"], 8,
             {"CHECK_OPTIONAL_BACKENDS_TEST_ROOT": "{tmp}/root"}, _odd_sys_root, codes=(0, 1), check=_ports_capped),
        Case("diag-interpreter-hint-empty-venv-python", DIAG, [], 8, setup=_empty_venv_python, codes=(0, 1),
             check=lambda r: ("./.venv/bin/python" in r.stdout and "an empty ./.venv/bin/python was suggested") or None),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------------------
# The planner: config.json, TRL YAML/JSON, Accelerate YAML, hardware JSON, command-line numbers
# --------------------------------------------------------------------------------------------------------------

PLAN = "plan"
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
}
HW = ["--gpus", "2", "--gpu-memory-gib", "80"]
COLOCATE_ACC = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_machines: 1\nnum_processes: 8\n"
COLOCATE_TRL = "use_vllm: true\nvllm_mode: colocate\nvllm_tensor_parallel_size: 3\n"


QWEN_MOE = {
    **LLAMA,
    "model_type": "qwen3_moe",
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 768,
}


def _model(**changes) -> str:
    return json.dumps({**LLAMA, **changes})


def _hardware(gpus) -> str:
    return json.dumps({"schema_version": 1, "accelerators": {"gpus": gpus}})


def _templates_quote(result: Result) -> Optional[str]:
    if "x; touch pwned" not in result.stdout:
        return "the model id is missing from the templates"
    if "'x; touch pwned'" not in result.stdout:
        return "the model id is pasted into the shell templates unquoted"
    return None


def _plan_layout(result: Result) -> Optional[str]:
    problem = text_width_problem(result.stdout)
    if problem:
        return problem
    lines = result.stdout.rstrip("\n").splitlines()
    if not lines[-1].startswith("Require fit: ") or not lines[-2].startswith("Verdict: "):
        return f"the verdict and --require result are not the last lines: {lines[-3:]}"
    return None


def plan_cases() -> List[Case]:
    model = ["--model-config", "{tmp}/config.json", *HW]
    return [
        Case("plan-model-config-fifo", PLAN, model, 4, setup=_fifo_at("config.json"), codes=(2,), names="FIFO"),
        Case("plan-model-config-dev-zero", PLAN, ["--model-config", "/dev/zero", *HW], 4, codes=(2,), names="/dev/zero"),
        Case("plan-model-config-directory", PLAN, ["--model-config", "{tmp}", *HW], 4, codes=(2,), names="directory"),
        Case("plan-trl-config-fifo", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "grpo", *HW], 4,
             setup=_fifo_at("trl.yaml"), codes=(2,), names="FIFO"),
        Case("plan-accelerate-config-fifo", PLAN, ["--lint-accelerate-config", "{tmp}/acc.yaml", *HW], 4,
             setup=_fifo_at("acc.yaml"), codes=(2,), names="FIFO"),
        Case("plan-hardware-json-fifo", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_fifo_at("hw.json"), codes=(2,), names="FIFO"),
        Case("plan-model-config-nan", PLAN, model, 4, setup=_file("config.json", _model(hidden_size=float("nan"))),
             codes=(2,), names="config.json"),
        Case("plan-model-config-infinity", PLAN, model, 4,
             setup=_file("config.json", _model(rope_theta=float("-inf"))), codes=(2,), names="config.json"),
        Case("plan-model-config-1e400", PLAN, model, 4,
             setup=_file("config.json", _model(vocab_size=1).replace('"vocab_size": 1', '"vocab_size": 1e400')),
             codes=(2,), names="config.json"),
        Case("plan-model-config-5000-digits", PLAN, model, 4,
             setup=_file("config.json", _model(vocab_size=1).replace('"vocab_size": 1', '"vocab_size": ' + "9" * 5000)),
             codes=(2,), names="config.json"),
        Case("plan-model-config-wrong-types", PLAN, model, 4,
             setup=_file("config.json", _model(num_hidden_layers=[32], hidden_size={"a": 1})), codes=(2,),
             names="config.json"),
        Case("plan-model-config-deep", PLAN, model, 4,
             setup=_file("config.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"), codes=(2,), names="config.json"),
        Case("plan-model-config-kv-heads-above-heads", PLAN, model, 4,
             setup=_file("config.json", _model(num_key_value_heads=64)), codes=(2,), names="num_key_value_heads"),
        Case("plan-model-config-binary", PLAN, model, 4, setup=_file("config.json", b"\x89PNG\r\n\x1a\n\0\0\xff" * 1000),
             codes=(2,), names="config.json"),
        Case("plan-trl-config-nan-and-zero", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "grpo", *HW],
             4, setup=_file("trl.yaml", "num_generations: 0\nbeta: .nan\n"), codes=(2,), names="trl.yaml"),
        Case("plan-trl-config-json-nan", PLAN, ["--lint-trl-config", "{tmp}/trl.json", "--trainer", "grpo", *HW],
             4, setup=_file("trl.json", '{"beta": NaN, "num_generations": 8}'), codes=(2,), names="trl.json"),
        Case("plan-trl-config-alias-bomb", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "grpo", *HW],
             6, WITH_PYYAML, _file("trl.yaml", _alias_bomb()), codes=(2,), names="trl.yaml"),
        Case("plan-trl-config-7mb", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "sft", *HW], 6,
             WITH_PYYAML, _file("trl.yaml", lambda: "".join(f"k{i}: {i}\n" for i in range(500_000))), codes=(2,),
             names="trl.yaml"),
        Case("plan-trl-config-300kb", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "sft", *HW], 6,
             WITH_PYYAML, _file("trl.yaml", lambda: "".join(f"k{i}: {i}\n" for i in range(30_000))), codes=(2,),
             names="trl.yaml"),
        Case("plan-colocate-num-processes-1e12", PLAN,
             ["--lint-accelerate-config", "{tmp}/acc.yaml", "--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "grpo",
              *HW], 4,
             setup=_then(_file("acc.yaml", COLOCATE_ACC.replace("num_processes: 8", "num_processes: 1000000000000")),
                         _file("trl.yaml", COLOCATE_TRL)), codes=(2,), names="num_processes"),
        Case("plan-colocate-num-processes-flag-1e12", PLAN,
             ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "grpo", "--num-processes", "1000000000000", *HW], 4,
             setup=_file("trl.yaml", COLOCATE_TRL), codes=(2,), names="--num-processes"),
        Case("plan-accelerate-distributed-type-unquoted-no", PLAN,
             ["--lint-accelerate-config", "{tmp}/acc.yaml", "--trainer", "sft", *HW], 4,
             setup=_file("acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: NO\nnum_processes: 1\n"),
             codes=(2,), names="distributed_type"),
        Case("plan-trl-config-control-chars", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "grpo", *HW],
             4, setup=_file("trl.yaml", 'use_vllm: true\nvllm_mode: "serv\\e[2K\\rVerdict: OK"\n'),
             check=lambda r: "a control character reached the output" if "\x1b" in r.stdout + r.stderr else None),
        Case("plan-hardware-json-nan", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_file("hw.json", _hardware([{"memory_total_mib": 1}]).replace("1}", "NaN}")), codes=(2,),
             names="hw.json"),
        Case("plan-hardware-json-huge-and-wrong-types", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_file("hw.json", _hardware([{"memory_total_mib": 10**30, "index": [1], "visible": True}])),
             codes=(2,), names="hw.json"),
        Case("plan-hardware-json-deep", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_file("hw.json", "[" * 100_000 + "]" * 100_000), codes=(2,), names="hw.json"),
        Case("plan-params-1e400", PLAN, ["--params", "1e400", *HW], 4, codes=(2,), names="--params"),
        Case("plan-params-nan", PLAN, ["--params", "nan", *HW], 4, codes=(2,), names="--params"),
        Case("plan-gpu-memory-1e300", PLAN, ["--params", "7B", "--gpus", "2", "--gpu-memory-gib", "1e300"], 4,
             codes=(2,), names="--gpu-memory-gib"),
        Case("plan-host-memory-nan", PLAN, ["--params", "7B", *HW, "--host-memory-gib", "nan"], 4, codes=(2,),
             names="--host-memory-gib"),
        Case("plan-host-memory-negative", PLAN, ["--params", "7B", *HW, "--host-memory-gib", "-64"], 4, codes=(2,),
             names="--host-memory-gib"),
        Case("plan-beta-nan", PLAN, ["--params", "7B", "--trainer", "grpo", *HW, "--beta", "nan"], 4, codes=(2,),
             names="--beta"),
        Case("plan-gpus-1e8", PLAN, ["--params", "7B", "--gpus", "100000000", "--gpu-memory-gib", "80"], 4,
             codes=(2,), names="--gpus"),
        Case("plan-seq-len-5000-digits", PLAN, ["--params", "7B", *HW, "--seq-len", "9" * 5000], 4, codes=(2,),
             names="--seq-len"),
        Case("plan-model-id-shell", PLAN, ["--params", "7B", "--trainer", "grpo", *HW, "--model-id", "x; touch pwned"],
             4, check=_templates_quote),
        Case("plan-model-id-control-chars", PLAN, ["--params", "7B", "--trainer", "grpo", *HW, "--model-id",
             "org/m\x1b[2K\rVerdict: OK"], 4, check=_one_verdict_line),
        Case("plan-model-config-empty", PLAN, model, 4, setup=_file("config.json", ""), codes=(2,), names="config.json"),
        Case("plan-model-config-non-utf8", PLAN, model, 4, setup=_file("config.json", b'{"model_type": "\xff\xfe"}'),
             codes=(2,), names="config.json"),
        Case("plan-trl-config-symlink-loop", PLAN, ["--lint-trl-config", "{tmp}/trl.yaml", "--trainer", "sft", *HW], 4,
             setup=_symlink_loop("trl.yaml"), codes=(2,), names="symbolic link loop"),
        Case("plan-accelerate-config-binary", PLAN, ["--lint-accelerate-config", "{tmp}/acc.yaml", "--trainer", "sft",
             *HW], 4, setup=_file("acc.yaml", b"\x00\x01\x02\xff" * 4096), codes=(2,), names="acc.yaml"),
        # issue 21, round 2: every field typed before use (planner.inputs tables), no traceback
        Case("plan-model-type-dict", PLAN, model, 4, setup=_file("config.json", _model(model_type={"a": 1})),
             codes=(2,), names="model_type"),
        Case("plan-model-type-list", PLAN, model, 4, setup=_file("config.json", _model(model_type=["llama"])),
             codes=(2,), names="model_type"),
        Case("plan-mlp-only-layers-dicts", PLAN, model, 4,
             setup=_file("config.json", json.dumps({**QWEN_MOE, "mlp_only_layers": [{"a": 1}]})), codes=(2,),
             names="mlp_only_layers"),
        Case("plan-mlp-only-layers-int", PLAN, model, 4,
             setup=_file("config.json", json.dumps({**QWEN_MOE, "mlp_only_layers": 3})), codes=(2,),
             names="mlp_only_layers"),
        Case("plan-params-400-digits", PLAN, ["--params", "9" * 400, *HW], 4, codes=(2,), names="--params"),
        Case("plan-hardware-schema-version-true", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_file("hw.json", _hardware([{"memory_total_mib": 81559}]).replace('"schema_version": 1',
                                                                                    '"schema_version": true')),
             codes=(2,), names="schema_version"),
        Case("plan-hardware-schema-version-float", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_file("hw.json", _hardware([{"memory_total_mib": 81559}]).replace('"schema_version": 1',
                                                                                    '"schema_version": 1.0')),
             codes=(2,), names="schema_version"),
        Case("plan-hardware-visible-string", PLAN, ["--params", "7B", "--hardware-json", "{tmp}/hw.json"], 4,
             setup=_file("hw.json", _hardware([{"memory_total_mib": 81559, "visible": "false"}])), codes=(2,),
             names="visible"),
        Case("plan-text-layout", PLAN, ["--params", "7B", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80",
             "--require-fit"], 4, check=_plan_layout),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------------------
# compare_nodes.py (the multi-node comparison): its report files are inputs too
# --------------------------------------------------------------------------------------------------------------

NODES = "nodes"


def _mini_report(hostname: Optional[str] = "n0", env: Optional[Dict[str, str]] = None, **extra) -> Dict:
    """The smallest report compare_nodes.py accepts (check_optional_backends.py --json, schema_version 1)."""
    node = {"nccl": {}, "network": {"status": "ok", "interfaces": [{"name": "eth0", "operstate": "up"}]},
            "infiniband": {}, "env": env or {}, "accelerate": {}}  # fmt: skip
    if hostname is not None:
        node["hostname"] = hostname
    report = {"tool": "check_optional_backends", "schema_version": 1, "node": node, "packages": {}, "python": {},
              "torch_build": {}, "accelerators": {}, "launch": {}, "findings": []}  # fmt: skip
    report.update(extra)
    return report


def _many_nodes(folder: Path) -> None:
    """10,000 reports (about 4 MB), each with a launch variable of its own: nodes x names was quadratic."""
    with open(folder / "all.json", "w") as out:
        for i in range(10_000):
            out.write(json.dumps(_mini_report(f"n{i}", {f"NCCL_X{i}": "1", "NCCL_SOCKET_IFNAME": "eth"})) + "\n")


def _many_interfaces(folder: Path) -> None:
    """20,000 interfaces against a 20,000-prefix NCCL_SOCKET_IFNAME that matches none: interfaces x prefixes."""
    interfaces = [{"name": f"veth{i}", "operstate": "up"} for i in range(20_000)]
    prefixes = ",".join(f"ib{i}" for i in range(20_000))
    for name in ("a", "b"):
        report = _mini_report(name, {"NCCL_SOCKET_IFNAME": prefixes})
        report["node"]["network"]["interfaces"] = interfaces
        (folder / f"{name}.json").write_text(json.dumps(report))


def _reports(**named: Dict) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        for name, report in named.items():
            (folder / f"{name}.json").write_text(report if isinstance(report, str) else json.dumps(report))

    return setup


NODE_SECRETS = ["JBSWY3DPEHPK3PXPQ7RZ2M4NW6", "84729103657482019376", "pw9" + hashlib.sha256(b"n").hexdigest()[:20]]


def _bounded_output(result: Result) -> Optional[str]:
    size = len(result.stdout)
    return None if size < 1_000_000 else f"{size:,} characters of output"


def _not_duplicates(result: Result) -> Optional[str]:
    return "two reports without a hostname called duplicates" if "duplicate_hostname" in result.stdout else None


def _pip_line_safe(result: Result) -> Optional[str]:
    pasted = [line for line in result.stdout.splitlines() if "pip install" in line and "rm -rf" in line]
    return "a report's version pasted into a pip line" if pasted else None


def nodes_cases() -> List[Case]:
    return [
        # issue 21, round 2
        Case("nodes-10000-nodes", NODES, ["{tmp}/all.json"], 12, setup=_many_nodes, codes=(0,)),
        Case("nodes-20000-interfaces-x-prefixes", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 8, setup=_many_interfaces,
             codes=(0,), check=_bounded_output),
        Case("nodes-infinity", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=json.dumps(_mini_report(x=1)).replace('"x": 1', '"x": Infinity'), b=_mini_report()),
             codes=(2,), names="a.json"),
        Case("nodes-1e400", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=json.dumps(_mini_report(x=1)).replace('"x": 1', '"x": 1e400'), b=_mini_report()),
             codes=(2,), names="a.json"),
        Case("nodes-5000-digits", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=json.dumps(_mini_report(x=1)).replace('"x": 1', '"x": ' + "9" * 5000),
                            b=_mini_report()), codes=(2,), names="a.json"),
        Case("nodes-28mb-of-empty-lists", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 6,
             setup=_reports(a="[]" * 14_000_000, b=_mini_report()), codes=(2,), names="a.json"),
        Case("nodes-300k-error-codes", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 8,
             setup=_reports(a=_mini_report(findings=[{"severity": "error", "code": f"e{i}"} for i in range(300_000)]),
                            b=_mini_report("n1")), codes=(0,), check=_bounded_output),
        Case("nodes-secrets-not-trusted-to-the-report", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=_mini_report("n0", {"NCCL_IB_AUTH_KEY": NODE_SECRETS[1], "VLLM_API_KEY": NODE_SECRETS[0],
                                                  "NCCL_DEBUG_FILE": f"/x?password={NODE_SECRETS[2]}"}),
                            b=_mini_report("n1", {"NCCL_IB_AUTH_KEY": "1", "NCCL_DEBUG_FILE": "/y"})),
             secrets=NODE_SECRETS),
        Case("nodes-no-hostnames", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=_mini_report(None), b=_mini_report(None)), codes=(0,), check=_not_duplicates),
        Case("nodes-version-in-pip-line", NODES, ["{tmp}/a.json", "{tmp}/b.json", "{tmp}/c.json"], 4,
             setup=_reports(**{k: _mini_report(k, packages={"torch": {"installed": True, "version": v}})
                               for k, v in (("a", '1"; rm -rf ~; "'), ("b", '1"; rm -rf ~; "'), ("c", "2.9.0"))}),
             codes=(0,), check=_pip_line_safe),
        Case("nodes-control-chars-in-path", NODES, ["{tmp}/a\x1b[2Kb.json", "{tmp}/b.json"], 4,
             codes=(2,), check=lambda r: "a control character reached the output" if "\x1b" in r.stderr else None),

        Case("nodes-report-fifo", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_then(_fifo_at("a.json"), _fifo_at("b.json")), codes=(2,), names="a.json"),
        Case("nodes-report-dev-zero", NODES, ["/dev/zero", "/dev/zero"], 4, codes=(2,), names="/dev/zero"),
        Case("nodes-report-deep-and-nan", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_then(_file("a.json", "[" * 100_000 + "]" * 100_000), _file("b.json", '{"schema_version": NaN}')),
             codes=(2,)),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------------------
# Secrets by value (issue 27, round 3): every form of tests/hostile_helpers.secret_forms planted where each command
# reads it, and printed through --json and text. One subprocess per command and output form.
# --------------------------------------------------------------------------------------------------------------

FORMS = secret_forms("round-3")
FORM_TEXTS = [text for text, _ in FORMS]
FORM_SECRETS = planted(FORMS)


def _redacted_at_least(count: int, json_output: bool) -> Callable[[Result], Optional[str]]:
    """The forms reached the output (else the case proves nothing), and --json output parses."""

    def check(result: Result) -> Optional[str]:
        problem = _strict_json(result) if json_output else None
        if problem:
            return problem
        shown = (result.stdout + result.stderr).count("<redacted>")
        return None if shown >= count else f"only {shown} '<redacted>' in the output: the planted forms were not shown"

    return check


def _secret_models(handler, route: str) -> None:
    models = [{"id": text, "object": "model", "root": text, "max_model_len": 4096} for text in FORM_TEXTS]
    overrides = {"/v1/models": {"object": "list", "data": models}, "/version": {"version": FORM_TEXTS[1]}}
    serve_vllm_like(overrides)(handler, route)


BEHAVIOURS["secret-models"] = _secret_models


def _secret_log(folder: Path) -> None:
    lines = ["[rank0]: Error executing job with overrides: []", '[rank0]:   File "train.py", line 3, in <module>']
    lines.append(f"[rank0]: subprocess.CalledProcessError: {FORM_TEXTS[5]}")
    lines += [f"[rank{i % 4}]: RuntimeError: step {i} failed: {text}" for i, text in enumerate(FORM_TEXTS)]
    (folder / "train.log").write_text("\n".join(lines) + "\n")


def _secret_reports(folder: Path) -> None:
    """Two reports: every form as a launch variable and a torch version, a JWT inside each hostname."""
    jwt = FORM_TEXTS[11].split("-", 1)[1]
    a = _mini_report(f"gpu-{jwt}.cluster", {f"NCCL_F{i}": text for i, text in enumerate(FORM_TEXTS)},
                     packages={"torch": {"installed": True, "version": FORM_TEXTS[0]}})  # fmt: skip
    b = _mini_report(f"node7{jwt}", {f"NCCL_F{i}": "1" for i in range(len(FORM_TEXTS))},
                     packages={"torch": {"installed": True, "version": "2.9.0"}})  # fmt: skip
    (folder / "a.json").write_text(json.dumps(a))
    (folder / "b.json").write_text(json.dumps(b))


def _secret_install_report(form: str) -> Callable[[Path], None]:
    report = {"tool": "check_optional_backends", "schema_version": 1,
              "packages": {"trl": {"installed": True, "version": "0.19.0"}},
              "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
              "interpreter": {"suggested_python": f"/opt/{form}/bin/python"}}  # fmt: skip
    return _file("report.json", json.dumps(report))


def _secret_trl_config(bad: Optional[str] = None) -> Callable[[Path], None]:
    config: Dict[str, object] = {"per_device_train_batch_size": 2}
    if bad is not None:
        config["gradient_checkpointing"] = bad
    return _file("trl.json", json.dumps(config))


PLAN_FLAGS = ["--params", "7B", "--gpus", "8", "--gpu-memory-gib", "80", "--lint-trl-config", "{tmp}/trl.json"]


def secret_cases() -> List[Case]:
    env = {f"NCCL_F{i}": text for i, text in enumerate(FORM_TEXTS)}
    many = len(FORM_TEXTS)
    two = ["{tmp}/a.json", "{tmp}/b.json"]
    return [
        Case("secrets-diag-json", DIAG, ["--json"], 8, env, secrets=FORM_SECRETS, check=_redacted_at_least(many, True)),
        Case("secrets-diag-text", DIAG, [], 8, env, secrets=FORM_SECRETS, check=_redacted_at_least(many, False)),
        Case("secrets-vllm-json", VLLM, ["--vllm-url", "{url}/secret-models", "--json"], 6, secrets=FORM_SECRETS,
             check=_redacted_at_least(many, True)),
        Case("secrets-vllm-text", VLLM, ["--vllm-url", "{url}/secret-models"], 6, secrets=FORM_SECRETS,
             check=_redacted_at_least(2, False)),
        Case("secrets-nodes-json", NODES, [*two, "--json"], 4, setup=_secret_reports, secrets=FORM_SECRETS,
             check=_redacted_at_least(many, True)),
        Case("secrets-nodes-text", NODES, two, 4, setup=_secret_reports, secrets=FORM_SECRETS,
             check=_redacted_at_least(many, False)),
        Case("secrets-triage-json", "triage", ["{tmp}/train.log", "--json"], 6, setup=_secret_log,
             secrets=FORM_SECRETS, codes=(0,), check=_redacted_at_least(8, True)),
        Case("secrets-triage-text", "triage", ["{tmp}/train.log", "--verbose"], 6, setup=_secret_log,
             secrets=FORM_SECRETS, codes=(0,), check=_redacted_at_least(8, False)),
        # a suggested pip line quotes the report's interpreter: the value is scrubbed before it is quoted
        Case("secrets-install-json", "install", ["--report", "{tmp}/report.json", "--want", "ddp", "--json"], 6,
             setup=_secret_install_report(FORM_TEXTS[5]), secrets=FORMS[5][1], check=_redacted_at_least(1, True)),
        Case("secrets-install-text", "install", ["--report", "{tmp}/report.json", "--want", "ddp"], 6,
             setup=_secret_install_report(FORM_TEXTS[4]), secrets=FORMS[4][1], check=_redacted_at_least(1, False)),
        # a model id goes into the command templates: scrubbed before it is quoted
        Case("secrets-plan-json", PLAN, [*PLAN_FLAGS, "--model-id", FORM_TEXTS[5], "--json"], 6,
             setup=_secret_trl_config(), secrets=FORMS[5][1], check=_redacted_at_least(1, True)),
        Case("secrets-plan-text", PLAN, [*PLAN_FLAGS, "--model-id", FORM_TEXTS[2]], 6, setup=_secret_trl_config(),
             secrets=FORMS[2][1], check=_redacted_at_least(1, False)),
        # a bad value in the TRL config is quoted in the error (JSON and stderr)
        Case("secrets-plan-error-json", PLAN, [*PLAN_FLAGS, "--json"], 6, codes=(2,),
             setup=_secret_trl_config(" ".join(FORM_TEXTS[2:5])), secrets=planted(FORMS[2:5]),
             check=_redacted_at_least(2, True)),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------------------
# The run: every case once, four at a time
# --------------------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------------------
# The scan (issue 21): every parser path of the four commands on 10^5- and 10^6-deep YAML and JSON, with and
# without PyYAML. The measurement runs before any parser recurses, so no run ends by a signal, and each says which
# limit refused the document: the nesting limit, or the size limit where the document is over the size cap first.
# --------------------------------------------------------------------------------------------------------------

DEEP_LIMITS = ("nests deeper than 64 levels", "too large", "larger than")


def _deep(kind: str, depth: int) -> str:
    if kind == "json":
        return '{"a": ' + "[" * depth + "]" * depth + "}"
    if kind == "flow-yaml":
        return "a: " + "[" * depth + "]" * depth + "\n"
    return "a:\n  " + "- " * depth + "x\n"  # block sequences, one per "- "


def _names_a_limit(result: Result) -> Optional[str]:
    flat = " ".join((result.stdout + " " + result.stderr).split())
    if result.returncode is None or result.returncode < 0:
        return f"ended by signal {-(result.returncode or 0)}"
    return None if any(limit in flat for limit in DEEP_LIMITS) else f"no named limit in: {flat[-200:]!r}"


def _vllm_deep(depth: int):
    body = ("[" * depth + "]" * depth).encode()
    return _raw(b'{"object": "list", "data": ' + body + b"}", "/v1/models")


for _depth in (10**5, 10**6):
    BEHAVIOURS[f"deep-{_depth}"] = _vllm_deep(_depth)


def deep_cases() -> List[Case]:
    cases = []
    for depth in (10**5, 10**6):
        tag = f"1e{len(str(depth)) - 1}"
        for kind in ("json", "flow-yaml", "block-yaml"):
            name = "doc.json" if kind == "json" else "doc.yaml"
            setup = _file(name, _deep(kind, depth))
            for yaml_env, with_tag in (({}, "builtin"), (WITH_PYYAML, "pyyaml")):
                paths = [
                    ("plan-trl", PLAN, ["--lint-trl-config", f"{{tmp}}/{name}", "--trainer", "grpo", *HW], (2,)),
                    ("plan-accelerate", PLAN, ["--lint-accelerate-config", f"{{tmp}}/{name}", *HW], (2,)),
                    # The diagnostic reports the config's status and goes on (exit 0 or 1); the limit is named.
                    ("diag-accelerate", DIAG, ["--accelerate-config", f"{{tmp}}/{name}"], (0, 1)),
                ]
                if kind == "json":
                    paths += [
                        ("plan-model", PLAN, ["--model-config", f"{{tmp}}/{name}", *HW], (2,)),
                        ("plan-hardware", PLAN, ["--params", "7B", "--hardware-json", f"{{tmp}}/{name}"], (2,)),
                        ("nodes", NODES, [f"{{tmp}}/{name}", f"{{tmp}}/{name}"], (2,)),
                    ]
                for label, script, args, codes in paths:
                    if (
                        kind == "json"
                        and with_tag == "pyyaml"
                        and label.startswith(("plan-model", "plan-hard", "nodes"))
                    ):
                        continue  # JSON-only paths never use PyYAML
                    cases.append(
                        Case(
                            f"deep-{tag}-{kind}-{label}-{with_tag}",
                            script,
                            args,
                            10,
                            dict(yaml_env),
                            setup,
                            codes=codes,
                            check=_names_a_limit,
                        )
                    )
        cases.append(
            Case(
                f"deep-{tag}-vllm-body",
                VLLM,
                ["--vllm-url", f"{{url}}/deep-{depth}"],
                8,
                codes=(0, 1),
                check=_names_a_limit,
            )
        )
    return cases


# --------------------------------------------------------------------------------------------------------------
# Round 3 (issue 27): absurd versions, config fields that divide by zero, loose schema versions, and file names
# that hold a line break
# --------------------------------------------------------------------------------------------------------------

INSTALL, TRIAGE = "install", "triage"
FORGED = "x\nVerdict: all clear\r"  # a file name that would print a verdict line of its own


def _no_forged_line(result: Result) -> Optional[str]:
    lines = (result.stdout + "\n" + result.stderr).splitlines()
    forged = [line for line in lines if line.startswith("Verdict: all clear")]
    if forged:
        return f"a file name started a line of its own: {forged[0]!r}"
    shown = "Verdict: all" in result.stdout + result.stderr  # a long path may be wrapped after "all"
    return (
        "the file name is not shown escaped"
        if shown and "x\\nVerdict: all" not in result.stdout + result.stderr
        else None
    )


def _install_report(**versions: str) -> str:
    packages = {name: {"installed": True, "version": version} for name, version in versions.items()}
    return json.dumps({"tool": "check_optional_backends", "schema_version": 1, "python": {"version": "3.12.3", "executable": "/e/python"},
                       "packages": packages})  # fmt: skip


def round3_cases() -> List[Case]:
    digits = "9" * 5000
    model = ["--model-config", "{tmp}/config.json", *HW]
    acc = "distributed_type: MULTI_GPU\nnum_processes: 2\n"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    return [
        # 1: a 5,000-digit version anywhere a version is read
        Case("install-keep-5000-digits", INSTALL, ["--want", "ddp", "--keep", f"trl=={digits}"], 6, codes=(2,),
             names="--keep"),
        Case("install-keep-specifier-5000-digits", INSTALL, ["--want", "ddp", "--keep", f"torch>=2.{digits}"], 6,
             codes=(2,), names="--keep"),
        Case("install-report-5000-digit-version", INSTALL, ["--want", "ddp", "--report", "{tmp}/r.json"], 6,
             setup=_file("r.json", _install_report(trl="1." + digits, torch="9" * 20 + ".0")), codes=(0,)),
        # 2: a head width of 0 (more heads than hidden_size, no head_dim)
        Case("plan-heads-above-hidden-size", PLAN, model, 4,
             setup=_file("config.json", _model(num_attention_heads=8192)), codes=(2,), names="num_attention_heads"),
        Case("plan-moe-heads-above-hidden-size", PLAN, model, 4,
             setup=_file("config.json", json.dumps({**QWEN_MOE, "hidden_size": 16, "num_key_value_heads": 8})),
             codes=(2,), names="num_attention_heads"),
        # 5: schema_version true and 1.0 equal 1 in Python, and are not the integer 1
        Case("nodes-schema-version-true", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=_mini_report("n0", schema_version=True), b=_mini_report("n1")), codes=(2,),
             names="schema_version"),
        Case("nodes-schema-version-float", NODES, ["{tmp}/a.json", "{tmp}/b.json"], 4,
             setup=_reports(a=_mini_report("n0", schema_version=1.0), b=_mini_report("n1")), codes=(2,),
             names="schema_version"),
        # 8: a line break in a file name never starts a line of the output
        Case("triage-newline-in-log-name", TRIAGE, [f"{{tmp}}/{FORGED}.log"], 6, setup=_file(f"{FORGED}.log", oom),
             codes=(0,), check=_no_forged_line),
        Case("triage-newline-in-missing-log-name", TRIAGE, [f"{{tmp}}/{FORGED}.log"], 6, codes=(2,),
             check=_no_forged_line),
        Case("plan-newline-in-model-config-name", PLAN, ["--model-config", f"{{tmp}}/{FORGED}.json", *HW], 6,
             setup=_file(f"{FORGED}.json", _model()), codes=(0,), check=_no_forged_line),
        Case("plan-newline-in-bad-model-config-name", PLAN, ["--model-config", f"{{tmp}}/{FORGED}.json", *HW], 6,
             setup=_file(f"{FORGED}.json", _model(num_attention_heads=8192)), codes=(2,), check=_no_forged_line),
        Case("plan-newline-in-trl-config-name", PLAN, ["--params", "1B", "--lint-trl-config", f"{{tmp}}/{FORGED}.yaml",
             *HW], 6, setup=_file(f"{FORGED}.yaml", "per_device_train_batch_size: 2\n"), codes=(0, 1),
             check=_no_forged_line),
        Case("plan-newline-in-accelerate-config-name", PLAN, ["--params", "1B", "--lint-accelerate-config",
             f"{{tmp}}/{FORGED}.yaml", "--trainer", "sft", *HW], 6, setup=_file(f"{FORGED}.yaml", acc),
             codes=(0, 1), check=_no_forged_line),
        Case("install-newline-in-report-name", INSTALL, ["--want", "ddp", "--report", f"{{tmp}}/{FORGED}.json"], 6,
             setup=_file(f"{FORGED}.json", _install_report(trl="1.16.0")), codes=(0,), check=_no_forged_line),
        Case("nodes-newline-in-report-name", NODES, [f"{{tmp}}/{FORGED}.json", "{tmp}/b.json"], 6,
             setup=_reports(**{FORGED: _mini_report("n0"), "b": _mini_report("n1")}), codes=(0, 1),
             check=_no_forged_line),
        Case("diag-newline-in-accelerate-config-name", DIAG, ["--accelerate-config", f"{{tmp}}/{FORGED}.yaml"], 8,
             setup=_file(f"{FORGED}.yaml", acc), codes=(0, 1), check=_no_forged_line),
    ]  # fmt: skip


def all_cases(silent_url: str) -> List[Case]:
    return (
        vllm_cases(silent_url)
        + diag_cases()
        + plan_cases()
        + nodes_cases()
        + deep_cases()
        + round3_cases()
        + secret_cases()
    )


# Every case is judged against its own wall-clock limit and the fixture already runs four at a time: under
# pytest-xdist the module runs with the suite's other worker paused (tests/conftest.py).
pytestmark = pytest.mark.serial

_SILENT = silent_listener()
CASES = all_cases(_SILENT[1])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Dict[str, Result]:
    root = tmp_path_factory.mktemp("hostile")
    with HostileServer() as server:
        server.behaviours.update(BEHAVIOURS)
        try:
            yield run_all(CASES, Path(root), server.url)
        finally:
            _SILENT[0].close()


def _param(case: Case):
    marks = [pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_hostile_input_never_wins(case: Case, results: Dict[str, Result]) -> None:
    result = results[case.id]
    found = problems(result)
    assert not found, f"{case.id}: " + "; ".join(found) + f"\nstderr tail: {result.stderr[-400:]!r}"

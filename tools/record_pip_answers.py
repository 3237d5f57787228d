#!/usr/bin/env python3
"""Record pip's own answer for the planner's cases: ``tests/fixtures/pip_answers/<case>.json``.

    python3 tools/record_pip_answers.py              # every case (network; minutes per case, a few at a time)
    python3 tools/record_pip_answers.py CASE [CASE]  # only these
    python3 tools/record_pip_answers.py --missing    # only cases without a fixture

For each case (an installed set, goals and constraints) the planner (``scripts/plan_install.py``'s stages, in
process) proposes its first option; pip then resolves the whole set, WITH dependencies, against the registry:
``pip install --dry-run --ignore-installed --report`` with every package of the option pinned (``--python-version``
and ``--only-binary=:all:`` for the case's Python; DeepSpeed ships only an sdist, so a set with DeepSpeed resolves
for this interpreter with ``--prefer-binary``). For an impossible case pip is asked for the goal under the
constraints alone (TRL with the goal's extras, the kept releases as pins). pip reads wheel metadata from the
registry's metadata files where they exist, so no large wheel is downloaded; the log's download lines are counted
and recorded. ``pip --isolated`` keeps this machine's find-links and constraint files out of the answer.
The tests (tests/test_stack_pip_answers.py) replay the cases without network.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

TOOLS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
sys.path.insert(0, str(SKILL_DIR / "scripts"))

from stack import judge  # noqa: E402
from stack.inputs import PlanRequest, parse_keeps  # noqa: E402
from stack.matrix import load  # noqa: E402

OUT = REPO_ROOT / "tests" / "fixtures" / "pip_answers"
TIMEOUT = 900
PIP_PYTHON = os.environ.get("RECORD_PIP_PYTHON", sys.executable)  # an interpreter whose pip does the resolving
CACHE_DIR = os.path.join(tempfile.gettempdir(), "record-pip-answers-cache")
WORKERS = 4
ENVS: Dict[str, Dict[str, Any]] = {
    "trl116": {
        "python": "3.12.3",
        "installed": {
            "trl": "1.16.0",
            "transformers": "5.24.0",
            "torch": "2.14.0",
            "accelerate": "1.15.0",
            "datasets": "4.8.0",
            "huggingface-hub": "1.33.0",
        },
    },
    "trl116-vllm033": {
        "python": "3.12.3",
        "installed": {
            "trl": "1.16.0",
            "transformers": "5.24.0",
            "torch": "2.14.0",
            "accelerate": "1.15.0",
            "vllm": "0.33.0",
            "datasets": "4.8.0",
            "huggingface-hub": "1.33.0",
        },
    },
    "trl116-py311": {
        "python": "3.11.7",
        "installed": {
            "trl": "1.16.0",
            "transformers": "5.24.0",
            "torch": "2.14.0",
            "accelerate": "1.15.0",
            "datasets": "4.8.0",
            "huggingface-hub": "1.33.0",
        },
    },
    "trl114": {
        "python": "3.11.7",
        "installed": {
            "trl": "1.14.2",
            "transformers": "5.10.4",
            "torch": "2.11.0",
            "accelerate": "1.13.0",
            "vllm": "0.26.0",
            "datasets": "4.8.0",
            "huggingface-hub": "1.28.0",
        },
    },
    "trl110": {
        "python": "3.11.7",
        "installed": {
            "trl": "1.10.0",
            "transformers": "5.6.2",
            "torch": "2.10.0",
            "accelerate": "1.12.0",
            "datasets": "4.7.0",
            "huggingface-hub": "1.5.0",
        },
    },
    "trl18": {
        "python": "3.11.9",
        "installed": {
            "trl": "1.8.0",
            "transformers": "5.10.4",
            "torch": "2.10.0",
            "accelerate": "1.12.0",
            "vllm": "0.19.1",
            "datasets": "4.7.0",
            "huggingface-hub": "1.5.0",
        },
    },
    "trl10": {
        "python": "3.10.12",
        "installed": {
            "trl": "1.0.0",
            "transformers": "4.56.2",
            "torch": "2.8.0",
            "accelerate": "1.10.1",
            "datasets": "4.7.0",
            "huggingface-hub": "0.35.0",
        },
    },
    "trl0251": {
        "python": "3.11.7",
        "installed": {
            "trl": "0.25.1",
            "transformers": "4.57.1",
            "torch": "2.8.0",
            "accelerate": "1.10.1",
            "datasets": "4.0.0",
            "huggingface-hub": "0.35.0",
        },
    },
    "fresh": {"python": "3.12.3", "installed": {}},
}
# id: (environment, goals, keeps, --python, --cuda)
CASES: Dict[str, tuple] = {
    "vllm-keep-transformers-524": ("trl116-vllm033", ["vllm-server"], ["transformers==5.24.0"], None, None),
    "vllm-trainer-image-0271": ("trl116", ["vllm-server"], ["vllm==0.27.1"], None, None),
    "vllm-server-image-0310": ("trl116", ["vllm-server"], ["vllm==0.31.0"], None, None),
    "vllm-colocate-trl116": ("trl116", ["vllm-colocate"], [], None, None),
    "vllm-keep-0330-and-trl": ("trl116-vllm033", ["vllm-server"], ["vllm==0.33.0", "trl"], None, None),
    "peft-keep-peft-0120": ("trl116", ["peft"], ["peft==0.12.0", "trl"], None, None),
    "liger-keep-liger-080": ("trl116", ["liger"], ["liger-kernel==0.8.0", "trl"], None, None),
    "async-grpo-trl18-vllm0191": ("trl18", ["async-grpo"], ["trl==1.8.0"], None, None),
    "async-grpo-lora-trl116": ("trl116", ["async-grpo-lora"], [], None, None),
    "hub-kernels-keep-transformers-524": ("trl116", ["hub-kernels"], ["transformers==5.24.0"], None, None),
    "hub-kernels-trl116": ("trl116", ["hub-kernels"], [], None, None),
    "hub-kernels-keep-transformers-5202": ("trl116", ["hub-kernels"], ["transformers==5.20.2"], None, None),
    "qlora-fsdp2-trl10": ("trl10", ["qlora", "fsdp2"], [], None, None),
    "qlora-trl116": ("trl116", ["qlora"], [], None, None),
    "qlora-keep-bitsandbytes-0430": ("trl116", ["qlora"], ["bitsandbytes==0.43.0", "trl"], None, None),
    "peft-trl116": ("trl116", ["peft"], [], None, None),
    "peft-trl18": ("trl18", ["peft"], [], None, None),
    "deepspeed-trl116": ("trl116-py311", ["deepspeed"], [], None, None),
    "liger-trl116": ("trl116", ["liger"], [], None, None),
    "context-parallel-trl10": ("trl10", ["context-parallel"], [], None, None),
    "vllm-server-trl110-cuda12": ("trl110", ["vllm-server"], ["trl"], None, "12"),
    "vllm-server-trl114": ("trl114", ["vllm-server"], [], None, None),
    "vllm-server-trl10": ("trl10", ["vllm-server"], ["trl"], None, None),
    "vllm-server-trl0251": ("trl0251", ["vllm-server"], ["trl"], None, None),
    "vllm-colocate-python-310": ("trl116", ["vllm-colocate"], [], "3.10", None),
    "trl116-python-39": ("fresh", ["vllm-server"], ["trl==1.16.0"], "3.9", None),
    "ddp-fresh": ("fresh", ["ddp"], [], None, None),
    "vllm-peft-fresh": ("fresh", ["vllm-server", "peft"], ["transformers==5.24.0"], None, None),
}


def planner_answer(case: str) -> Dict[str, Any]:
    env_name, wants, keeps, python, cuda = CASES[case]
    env = ENVS[env_name]
    matrix = load()
    request = PlanRequest(
        tuple(wants),
        parse_keeps(keeps, matrix.names()),
        python or env["python"],
        python is not None,
        cuda,
        dict(env["installed"]),
        "python3",
        "fixture",
        True,
        1,
    )
    return judge.plan(request, matrix)


def pip_request(case: str, answer: Dict[str, Any]) -> List[str]:
    """The requirement words pip is asked to resolve for ``case``."""
    env_name, wants, keeps, _, _ = CASES[case]
    extras = sorted({e for w in wants for e in judge.combined([w]).trl_extras})
    trl_name = f"trl[{','.join(extras)}]" if extras else "trl"
    if answer["options"]:
        chosen = answer["options"][0]["set"]
        words = [f"{trl_name}=={chosen['trl']}"] + [f"{n}=={v}" for n, v in chosen.items() if n != "trl"]
        return words
    installed = ENVS[env_name]["installed"]
    words = []
    parsed = parse_keeps(keeps, load().names())
    specs = {k.name: (k.spec or f"=={installed[k.name]}") for k in parsed}
    words.append(trl_name + specs.pop("trl", ""))
    words += [f"{n}{s}" for n, s in specs.items()]
    return words


def pip_argv(case: str, words: Sequence[str], report: str, target: str) -> List[str]:
    env_name, _, _, python, _ = CASES[case]
    version = ".".join((python or ENVS[env_name]["python"]).split(".")[:2])
    argv = [PIP_PYTHON, "-m", "pip", "--isolated", "--disable-pip-version-check", "--timeout", "60"]
    if os.environ.get("PIP_CERT"):
        argv += ["--cert", os.environ["PIP_CERT"]]
    argv += ["--cache-dir", CACHE_DIR]  # shared between cases: the same metadata is fetched once
    argv += ["install", "--dry-run", "--ignore-installed", "--report", report]
    if any(w.startswith("deepspeed") for w in words):
        argv += ["--prefer-binary"]  # an sdist-only package: resolved for this interpreter
    else:
        argv += ["--only-binary=:all:", "--python-version", version, "--target", target]
    return argv + list(words)


def _pip_version() -> str:
    done = subprocess.run([PIP_PYTHON, "-m", "pip", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.split()[1] if done.stdout.split()[1:] else "?"


PIP_VERSION = _pip_version()
_DOWNLOAD_RE = re.compile(r"Downloading \S+ \(([\d.]+) (kB|MB|GB)\)")


def record(case: str) -> Dict[str, Any]:
    answer = planner_answer(case)
    words = pip_request(case, answer)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        argv = pip_argv(case, words, report, os.path.join(tmp, "target"))
        started = datetime.datetime.now()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
            returncode, log = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            returncode, log = None, str(expired.stdout or "") + str(expired.stderr or "")
        seconds = (datetime.datetime.now() - started).total_seconds()
        resolved = {}
        if returncode == 0 and os.path.exists(report):
            with open(report, encoding="utf-8") as handle:
                for item in json.load(handle)["install"]:
                    resolved[item["metadata"]["name"].lower().replace("_", "-")] = item["metadata"]["version"]
    megabytes = 0.0
    for size, unit in _DOWNLOAD_RE.findall(log):
        megabytes += float(size) * {"kB": 0.001, "MB": 1.0, "GB": 1000.0}[unit]
    env_name, wants, keeps, python, cuda = CASES[case]
    stack = ("trl", "vllm", "transformers", "torch", "accelerate", "peft", "deepspeed", "bitsandbytes", "kernels")
    stack += ("liger-kernel", "datasets", "huggingface-hub")
    return {
        "case": case,
        "recorded": datetime.date.today().isoformat(),
        "environment": {"python": ENVS[env_name]["python"], "installed": ENVS[env_name]["installed"]},
        "want": wants,
        "keep": keeps,
        "python": python,
        "cuda": cuda,
        "planner": {
            "status": answer["status"],
            "set": answer["options"][0]["set"] if answer["options"] else None,
            "pip": answer["options"][0]["pip"] if answer["options"] else None,
            "drop": answer["drop"],
        },
        "pip": {
            "request": list(words),
            "command": "pip install --dry-run --ignore-installed --report - "
            + " ".join(a for a in argv[argv.index("install") + 1 :] if not a.startswith(tempfile.gettempdir()))
            .replace("--report ", "", 1)
            .replace("--target ", "", 1),
            "returncode": returncode,
            "pip_version": PIP_VERSION,
            "resolution_impossible": "ResolutionImpossible" in log,
            "no_matching_distribution": "No matching distribution" in log,
            "resolved": {n: v for n, v in sorted(resolved.items()) if n in stack},
            "packages": len(resolved),
            "downloaded_mb": round(megabytes, 1),
            "seconds": round(seconds),
            "error": [line for line in log.splitlines() if line.startswith("ERROR")][-3:],
        },
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    missing_only = "--missing" in args
    cases = [a for a in args if a != "--missing"] or list(CASES)
    if missing_only:
        cases = [c for c in cases if not (OUT / f"{c}.json").exists()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(record_group, group) for group in groups(cases)]
        for future in concurrent.futures.as_completed(futures):
            future.result()
    return 0


def groups(cases: Sequence[str]) -> List[List[str]]:
    """Cases that resolve the same torch wheel run one after another, so the shared cache serves the later ones
    (a full resolve downloads the wheels: there is no metadata file for them on this index)."""
    keyed: Dict[str, List[str]] = {}
    for case in cases:
        answer = planner_answer(case)
        words = pip_request(case, answer)
        env_name, _, _, python, _ = CASES[case]
        torch = next((w for w in words if w.startswith("torch")), "torch?")
        version = ".".join((python or ENVS[env_name]["python"]).split(".")[:2])
        keyed.setdefault(f"{version} {torch}", []).append(case)
    return sorted(keyed.values(), key=len, reverse=True)


def record_group(cases: Sequence[str]) -> None:
    for case in cases:
        result = record(case)
        (OUT / f"{case}.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pip = result["pip"]
        print(
            f"{case}: planner {result['planner']['status']}, pip rc={pip['returncode']} in {pip['seconds']} s, "
            f"{pip['downloaded_mb']} MB downloaded",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark ``scripts/check_optional_backends.py`` against ``trl env`` and ``accelerate env``.

Run it with the interpreter of an environment that has torch, trl and accelerate installed (the README describes
the reference environment: CPU torch 2.13.0, trl 1.16.0, accelerate 1.15.0, peft 0.21.2, deepspeed 0.19.8,
bitsandbytes 0.50.2)::

    python3 tools/benchmark_diagnostic.py --python <venv>/bin/python --runs 7

It times each command end to end (process start to exit, warm page cache, one warm-up run first), prints the
medians and ratios as a Markdown table, and checks that the diagnostic's ``--json`` report holds every fact that
``trl env`` prints. Nothing is installed or written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
SCRIPT = SKILL_DIR / "scripts" / "check_optional_backends.py"

TARGET_DEFAULT_SECONDS = 0.15
TARGET_RATIO = 15.0
TARGET_PROBE_OVERHEAD = 0.5


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter of the environment to measure")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7), after one warm-up")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON instead of Markdown")
    return parser


def time_command(argv: Sequence[str], env: Dict[str, str], runs: int) -> Dict[str, object]:
    """Median, min and max wall seconds of ``runs`` runs (after one warm-up), and the last exit code."""
    subprocess.run(argv, env=env, capture_output=True, check=False)
    samples: List[float] = []
    code = 0
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        samples.append(time.perf_counter() - start)
        code = done.returncode
    return {
        "command": " ".join(argv),
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "runs": runs,
        "exit": code,
    }


def machine() -> str:
    """CPU model, cores, memory and OS of this machine."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal"):
                memory = f", {int(line.split()[1]) / 1048576:.1f} GiB RAM"
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.release()}"


def parse_trl_env(text: str) -> Dict[str, str]:
    """``- Key: value`` lines of ``trl env`` (the accelerate config may span several indented lines)."""
    facts: Dict[str, str] = {}
    key: Optional[str] = None
    for line in text.splitlines():
        if line.startswith("- ") and ":" in line:
            key, _, value = line[2:].partition(":")
            key = key.strip()
            facts[key] = value.strip()
        elif key and line.startswith("  "):
            facts[key] = (facts[key] + "\n" + line.strip()).strip()
    return facts


def coverage(trl_facts: Dict[str, str], report: dict) -> List[Tuple[str, str, str, bool]]:
    """(fact, trl env value, our value, covered) for every fact trl env prints."""
    packages = report["packages"]

    def version(pid: str) -> str:
        entry = packages[pid]
        return entry["version"] if entry["installed"] and entry["version"] else "not installed"

    def trl_version() -> str:
        entry = packages["trl"]
        commit = entry.get("git_commit")
        return f"{entry['version']}+{commit[:7]}" if commit else entry["version"]

    visible = [g["name"] for g in report["accelerators"]["gpus"] if g.get("visible")]
    config = report["launch"]["accelerate_config"]
    ours = {
        "Platform": report["platform"]["platform"],
        "Python version": report["python"]["version"],
        "TRL version": trl_version(),
        "PyTorch version": packages["torch"]["version"],
        "accelerator(s)": ", ".join(visible) if visible else "cpu",
        "Transformers version": version("transformers"),
        "Accelerate version": version("accelerate"),
        "Accelerate config": "not found" if config["status"] == "not_found" else json.dumps(config["settings"]),
        "Datasets version": version("datasets"),
        "HF Hub version": version("huggingface-hub"),
        "bitsandbytes version": version("bitsandbytes"),
        "DeepSpeed version": version("deepspeed"),
        "Liger-Kernel version": version("liger-kernel"),
        "PEFT version": version("peft"),
        "vLLM version": version("vllm"),
    }
    rows = []
    for fact, value in trl_facts.items():
        mine = ours.get(fact)
        if fact == "Accelerate config" and value != "not found":
            covered = config["status"] != "not_found"
        else:
            covered = mine == value
        rows.append((fact, value.replace("\n", " "), mine if mine is not None else "(missing)", covered))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    python = str(Path(args.python).absolute())
    bin_dir = str(Path(python).parent)
    env = dict(os.environ)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    trl = os.path.join(bin_dir, "trl")
    accelerate = os.path.join(bin_dir, "accelerate")
    commands = {
        "check_optional_backends.py (default)": [python, str(SCRIPT)],
        "trl env": [trl, "env"],
        "accelerate env": [accelerate, "env"],
        "check_optional_backends.py --probe-torch": [python, str(SCRIPT), "--probe-torch"],
        'python -c "import torch"': [python, "-c", "import torch"],
    }
    results = {name: time_command(argv_, env, args.runs) for name, argv_ in commands.items()}
    ours = results["check_optional_backends.py (default)"]["median"]
    trl_env = results["trl env"]["median"]
    probe = results["check_optional_backends.py --probe-torch"]["median"]
    import_torch = results['python -c "import torch"']["median"]
    trl_text = subprocess.run([trl, "env"], env=env, capture_output=True, text=True, check=False).stdout
    report = json.loads(
        subprocess.run([python, str(SCRIPT), "--json"], env=env, capture_output=True, text=True, check=False).stdout
    )
    rows = coverage(parse_trl_env(trl_text), report)
    targets = {
        f"default run median < {TARGET_DEFAULT_SECONDS} s": ours < TARGET_DEFAULT_SECONDS,
        f"default run >= {TARGET_RATIO:g}x faster than trl env": trl_env / ours >= TARGET_RATIO,
        f"--probe-torch <= import torch + {TARGET_PROBE_OVERHEAD} s": probe <= import_torch + TARGET_PROBE_OVERHEAD,
        "report holds every fact trl env prints": all(row[3] for row in rows),
    }
    if args.json:
        print(json.dumps({"machine": machine(), "results": results, "coverage": rows, "targets": targets}, indent=2))
        return 0
    env_python = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()
    print(f"Machine: {machine()}; Python {env_python}; {args.runs} timed runs per command after one warm-up.\n")
    print("| command | median (s) | min (s) | max (s) | vs default run |")
    print("|---|---|---|---|---|")
    for name, result in results.items():
        ratio = result["median"] / ours
        print(f"| `{name}` | {result['median']:.3f} | {result['min']:.3f} | {result['max']:.3f} | {ratio:.1f}x |")
    print(f"\n`--probe-torch` minus `import torch`: {probe - import_torch:+.3f} s\n")
    print("| fact printed by `trl env` | trl env | check_optional_backends.py --json | same |")
    print("|---|---|---|---|")
    for fact, value, mine, covered in rows:
        print(f"| {fact} | {value} | {mine} | {'yes' if covered else 'NO'} |")
    print()
    for target, met in targets.items():
        print(f"- {target}: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

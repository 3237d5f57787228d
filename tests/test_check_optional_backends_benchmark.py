"""tools/benchmark_diagnostic.py: the fact-coverage check against `trl env` output (no timing here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from diagnostic_helpers import REPO_ROOT, add_dist, add_stack, run_script

spec = importlib.util.spec_from_file_location("benchmark_diagnostic", REPO_ROOT / "tools" / "benchmark_diagnostic.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# The shape `trl env` prints (trl-1.16.0 trl/scripts/env.py), filled in for the fake environment below.
TRL_ENV = """
Copy-paste the following information when reporting an issue:

- Platform: {platform}
- Python version: {python}
- TRL version: 1.16.0
- PyTorch version: 2.13.0+cpu
- accelerator(s): cpu
- Transformers version: 5.24.0
- Accelerate version: 1.15.0
- Accelerate config: not found
- Datasets version: 5.2.0
- HF Hub version: 2.4.0
- bitsandbytes version: not installed
- DeepSpeed version: 0.19.8
- Liger-Kernel version: not installed
- PEFT version: 0.21.2
- vLLM version: not installed
"""


def test_report_covers_every_fact_trl_env_prints(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    add_dist(site, "deepspeed", "0.19.8")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    text = TRL_ENV.format(platform=report["platform"]["platform"], python=report["python"]["version"])
    facts = bench.parse_trl_env(text)
    assert len(facts) == 15
    rows = bench.coverage(facts, report)
    assert [row[0] for row in rows if not row[3]] == []
    facts["DeepSpeed version"] = "0.18.0"
    assert [row[0] for row in bench.coverage(facts, report) if not row[3]] == ["DeepSpeed version"]


def test_parse_trl_env_keeps_a_multi_line_accelerate_config() -> None:
    facts = bench.parse_trl_env(
        "- Accelerate config: \n  - compute_environment: LOCAL_MACHINE\n- PEFT version: 0.21.2\n"
    )
    assert facts["Accelerate config"] == "- compute_environment: LOCAL_MACHINE"
    assert facts["PEFT version"] == "0.21.2"
    assert bench.build_parser().parse_args(["--python", "x"]).runs == 7

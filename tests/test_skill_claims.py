"""Every upstream name in the skill text must exist in the pinned releases (``tests/facts/upstream_facts.json``).

The checker lives in ``tools/claims/``; ``python3 tools/skill_claims.py`` prints the same failures. The fixture
tests below prove it has teeth: invented flags, fields, env vars, routes, keys and messages fail with the file,
line, identifier and the nearest real names; real ones pass. Its parts have their own tests (``test_claims_*.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import skill_claims as sc  # noqa: E402

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "claims"
ALLOWLIST = REPO_ROOT / "tests" / "claims_allowlist.txt"


def _check(path: Path, allowlist: Optional[Path] = None) -> Tuple[List[sc.Failure], sc.Checker]:
    return sc.check_paths([path], root=FIXTURES, allowlist_path=allowlist)


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


# ---- the skill text itself -----------------------------------------------------------------------------------------


def test_skill_text_names_only_real_upstream_identifiers():
    files = sc.skill_files(sc.SKILL_DIR)
    assert files, "no skill files found"
    failures, checker = sc.check_paths(files, root=sc.SKILL_DIR, allowlist_path=ALLOWLIST)
    problems = [f.format() for f in failures] + checker.allowlist.problems
    problems += [f"{ALLOWLIST.name}: unused entry {name!r} (remove it)" for name in checker.allowlist.unused()]
    assert not problems, "\n" + "\n".join(problems)


def test_allowlist_entries_carry_reasons():
    allowlist = sc.Allowlist.load(ALLOWLIST)
    assert not allowlist.problems
    assert all(reason.strip() for reason in allowlist.entries.values())


# ---- fixtures: real claims pass, invented ones fail ----------------------------------------------------------------


def test_real_claims_fixture_passes_and_is_really_checked():
    failures, checker = _check(FIXTURES / "good.md")
    assert [f.format() for f in failures] == []
    kinds = {kind for _, _, kind, _ in checker.claims}
    assert {
        "flag",
        "env",
        "route",
        "identifier",
        "class",
        "field",
        "kwarg",
        "import",
        "module",
        "yaml-key",
        "deepspeed-key",
        "message",
    } <= kinds
    checked = {identifier for _, _, _, identifier in checker.claims}
    # Flags after the user's own script, and console output lines, are not claims.
    assert "--my-own-flag" not in checked and "--anything" not in checked and "--is-not-checked" not in checked
    # The container command of ``hf jobs run`` is checked as a command of its own.
    line = _line_of(FIXTURES / "good.md", "hf jobs run --flavor")
    assert ("good.md", line, "flag", "--enable-lora") in checker.claims


BAD = FIXTURES / "bad.md"
EXPECTED_FAILURES = [
    # (text on the line, kind, identifier, one of the nearest names, where)
    ("--max-lora-ranks 64", "flag", "--max-lora-ranks", "--max-lora-rank", "vllm serve@vllm 0.31.0"),
    ("--gpu-memory-utilisation", "flag", "--gpu-memory-utilisation", "--gpu-memory-utilization", "trl vllm-serve"),
    ("--per_device_batch_size", "flag", "--per_device_batch_size", "--per_device_train_batch_size", "trl sft"),
    ("trl finetune", "command", "trl finetune", "trl sft", "trl subcommands"),
    ("--num_procs", "flag", "--num_procs", "--num_processes", "accelerate launch@accelerate 1.16.0"),
    ("--flavour", "flag", "--flavour", "--flavor", "hf jobs run@huggingface_hub 2.4.0"),
    ("VLLM_SERVER_DEV_MODES=1", "env", "VLLM_SERVER_DEV_MODES", "VLLM_SERVER_DEV_MODE", "env vars"),
    ("VLLM_SERVER_DEV_MOD=1", "env", "VLLM_SERVER_DEV_MOD", "VLLM_SERVER_DEV_MODE", "env vars"),
    ("check_imaginary.py", "script", "scripts/check_imaginary.py", "scripts/check_demo.py", "scripts/"),
    ("--no-such-flag", "flag", "--no-such-flag", "--help", "scripts/check_demo.py"),
    ("--enable-scale-out", "flag", "--enable-scale-out", "--enable-sleep-mode", "vllm serve@vllm 0.27.1"),
    ("check: vllm==0.26.0", "marker", "vllm==0.26.0", "vllm==0.31.0", "facts file"),
    ("GRPOConfig, LoraConfig", "import", "trl.LoraConfig", None, "names in trl@trl 1.16.0"),
    ("AsyncGRPOConfigs", "import", "trl.experimental.async_grpo.AsyncGRPOConfigs", "AsyncGRPOConfig", "trl"),
    ("vllm_gpu_util=0.3", "kwarg", "GRPOConfig(vllm_gpu_util=...)", "vllm_gpu_memory_utilization", "trl 1.16.0"),
    ("lora_alfa", "kwarg", "LoraConfig(lora_alfa=...)", "lora_alpha", "peft 0.21.2"),
    (
        "fsdp_sharding_stratgy",
        "yaml-key",
        "fsdp_config.fsdp_sharding_stratgy",
        "fsdp_config.fsdp_sharding_strategy",
        "accelerate 1.16.0",
    ),
    ("learning_rate_schedule", "yaml-key", "learning_rate_schedule", "learning_rate", "trl 1.16.0"),
    ("offload_optimiser", "deepspeed-key", "zero_optimization.offload_optimiser", "offload_optimizer", "deepspeed"),
    ("vllm_gpu_util_ratio", "identifier", "vllm_gpu_util_ratio", "vllm_gpu_memory_utilization", "primary pins"),
    (
        "VLLM_ALLOW_RUNTIME_LORA_UPDATES",
        "env",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATES",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING",
        "env vars",
    ),
    ("/v1/load_lora_adapters", "route", "/v1/load_lora_adapters", "/v1/load_lora_adapter", "vllm 0.31.0"),
    ("`AsyncGRPOTrainerConfig`", "class", "AsyncGRPOTrainerConfig", "AsyncGRPOTrainer", "upstream classes"),
    ("GRPOConfig.vllm_gpu_util`", "field", "GRPOConfig.vllm_gpu_util", "vllm_gpu_memory_utilization", "GRPOConfig"),
    ("`--max-lora-ranks`", "flag", "--max-lora-ranks", "--max-lora-rank", "any covered CLI"),
    ("`--sleep-mode-backend`", "flag", "--sleep-mode-backend", None, "any covered CLI@primary pins"),
    ("v1/modelz", "route", "/v1/modelz", "/v1/models", "vLLM HTTP routes@vllm 0.31.0"),
    ("`packinng=True`", "identifier", "packinng", "packing", "config fields"),
    ("`fsdp_versoin: 2`", "identifier", "fsdp_versoin", "fsdp_version", "config fields"),
    (
        "must multiply world size",
        "message",
        "tensor_parallel_size (3) must multiply world size (8) evenly.",
        "tensor_parallel_size ({}) must divide world size ({}) evenly.",
        "raised/logged messages",
    ),
    ("NCCL watchdog ate", "quote-citation", "The NCCL watchdog ate the process group", None, "a citation"),
    ("moon is full", "message", "vLLM exploded because the moon is full.", None, "raised/logged messages"),
]


@pytest.fixture(scope="module")
def bad_failures() -> List[sc.Failure]:
    failures, _ = _check(BAD)
    return failures


@pytest.mark.parametrize(
    ("needle", "kind", "identifier", "near", "where"), EXPECTED_FAILURES, ids=[e[2] for e in EXPECTED_FAILURES]
)
def test_invented_claim_fails_with_file_line_identifier_and_nearest(
    bad_failures, needle, kind, identifier, near, where
):
    line = _line_of(BAD, needle)
    matches = [f for f in bad_failures if f.line == line and f.kind == kind and f.identifier == identifier]
    assert matches, f"no [{kind}] failure for {identifier!r} on bad.md:{line}; got:\n" + "\n".join(
        f.format() for f in bad_failures
    )
    failure = matches[0]
    assert failure.path == "bad.md"
    assert where in failure.where
    if near is not None:
        assert near in failure.nearest, failure.format()
    text = failure.format()
    assert text.startswith(f"bad.md:{line}: [{kind}] {identifier!r} not found in ")


def test_bad_fixture_has_no_unexpected_failures(bad_failures):
    expected = {(_line_of(BAD, needle), kind, identifier) for needle, kind, identifier, _, _ in EXPECTED_FAILURES}
    unexpected = [f.format() for f in bad_failures if (f.line, f.kind, f.identifier) not in expected]
    # The unparsable Python block is reported once, at its first line.
    unexpected = [u for u in unexpected if "[python-syntax]" not in u]
    assert unexpected == []
    assert any(f.kind == "python-syntax" for f in bad_failures)


def test_flags_after_the_users_script_are_not_claims(bad_failures):
    assert not [f for f in bad_failures if f.identifier == "--my-own-flag"]
    # The container command inside ``hf jobs run`` is valid: only --flavour and the -e variable fail on that line.
    line = _line_of(BAD, "--flavour")
    assert sorted(f.identifier for f in bad_failures if f.line == line) == ["--flavour", "VLLM_SERVER_DEV_MODES"]


def test_failure_line_format():
    failure = sc.Failure(
        "a/SKILL.md", 12, "flag", "--max-lora-ranks", "vllm serve@vllm 0.31.0", ("--max-lora-rank", "--max-loras")
    )
    assert failure.format() == (
        "a/SKILL.md:12: [flag] '--max-lora-ranks' not found in vllm serve@vllm 0.31.0; "
        "nearest: --max-lora-rank, --max-loras"
    )


def test_cli_prints_failures_and_exits_nonzero(tmp_path):
    command = [
        sys.executable,
        str(TOOLS_DIR / "skill_claims.py"),
        "--root",
        str(FIXTURES),
        "--allowlist",
        str(tmp_path / "none.txt"),
    ]
    bad = subprocess.run([*command, str(BAD)], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert re.search(
        r"^bad\.md:\d+: \[flag\] '--max-lora-ranks' not found in vllm serve@vllm 0\.31\.0; "
        r"nearest: --max-lora-rank",
        bad.stdout,
        re.M,
    )
    good = subprocess.run([*command, str(FIXTURES / "good.md")], capture_output=True, text=True, check=False)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout == ""


# ---- allow-list ----------------------------------------------------------------------------------------------------


def test_allowlist_suppresses_a_named_claim_and_reports_bad_or_unused_entries(tmp_path):
    allowlist = tmp_path / "allow.txt"
    allowlist.write_text(
        "# comment\n"
        "/v1/load_lora_adapters # deliberately wrong in the fixture\n"
        "--never-used-flag # stale entry\n"
        "NO_REASON_HERE\n",
        encoding="utf-8",
    )
    failures, checker = _check(BAD, allowlist)
    assert not [f for f in failures if f.identifier == "/v1/load_lora_adapters"]
    assert checker.allowlist.unused() == ["--never-used-flag"]
    assert len(checker.allowlist.problems) == 1 and "NO_REASON_HERE" in checker.allowlist.problems[0]

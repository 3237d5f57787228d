"""scripts/planner/rules.py: every lint rule has a failing and a passing fixture under tests/fixtures/lint/."""

from __future__ import annotations

import json
from pathlib import Path

import plan_training as pt
import pytest
from planner import inputs as plan_inputs
from planner import rules as plan_rules

from conftest import REPO_ROOT

LINT_DIR = REPO_ROOT / "tests" / "fixtures" / "lint"


def case_argv(case_dir: Path) -> list:
    argv = list(json.loads((case_dir / "case.json").read_text())["args"])
    if (case_dir / "accelerate.yaml").is_file():
        argv += ["--lint-accelerate-config", str(case_dir / "accelerate.yaml")]
    for name in ("trl.yaml", "trl.json"):
        if (case_dir / name).is_file():
            argv += ["--lint-trl-config", str(case_dir / name)]
    return argv


def lint(capsys, argv: list) -> tuple:
    code = pt.main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    return code, data["lint"]["findings"]


def test_every_rule_has_a_failing_and_a_passing_fixture():
    for rule_id in plan_rules.RULES:
        assert (LINT_DIR / rule_id / "fail" / "case.json").is_file(), rule_id
        assert (LINT_DIR / rule_id / "pass" / "case.json").is_file(), rule_id
    assert sorted(p.name for p in LINT_DIR.iterdir() if p.is_dir()) == sorted(plan_rules.RULES)


@pytest.mark.parametrize("rule_id", sorted(plan_rules.RULES))
def test_failing_fixture_reports_the_rule_with_fix_and_source(capsys, rule_id):
    code, findings = lint(capsys, case_argv(LINT_DIR / rule_id / "fail"))
    assert code == 0  # a report, not a --require failure
    hits = [f for f in findings if f["id"] == rule_id]
    assert hits, findings
    for finding in hits:
        assert finding["severity"] in ("error", "warning")
        assert finding["fix"] and finding["message"]
        assert "@" in finding["source"]  # upstream file@version


@pytest.mark.parametrize("rule_id", sorted(plan_rules.RULES))
def test_passing_fixture_does_not_report_the_rule(capsys, rule_id):
    _, findings = lint(capsys, case_argv(LINT_DIR / rule_id / "pass"))
    assert not [f for f in findings if f["id"] == rule_id], findings


def test_require_lint_clean_exits_1_on_an_error(capsys):
    argv = case_argv(LINT_DIR / "colocate-tp" / "fail")
    assert pt.main([*argv, "--require-lint-clean"]) == 1
    capsys.readouterr()
    assert pt.main([*case_argv(LINT_DIR / "colocate-tp" / "pass"), "--require-lint-clean"]) == 0


def test_fix_names_the_exact_settings(capsys):
    _, findings = lint(capsys, case_argv(LINT_DIR / "num-processes" / "fail"))
    assert "num_processes: 3" in next(f for f in findings if f["id"] == "num-processes")["fix"]
    _, findings = lint(capsys, case_argv(LINT_DIR / "colocate-tp" / "fail"))
    assert "[1, 2, 4, 8]" in next(f for f in findings if f["id"] == "colocate-tp")["fix"]
    _, findings = lint(capsys, case_argv(LINT_DIR / "generation-batch" / "fail"))
    fix = next(f for f in findings if f["id"] == "generation-batch")["fix"]
    assert "steps_per_generation: 2" in fix  # 3 x 4 = 12 per step; 24 is the first multiple of 8


def test_trl_cli_yaml_naming_a_preset_inherits_its_eight_processes(capsys, tmp_path):
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text("accelerate_config: zero3\nuse_vllm: true\nvllm_mode: server\n")
    _, findings = lint(
        capsys, ["--trainer", "grpo", "--gpus", "4", "--lint-trl-config", str(cfg), "--vllm-server-gpus", "1"]
    )
    finding = next(f for f in findings if f["id"] == "num-processes")
    assert "is 8" in finding["message"] and "num_processes: 3" in finding["fix"]
    # A --num_processes on the command line wins over the preset.
    _, findings = lint(
        capsys,
        [
            "--trainer",
            "grpo",
            "--gpus",
            "4",
            "--lint-trl-config",
            str(cfg),
            "--vllm-server-gpus",
            "1",
            "--num-processes",
            "3",
        ],
    )
    assert not [f for f in findings if f["id"] == "num-processes"]


def test_plan_reserves_server_gpus_for_the_num_processes_check(capsys):
    acc = LINT_DIR / "num-processes" / "fail" / "accelerate.yaml"  # num_processes: 8
    _, findings = lint(
        capsys,
        [
            "--params",
            "7B",
            "--trainer",
            "grpo",
            "--gpus",
            "4",
            "--gpu-memory-gib",
            "80",
            "--lint-accelerate-config",
            str(acc),
        ],
    )
    finding = next(f for f in findings if f["id"] == "num-processes")
    assert "1 reserved for the vLLM server (the plan's server split)" in finding["message"]


def test_single_gpu_preset_with_several_visible_gpus(capsys, tmp_path):
    cfg = tmp_path / "trl.yaml"
    cfg.write_text("accelerate_config: single_gpu\n")
    _, findings = lint(capsys, ["--trainer", "sft", "--gpus", "4", "--lint-trl-config", str(cfg)])
    finding = next(f for f in findings if f["id"] == "num-processes")
    assert "distributed_type NO" in finding["message"] and "CUDA_VISIBLE_DEVICES" in finding["fix"]


def test_to_dict_dump_with_default_server_fields_is_not_flagged(capsys, tmp_path):
    cfg = tmp_path / "grpo.json"
    cfg.write_text(
        json.dumps(
            {
                "use_vllm": True,
                "vllm_mode": "server",
                "vllm_gpu_memory_utilization": 0.3,
                "vllm_tensor_parallel_size": 1,
            }
        )
    )
    _, findings = lint(capsys, ["--trainer", "grpo", "--lint-trl-config", str(cfg)])
    assert not [f for f in findings if f["id"] == "server-mode-ignored"]


def test_not_an_accelerate_config_exits_2(capsys, tmp_path):
    cfg = tmp_path / "x.yaml"
    cfg.write_text("learning_rate: 1.0e-5\n")
    assert pt.main(["--lint-accelerate-config", str(cfg)]) == 2
    assert "not an Accelerate config" in capsys.readouterr().err


def test_unknown_preset_name_exits_2(capsys, tmp_path):
    cfg = tmp_path / "trl.yaml"
    cfg.write_text("accelerate_config: zero4\n")
    assert pt.main(["--lint-trl-config", str(cfg)]) == 2
    assert "not a TRL preset" in capsys.readouterr().err


def _without_trainer(argv: list) -> list:
    """The case's arguments with any --trainer removed, as a user who forgot it would type them."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        if item == "--trainer":
            skip = True
            continue
        if not item.startswith("--trainer="):
            out.append(item)
    return out


def test_grpo_rules_run_when_the_trainer_is_inferred_from_the_trl_config(capsys):
    """Forgetting --trainer must not silently skip the GRPO rules: the config's fields name the trainer."""
    argv = _without_trainer(case_argv(LINT_DIR / "generation-batch" / "fail"))
    _, findings = lint(capsys, argv)
    ids = [f["id"] for f in findings]
    assert "generation-batch" in ids
    note = next(f for f in findings if f["id"] == "trainer-inferred")
    assert note["severity"] == "info" and "grpo" in note["message"] and "num_generations" in note["message"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"max_staleness": 4, "per_device_train_batch_size": 2}, "async-grpo"),
        ({"num_generations": 8}, "grpo"),
        ({"learning_rate": 1e-5, "max_length": 1024}, None),
    ],
)
def test_trainer_inference_rules(config, expected):
    assert plan_inputs.infer_trainer(config)[0] == expected


def test_explicit_trainer_wins_and_adds_no_note(capsys, tmp_path):
    trl_yaml = tmp_path / "trl.yaml"
    trl_yaml.write_text("num_generations: 8\nper_device_train_batch_size: 4\n")
    _, findings = lint(capsys, ["--lint-trl-config", str(trl_yaml), "--num-processes", "3", "--trainer", "sft"])
    assert findings == []

"""plan_training.py end to end: the FSDP+QLoRA 70B case, GPU splits, templates, bad input, the script as a process.

Unit tests of the sibling modules mirror them: tests/test_plan_model.py, tests/test_plan_memory.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import plan_training as pt
import pytest
from planner import memory as plan_memory
from planner import model as plan_model

from conftest import REPO_ROOT, SCRIPTS_DIR

MODEL_DIR = REPO_ROOT / "tests" / "fixtures" / "model_configs"
SCRIPT = SCRIPTS_DIR / "plan_training.py"
GB = 2**30  # DeepSpeed's estimator prints bytes / 2**30 as "GB"


def run_json(capsys, *argv: str) -> tuple:
    code = pt.main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def fixture_facts(name: str) -> plan_model.ModelFacts:
    path = MODEL_DIR / name / "config.json"
    return plan_model.facts_from_config(json.loads(path.read_text()), str(path))


def test_planner_zero_candidates_use_the_deepspeed_formulas(capsys):
    path = MODEL_DIR / "llama-3.1-8b" / "config.json"
    code, data = run_json(capsys, "--model-config", str(path), "--gpus", "8", "--gpu-memory-gib", "80")
    assert code == 0
    by_strategy = {c["strategy"]: c for c in data["candidates"]}
    facts = fixture_facts("llama-3.1-8b")
    _, zero2 = plan_memory.ds_zero2_model_states(facts.total, 8, 1, False)
    _, zero3, _ = plan_memory.ds_zero3_model_states(facts.total, facts.largest_module, 8, 1, False, False)
    exact2 = sum(by_strategy["zero2"]["terms_gib"]["exact"].values())
    exact3 = sum(by_strategy["zero3"]["terms_gib"]["exact"].values())
    assert abs(exact2 - zero2 / GB) < 0.01
    assert abs(exact3 - zero3 / GB) < 0.01
    # DDP with TRL's float32 default: weights 4 + grads 4 + AdamW 8 + DDP buckets 4 bytes per parameter.
    assert abs(by_strategy["ddp"]["model_states_gib_exact"] - facts.total * 20 / GB) < 0.01


# ---------------------------------------------------------------------------------------------------------------
# FSDP + QLoRA, Llama-2-70B on 2 x 24 GB (huggingface/peft docs/source/accelerate/fsdp.md: 35.6 GB per GPU
# without CPU offload, 19.6 GB with it; r=8 all-linear, seq 2048, batch 2, nested quant, bf16 quant storage)
# ---------------------------------------------------------------------------------------------------------------

PEFT_NO_OFFLOAD_GB = 35.6
PEFT_OFFLOAD_GB = 19.6


def test_fsdp_qlora_70b_on_two_24gb_gpus_needs_offload(capsys):
    code, data = run_json(
        capsys,
        "--model-config",
        str(MODEL_DIR / "llama-2-70b" / "config.json"),
        "--method",
        "qlora",
        "--lora-rank",
        "8",
        "--seq-len",
        "2048",
        "--micro-batch",
        "2",
        "--bnb-double-quant",
        "--gpus",
        "2",
        "--gpu-memory-gib",
        "24",
        "--trainer",
        "sft",
        "--require-fit",
    )
    # Fits only with a change (CPU offload): a gate that asked for a fit does not pass (exit 3, not 0).
    assert code == 3 and data["exit_code"] == 3 and data["fits"] is False
    assert data["verdict"]["state"] == "fits-with-change" and "offload" in data["verdict"]["change"]
    by_strategy = {c["strategy"]: c for c in data["candidates"]}
    no_offload = by_strategy["fsdp2"]
    offload = by_strategy["fsdp2-offload"]
    assert no_offload["fits"] is False and offload["fits"] is True
    assert abs(no_offload["per_gpu_gib"] - PEFT_NO_OFFLOAD_GB) / PEFT_NO_OFFLOAD_GB <= 0.20
    assert offload["per_gpu_gib"] <= PEFT_OFFLOAD_GB
    # Offload is the last resort: not the answer as asked, but the first smallest change that fits.
    assert data["recommendation"] is None
    first_fit = next(c for c in data["smallest_changes"] if c["fits"])
    assert first_fit["step"] == "offload" and first_fit["candidate"]["strategy"] == "fsdp2-offload"
    # The 4-bit base is sharded: about half of 69B x 0.516 bytes per GPU before activations.
    assert 16.0 < no_offload["model_states_gib_exact"] < 18.5
    assert offload["host_ram_per_node_gib"] > 30
    assert any("fsdp_offload_params: true" in c["note"] for c in data["commands"])


def test_qlora_fsdp_with_uint8_storage_replicates_the_base(capsys):
    args = [
        "--model-config",
        str(MODEL_DIR / "llama-2-70b" / "config.json"),
        "--method",
        "qlora",
        "--gpus",
        "2",
        "--gpu-memory-gib",
        "24",
    ]
    _, bf16 = run_json(capsys, *args)
    _, uint8 = run_json(capsys, *args, "--bnb-quant-storage", "uint8")
    states = {c["strategy"]: c["model_states_gib_exact"] for c in bf16["candidates"]}
    states_u8 = {c["strategy"]: c["model_states_gib_exact"] for c in uint8["candidates"]}
    assert states_u8["fsdp2"] > 1.8 * states["fsdp2"]


# ---------------------------------------------------------------------------------------------------------------
# GRPO splits and launch templates
# ---------------------------------------------------------------------------------------------------------------


def _devices(mask: str) -> set:
    return {int(x) for x in mask.split(",") if x}


@pytest.mark.parametrize("extra", [[], ["--vllm-tp", "2"], ["--method", "lora"]])
def test_grpo_server_plan_on_8_gpus_uses_disjoint_devices(capsys, extra):
    code, data = run_json(
        capsys,
        "--params",
        "7B",
        "--trainer",
        "grpo",
        "--gpus",
        "8",
        "--gpu-memory-gib",
        "80",
        "--vllm-mode",
        "server",
        "--model-id",
        "Qwen/Qwen2.5-7B",
        *extra,
    )
    assert code == 0
    split = data["split"]
    server = _devices(split["server_cuda_visible_devices"])
    trainer = _devices(split["trainer_cuda_visible_devices"][0])
    assert server and trainer and not server & trainer
    assert server | trainer <= set(range(8))
    assert split["num_processes"] == len(trainer) == 8 - len(server)
    assert data["vllm"]["tensor_parallel_size"] == len(server)
    serve = next(c["command"] for c in data["commands"] if c["role"].startswith("vLLM server"))
    assert serve.startswith(f"CUDA_VISIBLE_DEVICES={split['server_cuda_visible_devices']} VLLM_SERVER_DEV_MODE=1 ")
    assert f"--tensor-parallel-size {len(server)} " in serve
    for flag in (
        '--weight-transfer-config \'{"backend": "nccl"}\'',
        "--logprobs-mode processed_logprobs",
        "--max-logprobs -1",
        "--max-model-len 1024",  # TRL 1.16 GRPO default: an assumed 512-token prompt + max_completion_length 512
    ):
        assert flag in serve
    trainer_cmds = [c["command"] for c in data["commands"] if c["role"].startswith("trainer")]
    assert trainer_cmds
    for cmd in trainer_cmds:
        assert f"--num_processes {len(trainer)} " in cmd
        assert cmd.startswith(f"CUDA_VISIBLE_DEVICES={split['trainer_cuda_visible_devices'][0]} ")
    batch = data["batch"]
    assert batch["generation_batch_size"] == 8 * len(trainer)
    assert batch["divisible"] is (batch["generation_batch_size"] % 8 == 0)


def test_multi_node_server_split_keeps_equal_processes_per_node(capsys):
    code, data = run_json(
        capsys,
        "--params",
        "70B",
        "--method",
        "lora",
        "--trainer",
        "grpo",
        "--gpus",
        "8",
        "--nodes",
        "2",
        "--gpu-memory-gib",
        "80",
        "--vllm-tp",
        "2",
    )
    assert code == 0
    split = data["split"]
    assert split["trainer_cuda_visible_devices"] == ["2,3,4,5,6,7", "2,3,4,5,6,7"]
    assert split["num_processes"] == 12 and split["idle_gpus"] == 2
    launches = [c["command"] for c in data["commands"] if c["role"].startswith("trainer")]
    assert len(launches) == 2
    assert all("--num_processes 12 --num_machines 2" in c for c in launches)
    assert "--machine_rank 1" in launches[1]
    # DeepSpeed's host RAM formula is per node: 6 training processes on each of 2 nodes.
    zero3 = next(c for c in data["candidates"] if c["strategy"] == "zero3-offload-all")
    assert zero3["world_size"] == 12


def test_grpo_without_vllm_counts_the_generate_kv_cache(capsys):
    _, with_server = run_json(capsys, "--params", "7B", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80")
    _, no_vllm = run_json(
        capsys, "--params", "7B", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80", "--vllm-mode", "none"
    )
    approx = no_vllm["candidates"][0]["terms_gib"]["approx"]
    # Mistral-7B shape: 2 x 32 layers x 8 KV heads x 128 x 2 bytes x 1024 tokens (TRL 1.16's GRPO default: an
    # assumed 512-token prompt + max_completion_length 512) x 8 sequences
    assert approx["generate() KV cache"] == pytest.approx(2 * 32 * 8 * 128 * 2 * 1024 * 8 / GB, abs=0.001)
    assert no_vllm["split"]["num_processes"] == 4 and with_server["split"]["num_processes"] == 3


def test_generation_batch_not_divisible_gets_a_steps_per_generation_fix(capsys):
    code, data = run_json(
        capsys, "--params", "7B", "--trainer", "grpo", "--gpus", "8", "--gpu-memory-gib", "80", "--micro-batch", "3"
    )
    assert code == 0
    batch = data["batch"]
    assert batch["num_processes"] == 7 and batch["generation_batch_size"] == 21 and not batch["divisible"]
    assert (3 * 7 * batch["suggested_steps_per_generation"]) % 8 == 0


def test_colocate_plan_cuts_the_trainer_share(capsys):
    code, data = run_json(
        capsys,
        "--params",
        "1.5B",
        "--trainer",
        "grpo",
        "--gpus",
        "2",
        "--gpu-memory-gib",
        "80",
        "--vllm-mode",
        "colocate",
        "--vllm-gpu-memory-utilization",
        "0.4",
    )
    assert code == 0
    assert data["trainer_usable_gib_per_gpu"] == pytest.approx(80 * 0.6, abs=0.01)
    assert data["split"]["num_processes"] == 2 and data["split"]["server_gpus"] == []
    assert data["config_fields"]["vllm_gpu_memory_utilization"] == 0.4
    assert data["config_fields"]["vllm_mode"] == "colocate"


def test_seven_b_grpo_on_four_a100_answers_with_numbers_and_commands(capsys):
    code = pt.main(
        [
            "--params",
            "7B",
            "--method",
            "full",
            "--trainer",
            "grpo",
            "--gpus",
            "4",
            "--gpu-memory-gib",
            "80",
            "--vllm-mode",
            "server",
            "--require-fit",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "vLLM server on GPU 0" in text and "--num_processes 3" in text
    assert "recommendation: DeepSpeed ZeRO-2" in text
    assert "TEMPLATES" in text and "vllm serve" in text and "accelerate launch" in text
    assert "trl grpo --accelerate_config zero2 --num_processes 3" in text


def test_require_fit_fails_when_nothing_fits(capsys):
    code = pt.main(
        [
            "--params",
            "70B",
            "--trainer",
            "sft",
            "--gpus",
            "1",
            "--gpu-memory-gib",
            "24",
            "--require-fit",
            "--host-memory-gib",
            "64",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "nothing fits as asked (full" in out


def test_hardware_json_from_the_diagnostic(capsys, tmp_path):
    report = {
        "schema_version": 1,
        "accelerators": {
            "gpus": [
                {
                    "index": i,
                    "name": "NVIDIA A100-SXM4-80GB",
                    "memory_total_mib": 81920,
                    "memory_free_mib": 81000,
                    "compute_capability": "8.0",
                    "visible": i < 4,
                }
                for i in range(8)
            ]
        },
    }
    path = tmp_path / "diag.json"
    path.write_text(json.dumps(report))
    code, data = run_json(capsys, "--params", "7B", "--trainer", "sft", "--hardware-json", str(path))
    assert code == 0
    assert data["hardware"]["gpus_per_node"] == 4 and data["hardware"]["gpu_memory_gib"] == 80.0


# ---------------------------------------------------------------------------------------------------------------
# YAML loading (the reader itself: tests/test_simple_yaml.py)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("parser", ["builtin", "pyyaml"])
def test_malformed_yaml_exits_2_with_the_line(capsys, tmp_path, parser):
    if parser == "pyyaml":
        pytest.importorskip("yaml")
    bad = tmp_path / "accelerate.yaml"
    bad.write_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n   bad: [1, 2\nnum_processes: 2\n")
    code = pt.main(["--lint-accelerate-config", str(bad), "--yaml-parser", parser])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}:4" in err and "malformed YAML" in err
    assert ("PyYAML" if parser == "pyyaml" else "built-in parser") in err


def test_output_names_the_yaml_parser(capsys, tmp_path):
    cfg = tmp_path / "trl.yaml"
    cfg.write_text("use_liger_kernel: false\n")
    code, data = run_json(capsys, "--lint-trl-config", str(cfg), "--yaml-parser", "builtin")
    assert code == 0 and data["lint"]["yaml_parser"] == ["builtin"]


# ---------------------------------------------------------------------------------------------------------------
# Bad input: clear message, exit 2, never a traceback
# ---------------------------------------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--params", "7B", "--gpus", "0", "--gpu-memory-gib", "80"], "impossible hardware: --gpus 0"),
        (["--params", "7B", "--gpus", "4", "--gpu-memory-gib", "-8"], "impossible hardware: GPU memory"),
        (["--params", "7B", "--gpus", "4", "--gpu-memory-gib", "80", "--nodes", "0"], "impossible hardware: --nodes"),
        (
            ["--params", "7B", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80", "--vllm-tp", "8"],
            "impossible hardware: --vllm-tp 8",
        ),
        (
            ["--params", "7B", "--trainer", "grpo", "--gpus", "1", "--gpu-memory-gib", "80", "--vllm-mode", "server"],
            "needs its own GPU",
        ),
        (
            [
                "--params",
                "7B",
                "--trainer",
                "grpo",
                "--gpus",
                "8",
                "--gpu-memory-gib",
                "80",
                "--vllm-mode",
                "colocate",
                "--vllm-tp",
                "3",
            ],
            "must divide the world size 8",
        ),
        (
            ["--params", "7B", "--trainer", "sft", "--gpus", "2", "--gpu-memory-gib", "80", "--vllm-mode", "server"],
            "only GRPO, RLOO and AsyncGRPO",
        ),
        (["--params", "seven", "--gpus", "1", "--gpu-memory-gib", "80"], "expected a count"),
        (["--params", "7B"], "give --gpus and --gpu-memory-gib"),
        ([], "nothing to do"),
        (
            ["--params", "7B", "--gpus", "1", "--gpu-memory-gib", "80", "--method", "lora", "--lora-targets", "qkv"],
            "none of these names is a linear layer of this model",
        ),
    ],
)
def test_bad_input_exits_2_with_a_message(capsys, argv, needle):
    code = pt.main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err


def test_unknown_architecture_exits_2(capsys, tmp_path):
    path = _write(tmp_path, "config.json", json.dumps({"model_type": "gpt_neox", "hidden_size": 4096}))
    code = pt.main(["--model-config", path, "--gpus", "1", "--gpu-memory-gib", "80"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown model_type 'gpt_neox'" in err and "supported:" in err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"model_type": "llama", "hidden_size": 4096', "malformed JSON"),
        ('{"model_type": "llama", "hidden_size": 4096}', "missing integer field 'num_hidden_layers'"),
        ('{"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2}', "must be an integer"),
    ],
)
def test_broken_model_config_exits_2(capsys, tmp_path, content, needle):
    path = _write(tmp_path, "config.json", content)
    code = pt.main(["--model-config", path, "--gpus", "1", "--gpu-memory-gib", "80"])
    assert code == 2 and needle in capsys.readouterr().err


@pytest.mark.parametrize(
    ("report", "needle"),
    [
        ({"schema_version": 2, "accelerators": {"gpus": []}}, "schema_version 2 is not supported"),
        ({"schema_version": 1, "accelerators": {"gpus": []}}, "no visible GPU"),
        ({"schema_version": 1, "accelerators": {"gpus": [{"index": 0, "visible": True}]}}, "memory_total_mib"),
    ],
)
def test_unusable_hardware_json_exits_2(capsys, tmp_path, report, needle):
    path = _write(tmp_path, "diag.json", json.dumps(report))
    code = pt.main(["--params", "7B", "--hardware-json", path])
    assert code == 2 and needle in capsys.readouterr().err


def test_json_error_output_is_json(capsys):
    code = pt.main(["--params", "7B", "--gpus", "0", "--gpu-memory-gib", "80", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 2 and data["exit_code"] == 2 and "impossible hardware" in data["error"]


# ---------------------------------------------------------------------------------------------------------------
# The script as a process: --help, no heavy imports, no traceback, Python 3.9
# ---------------------------------------------------------------------------------------------------------------


def test_help_documents_inputs_formulas_approximations_and_exit_codes():
    text = pt.build_parser().format_help()
    for needle in (
        "--params",
        "--model-config",
        "--hardware-json",
        "--lint-accelerate-config",
        "--require-fit",
        "2P + 18P/N",
        "4L + 18P/N",
        "approximate",
        "activations",
        "exit codes",
        "templates",
        "kv_cache_interface.py",
    ):
        assert needle in text


def test_runs_as_a_script_without_importing_torch_or_trl():
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['plan_training.py', '--params', '7B', '--trainer', 'grpo', '--gpus', '4', "
        "'--gpu-memory-gib', '80', '--json']\n"
        "try:\n"
        f"    runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = [m for m in ('torch', 'trl', 'vllm', 'deepspeed', 'transformers', 'accelerate') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-B", "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["split"]["num_processes"] == 3


def test_runs_from_any_cwd_without_leaving_bytecode_in_scripts(tmp_path):
    """A copy of the scripts run from elsewhere, bytecode writing on: same answer, no __pycache__ next to them."""
    copy = tmp_path / "bundle" / "scripts"
    shutil.copytree(SCRIPTS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = ["--params", "7B", "--gpus", "1", "--gpu-memory-gib", "80", "--json"]
    result = subprocess.run(
        [sys.executable, str(copy / "plan_training.py"), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verdict"]["state"] == "fits-with-change"  # full 7B on 80 GB: offload
    assert not (copy / "__pycache__").exists()


def test_skill_claims_reaches_the_entry_scripts_parser():
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    try:
        import skill_claims
    finally:
        sys.path.remove(str(REPO_ROOT / "tools"))
    flags = skill_claims._parser_flags(SCRIPT)
    assert flags is not None and "--lora-targets" in flags and "--lint-trl-config" in flags


def test_bad_input_in_a_subprocess_has_no_traceback(tmp_path):
    bad = tmp_path / "trl.yaml"
    bad.write_text("a: [1, 2\n")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--lint-trl-config", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "malformed YAML" in result.stderr


@pytest.mark.skipif(shutil.which("python3.9") is None, reason="no python3.9 on PATH")
def test_runs_on_python_3_9_with_the_builtin_yaml_parser(tmp_path):
    cfg = tmp_path / "acc.yaml"
    cfg.write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\nnum_processes: 8\n")
    env = {**os.environ, "PYENV_VERSION": "3.9.18"}
    result = subprocess.run(
        [
            "python3.9",
            "-S",
            str(SCRIPT),
            "--params",
            "7B",
            "--trainer",
            "grpo",
            "--gpus",
            "4",
            "--gpu-memory-gib",
            "80",
            "--lint-accelerate-config",
            str(cfg),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    if result.returncode != 0 and "pyenv" in result.stderr:
        pytest.skip("python3.9 not installed through pyenv here")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["lint"]["yaml_parser"] == ["builtin"]  # -S: no site-packages, so no PyYAML
    assert any(f["id"] == "num-processes" for f in data["lint"]["findings"])


def test_a_closed_pipe_ends_quietly():
    """`plan_training.py ... | head -1`: the reader is gone before the report is written; no traceback, exit 0."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "--params", "70B", "--gpus", "8", "--gpu-memory-gib", "80", "--json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert result.returncode == 0


def test_trl_config_fields_drive_the_plan_and_flags_win(capsys, tmp_path):
    cfg = tmp_path / "dpo.yaml"
    cfg.write_text("per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\nmax_length: 4096\nbeta: 0.1\n")
    base = [
        "--params",
        "8B",
        "--gpus",
        "1",
        "--gpu-memory-gib",
        "80",
        "--trainer",
        "dpo",
        "--lint-trl-config",
        str(cfg),
    ]
    code, data = run_json(capsys, *base)
    assert code == 0
    setup = data["setup"]
    assert (setup["micro_batch"], setup["grad_accum"], setup["seq_len"]) == (2, 4, 4096)
    sources = {item["input"]: item for item in data["inputs_from"]}
    assert sources["--micro-batch"]["source"] == f"per_device_train_batch_size in {cfg}"
    code, data = run_json(capsys, *base, "--micro-batch", "1")
    assert data["setup"]["micro_batch"] == 1
    won = {item["input"]: item for item in data["inputs_from"]}["--micro-batch"]
    assert won["source"] == "flag" and won["overrides"] == "per_device_train_batch_size: 2"
    pt.main([*base, "--micro-batch", "1"])
    assert "--micro-batch 1 (the flag wins over per_device_train_batch_size: 2)" in capsys.readouterr().out


def test_grpo_config_num_generations_and_batch_set_the_generation_batch(capsys, tmp_path):
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text("per_device_train_batch_size: 4\nnum_generations: 16\nsteps_per_generation: 4\n")
    code, data = run_json(
        capsys, "--params", "7B", "--gpus", "4", "--gpu-memory-gib", "80", "--trainer", "grpo",
        "--vllm-mode", "colocate", "--lint-trl-config", str(cfg),
    )  # fmt: skip
    assert code == 0 and data["batch"]["num_generations"] == 16
    assert data["batch"]["per_device_train_batch_size"] == 4 and data["batch"]["steps_per_generation"] == 4
    assert data["batch"]["generation_batch_size"] == 4 * 4 * 4


def test_multi_node_trainer_rendezvous_is_the_first_training_node(capsys):
    """Node 0 runs only the vLLM server: accelerate's --main_process_ip must be node 1, the server URL node 0."""
    code, data = run_json(
        capsys, "--params", "70B", "--method", "lora", "--trainer", "grpo", "--gpus", "8", "--nodes", "3",
        "--gpu-memory-gib", "80", "--vllm-tp", "8",
    )  # fmt: skip
    assert code == 0 and data["split"]["layout"].startswith("node 0 runs")
    launches = [c for c in data["commands"] if c["role"].startswith("trainer (node")]
    assert [c["role"] for c in launches] == ["trainer (node 1)", "trainer (node 2)"]
    assert all("--main_process_ip <node1-ip>" in c["command"] for c in launches)
    assert data["config_fields"]["vllm_server_base_url"] == "http://<node0-ip>:8000"


@pytest.mark.parametrize(
    "extra",
    [
        ["--trainer", "sft", "--gpus", "4"],
        ["--trainer", "dpo", "--gpus", "1", "--method", "qlora"],
        ["--trainer", "grpo", "--gpus", "4", "--vllm-mode", "server"],
        ["--trainer", "grpo", "--gpus", "4", "--vllm-mode", "colocate", "--method", "qlora"],
        ["--trainer", "async-grpo", "--gpus", "4", "--method", "lora"],
    ],
)
def test_pre_ampere_templates_all_switch_to_fp16(capsys, tmp_path, extra):
    """Compute capability 7.0: every template says fp16, and the planner's own lint accepts what it printed."""
    argv = ["--params", "7B", "--gpu-memory-gib", "32", "--compute-capability", "7.0", *extra]
    code, data = run_json(capsys, *argv)
    assert code == 0 and data["setup"]["mixed_precision"] == "fp16" and data["commands"], data["notes"]
    for command in data["commands"]:
        text = command["command"]
        if " trl " in f" {text}":
            assert "--bf16 false --fp16 true" in text and "bfloat16" not in text, text
        if "accelerate launch" in text:
            assert "mixed_precision: fp16" in command["note"], command["note"]
        if "vllm serve" in text:
            assert "--dtype float" in text and "bfloat16" not in text, text
    fields = data["config_fields"]
    assert fields["fp16"] is True and fields["bf16"] is False
    assert "bfloat16" not in json.dumps(fields)
    trl_yaml = tmp_path / "trl.yaml"
    trl_yaml.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items() if k in ("bf16", "fp16")))
    pt.main(["--lint-trl-config", str(trl_yaml), "--compute-capability", "7.0", "--gpus", "4", "--json"])
    findings = json.loads(capsys.readouterr().out)["lint"]["findings"]
    assert not [f for f in findings if f["id"] == "bf16-compute-capability"]


def test_host_ram_is_checked_for_every_candidate_not_only_offload(capsys):
    """8B full fine-tune, DDP on 8 GPUs: every process materialises the float32 model on CPU while loading."""
    argv = ["--params", "8B", "--gpus", "8", "--gpu-memory-gib", "80", "--host-memory-gib", "128"]
    _code, data = run_json(capsys, *argv)
    zero2 = next(c for c in data["candidates"] if c["strategy"] == "zero2")
    assert zero2["host_ram_per_node_gib"] > 128 and zero2["fits"] is False and "host RAM" in zero2["verdict"]
    assert "every process loads the whole model on CPU (before training)" in zero2["host_terms_gib"]
    assert zero2["host_basis"] and zero2["host_ram_band_gib"]["verdict_uses"] == "high"
    # FSDP2 loads on rank 0 only (cpu_ram_efficient_loading), so it fits the same host.
    fsdp2 = next(c for c in data["candidates"] if c["strategy"] == "fsdp2")
    assert fsdp2["fits"] is True and fsdp2["host_ram_per_node_gib"] < 128 / 1.25


def test_zero2_offload_host_plan_is_partitioned_and_deepspeed_estimate_is_reported_as_such(capsys):
    """72B on 4 nodes x 8 GPUs: DeepSpeed's estimator scales with all 32 GPUs (12,875 GiB per node); the offloaded
    states are partitioned over the 32 ranks, 16 bytes x P x 8/32 per node."""
    _code, data = run_json(capsys, "--params", "72B", "--gpus", "8", "--nodes", "4", "--gpu-memory-gib", "80")
    offload = next(c for c in data["candidates"] if c["strategy"] == "zero2-offload")
    assert offload["deepspeed_host_estimate_gib"] == pytest.approx(72e9 * 4 * 32 * 1.5 / GB, rel=1e-3)
    states = offload["host_terms_gib"]["offloaded states (exact formula)"]
    assert states == pytest.approx(16 * 72e9 * 8 / 32 / GB, rel=1e-3)
    assert offload["host_ram_per_node_gib"] < offload["deepspeed_host_estimate_gib"] / 4
    pt.main(["--params", "72B", "--gpus", "8", "--nodes", "4", "--gpu-memory-gib", "80"])
    assert "DeepSpeed's estimator says 12875" in capsys.readouterr().out


def test_async_grpo_lora_on_fused_moe_reports_merged_sync(capsys):
    config = str(MODEL_DIR / "qwen3-30b-a3b" / "config.json")
    argv = ["--model-config", config, "--method", "lora", "--model-dtype", "bfloat16", "--trainer", "async-grpo",
            "--gpus", "8", "--gpu-memory-gib", "80", "--vllm-mode", "server"]  # fmt: skip
    _code, data = run_json(capsys, *argv)
    assert data["setup"]["trainable_params"] == 996_507_648
    assert data["lora"]["target_parameters"] == ["down_proj", "gate.weight", "gate_up_proj"]
    assert "merged" in data["lora"]["async_grpo_merged_sync_reason"]
    assert any(note.startswith("AsyncGRPO syncs merged weights") for note in data["notes"])
    server = next(c["command"] for c in data["commands"] if "vllm serve" in c["command"])
    assert "--enable-lora" not in server
    assert "lora_dropout=0.0" in data["config_fields"]["peft_config"]


def test_feature_floors_follow_the_trl_release_given(capsys):
    """AsyncGRPO LoRA on a server: TRL 1.8's weight transfer needs vLLM >= 0.22 (read in its source) inside its
    extra's vllm>=0.16.0,<=0.23.0; TRL 1.16 has no such gate and its extra says vllm>=0.22.0,<=0.31.0."""
    argv = ["--params", "7B", "--method", "lora", "--trainer", "async-grpo", "--gpus", "4", "--gpu-memory-gib", "80"]
    floors = {}
    for release in ("1.8.0", "1.16.0"):
        _, data = run_json(capsys, *argv, "--trl-version", release)
        block = data["feature_floors"]
        assert block["trl_version"] == release and block["goals"][-2:] == ["async-grpo", "async-grpo-lora"]
        assert block["check_command"].endswith(f"--keep trl=={release}")
        floors[release] = {(f["kind"], f["subject"]): f["spec"] for f in block["floors"]}
    assert floors["1.8.0"][("requires", "vllm")] == ">=0.22.0"
    assert floors["1.8.0"][("extra", "vllm")] == ">=0.16.0,<=0.23.0"
    assert ("requires", "vllm") not in floors["1.16.0"]
    assert floors["1.16.0"][("extra", "vllm")] == ">=0.22.0,<=0.31.0"


def test_the_install_check_command_runs_as_printed_from_any_folder(capsys, tmp_path):
    import shlex
    import subprocess

    _, data = run_json(capsys, "--params", "7B", "--method", "qlora", "--gpus", "2", "--gpu-memory-gib", "24")
    command = data["feature_floors"]["check_command"]
    done = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1) and done.stdout.startswith("plan_install:"), done.stderr


def test_feature_floors_only_add_a_json_field(capsys):
    argv = ["--params", "7B", "--gpus", "2", "--gpu-memory-gib", "80"]
    _, data = run_json(capsys, *argv)
    assert set(data["feature_floors"]) == {"trl_version", "goals", "floors", "check_command"}
    assert {"recommendation", "verdict", "commands", "candidates", "lint"} <= set(data)


def test_help_lists_every_supported_family_from_the_family_table():
    """Issue #19: --help named a fixed list that missed olmoe, glm4_moe and granitemoe; it is generated now."""
    from planner import model as pm

    text = " ".join(pm.wrap_words(pt.build_parser().format_help().split(), 10**6))
    listed = text.split("model_type is one of:", 1)[1].split(".", 1)[0]
    assert [name.strip() for name in listed.split(",")] == pm.family_names()
    for model_type in {*pm.FAMILIES, *pm.MULTIMODAL}:
        assert f" {model_type}" in listed
    for model_type in ("olmoe", "glm4_moe", "granitemoe"):
        assert f"{model_type} (MoE)" in listed
    assert all(len(line) <= 100 for line in pt.FAMILY_HELP.splitlines())
    # The fused-MoE families PEFT converts (LoRA trains their experts) come from the same module's table.
    flat = " ".join(pt.build_parser().format_help().split())
    assert "On fused-MoE models (" + ", ".join(sorted(pm.PEFT_MOE_CONVERSION)) + ")" in flat


def _server_vllm(capsys, *extra: str) -> dict:
    path = MODEL_DIR / "qwen3-30b-a3b" / "config.json"
    argv = ["--model-config", str(path), "--method", "lora", "--trainer", "grpo", "--gpus", "8"]
    code, data = run_json(capsys, *argv, "--gpu-memory-gib", "80", "--vllm-mode", "server", *extra)
    assert code in (0, 3, 4), data
    return data["vllm"]


def test_the_vllm_release_picks_its_overhead_rules(capsys):
    """--vllm-version reaches the KV budget: CUDA graphs count from 0.20, the kept MoE workspace from 0.11, and the
    sort-based sampler before 0.17 adds to the sampler term (with a note); the release is printed and in --json."""
    default = _server_vllm(capsys)
    assert default["vllm_release"] == "0.31.0"
    before_graphs = _server_vllm(capsys, "--vllm-version", "0.19.1")
    after_graphs = _server_vllm(capsys, "--vllm-version", "0.20.0")
    assert before_graphs["vllm_release"] == "0.19.1"
    assert before_graphs["kv_budget_gib"] > after_graphs["kv_budget_gib"]
    assert (
        after_graphs["overhead_terms_gib"]["cuda_graphs_gib"] == before_graphs["overhead_terms_gib"]["cuda_graphs_gib"]
    )
    sorted_sampler = _server_vllm(capsys, "--vllm-version", "0.16.0")
    assert (
        sorted_sampler["overhead_terms_gib"]["sampler_peak_gib"]
        > before_graphs["overhead_terms_gib"]["sampler_peak_gib"]
    )
    assert any("sorts the dummy sampler batch" in note for note in sorted_sampler["notes"])
    no_kept = _server_vllm(capsys, "--vllm-version", "0.10.2")
    assert (
        no_kept["overhead_terms_gib"]["kept_moe_workspace_gib"]
        == 0
        < before_graphs["overhead_terms_gib"]["kept_moe_workspace_gib"]
    )
    assert pt.main(["--params", "7B", "--vllm-version", "0.9", "--gpus", "1", "--gpu-memory-gib", "80"]) == 2
    assert "older than vLLM 0.10.2" in capsys.readouterr().err


def test_a_vllm_release_outside_the_trl_extra_is_named(capsys):
    path = MODEL_DIR / "qwen2.5-7b" / "config.json"
    argv = ["--model-config", str(path), "--method", "lora", "--trainer", "grpo", "--gpus", "4"]
    argv += ["--gpu-memory-gib", "80", "--vllm-mode", "server", "--trl-version", "1.5.1"]
    _, default = run_json(capsys, *argv)
    assert any(
        "vLLM 0.31.0 (the planner's default) is outside" in n and "vllm>=0.12.0,<=0.18.0" in n for n in default["notes"]
    )
    _, inside = run_json(capsys, *argv, "--vllm-version", "0.18.0")
    assert not any("is outside what TRL" in n for n in inside["notes"])
    _, current = run_json(capsys, *argv[:-2])  # TRL 1.16.0 accepts the default 0.31.0
    assert not any("is outside what TRL" in n for n in current["notes"])


def test_releases_newer_than_the_recorded_matrix_are_named_never_planned_around(capsys):
    """A --trl-version past the newest recorded TRL is refused in the shared wording; a --vllm-version past the
    newest recorded vLLM is planned with the newest rules and a note that says so."""
    from common import recorded

    known = recorded.load()
    assert pt.main(["--params", "7B", "--gpus", "1", "--gpu-memory-gib", "80", "--trl-version", "99.0.0"]) == 2
    err = capsys.readouterr().err
    assert f"TRL 99.0.0 is newer than the recorded matrix ({known.fetched}); newest recorded" in err
    argv = ["--params", "7B", "--method", "lora", "--trainer", "grpo", "--gpus", "4", "--gpu-memory-gib", "80"]
    _, past = run_json(capsys, *argv, "--vllm-mode", "server", "--vllm-version", "9.1.0")
    [note] = [n for n in past["notes"] if "recorded matrix" in n]
    assert note.startswith(f"vLLM 9.1.0 is newer than the recorded matrix ({known.fetched}); newest recorded")
    _, known_release = run_json(capsys, *argv, "--vllm-mode", "server", "--vllm-version", known.newest["vllm"])
    assert not any("recorded matrix" in n for n in known_release["notes"])

"""check_optional_backends.py: the accelerate default config and the environment variables (with redaction)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from diagnostic import base
from diagnostic import launch as diag_launch

from diagnostic_helpers import FIXTURES, add_dist, add_stack, backend, base_env, fake_nvidia_smi, run_script


def yaml_dir(tmp: Path) -> Path:
    """A folder that holds only PyYAML (linked from the test venv)."""
    target = tmp / "with-yaml"
    if not target.exists():
        target.mkdir(parents=True)
        (target / "yaml").symlink_to(Path(yaml.__file__).resolve().parent)
    return target


def write_default_config(home: Path, text: str) -> Path:
    path = home / ".cache" / "huggingface" / "accelerate" / "default_config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- where accelerate looks (accelerate-1.15.0 accelerate/commands/config/config_args.py) -----------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "~/.cache/huggingface/accelerate/default_config.yaml"),
        ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/huggingface/accelerate/default_config.yaml"),
        ({"HF_HOME": "/hf", "XDG_CACHE_HOME": "/xdg"}, "/hf/accelerate/default_config.yaml"),
        ({"HF_HOME": ""}, "accelerate/default_config.yaml"),  # accelerate uses os.environ.get(..., default)
        ({"ACCELERATE_CONFIG_FILE": "/elsewhere.yaml"}, "~/.cache/huggingface/accelerate/default_config.yaml"),
    ],
)
def test_accelerate_config_lookup(env: dict, expected: str) -> None:
    assert (
        diag_launch.accelerate_config_path(env) == str(Path(expected).expanduser())
        if expected.startswith("~")
        else expected
    )


# --- the config as the report shows it --------------------------------------------------------------------------------


@pytest.mark.parametrize("with_yaml", [True, False], ids=["pyyaml", "builtin"])
def test_fsdp2_config_is_summarised(tmp_path: Path, with_yaml: bool) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    write_default_config(tmp_path / "home", (FIXTURES / "accelerate" / "fsdp2.yaml").read_text(encoding="utf-8"))
    sites = [site, yaml_dir(tmp_path)] if with_yaml else [site]
    report = run_script(["--json"], sites, tmp=tmp_path).json()
    config = report["launch"]["accelerate_config"]
    assert config["status"] == "found"
    assert config["parser"] == ("pyyaml" if with_yaml else "builtin (PyYAML not installed)")
    assert config["path"] == "~/.cache/huggingface/accelerate/default_config.yaml"
    assert config["settings"]["distributed_type"] == "FSDP"
    assert config["settings"]["fsdp_version"] == 2
    assert config["settings"]["num_processes"] == 8
    assert config["problems"] == []
    # 8 processes, 4 visible GPUs
    assert any(f["code"] == "accelerate_num_processes" for f in report["findings"])
    text = run_script([], sites, tmp=tmp_path).stdout
    assert "distributed_type=FSDP, mixed_precision=bf16, num_processes=8" in text


@pytest.mark.parametrize("with_yaml", [True, False], ids=["pyyaml", "builtin"])
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("compute_environment: LOCAL_MACHINE\ndistributed_type: [MULTI_GPU\nnum_processes: 2\n", "cannot parse"),
        ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_TPU_V9\n", "'MULTI_TPU_V9' is not a valid value"),
        ("distributed_type: NO\n", "parsed as boolean False"),
        ("distributed_type: MULTI_GPU\nnum_gpus: 8\n", "unknown keys ['num_gpus']"),
        ("distributed_type: MULTI_GPU\n1: x\nfoo: y\n", "unknown keys [1, 'foo']"),  # YAML reads 1 as an int
        ("mixed_precision: bf16\n", "distributed_type is missing"),
        ("- just\n- a list\n", "not a mapping"),
    ],
)
def test_malformed_config_is_a_finding_not_a_crash(tmp_path: Path, with_yaml: bool, content: str, message: str) -> None:
    site = tmp_path / "site"
    add_stack(site)
    write_default_config(tmp_path / "home", content)
    sites = [site, yaml_dir(tmp_path)] if with_yaml else [site]
    run = run_script(["--json"], sites, tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    report = run.json()
    config = report["launch"]["accelerate_config"]
    assert config["status"] == "malformed"
    assert any(message in problem for problem in config["problems"]), config["problems"]
    [finding] = [f for f in report["findings"] if f["code"] == "accelerate_config_malformed"]
    assert finding["severity"] == "error"
    text = run_script([], sites, tmp=tmp_path)
    assert text.returncode == 0 and "malformed" in text.stdout and "Traceback" not in text.stderr


def test_explicit_config_path_and_json_config(tmp_path: Path) -> None:
    config = tmp_path / "zero3.json"
    config.write_text('{"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 3}}', encoding="utf-8")
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json", "--accelerate-config", str(config)], [site], tmp=tmp_path).json()
    launch = report["launch"]["accelerate_config"]
    assert (launch["status"], launch["parser"]) == ("found", "json")
    assert launch["settings"] == {"distributed_type": "DEEPSPEED", "deepspeed.zero_stage": 3}
    assert any(f["code"] == "accelerate_deepspeed_missing" for f in report["findings"])
    assert any("selects DEEPSPEED" in e for e in backend(report, "fsdp2")["evidence"])


# --- environment variables and secrets --------------------------------------------------------------------------------

SECRETS = {
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "VLLM_API_KEY": "vllm-key-7a6b5c4d3e",
    "ACCELERATE_AUTH_HEADER": "Bearer abcdef987654",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef",
    "NCCL_SECRET_PASSWORD": "hunter2hunter2",
}
URL_PASSWORD = "s3cr3t-pass-w0rd"


def test_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    write_default_config(
        tmp_path / "home",
        f"distributed_type: MULTI_GPU\nmain_process_ip: https://admin:{URL_PASSWORD}@10.0.0.1\nnum_processes: 2\n",
    )
    env = base_env(tmp_path / "home", tmp_path / "bin")
    env.update(SECRETS)
    env.update(
        {
            "VLLM_SERVER_URL": f"https://trainer:{URL_PASSWORD}@vllm.internal:8000/v1",
            "NCCL_SOCKET_IFNAME": "eth0",
            "CUDA_VISIBLE_DEVICES": "0,1",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
            "HF_HUB_OFFLINE": "1",
            "MASTER_ADDR": "10.0.0.1",
            "SLURM_JOB_ID": "4242",
            "UNRELATED_VARIABLE": "not shown",
        }
    )
    for args in ([], ["--json"], ["--verbose"], ["--json", "--verbose"]):
        run = run_script(args, [site], tmp=tmp_path, env=env)
        assert run.returncode == 0, run.stderr
        for secret in [*SECRETS.values(), URL_PASSWORD]:
            assert secret not in run.stdout and secret not in run.stderr, (args, secret)
    shown = run_script(["--json"], [site], tmp=tmp_path, env=env).json()["launch"]["env"]
    assert shown["HF_TOKEN"] == "<redacted>"
    assert shown["VLLM_API_KEY"] == "<redacted>"
    assert shown["ACCELERATE_AUTH_HEADER"] == "<redacted>"
    assert shown["VLLM_SERVER_URL"] == "https://<redacted>@vllm.internal:8000/v1"
    assert shown["NCCL_SOCKET_IFNAME"] == "eth0"
    assert shown["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert (shown["MASTER_ADDR"], shown["SLURM_JOB_ID"], shown["HF_HUB_OFFLINE"]) == ("10.0.0.1", "4242", "1")
    assert "UNRELATED_VARIABLE" not in shown and "WANDB_API_KEY" not in shown
    assert any("HF_HUB_OFFLINE" in e for e in backend_evidence(tmp_path, site, env, "hub-kernels"))


def backend_evidence(tmp_path: Path, site: Path, env: dict, backend_id: str) -> list:
    add_dist(site, "kernels", "0.18.2")
    return backend(run_script(["--json"], [site], tmp=tmp_path, env=env).json(), backend_id)["evidence"]


def test_redact_value_unit() -> None:
    assert base.redact_value("https://u:p@h/x") == "https://<redacted>@h/x"
    assert base.redact_value("redis://:pw@cache:6379") == "redis://<redacted>@cache:6379"
    assert base.redact_value("token hf_abcdefghijklmnopqrstuvwx used") == "token <redacted> used"
    assert base.redact_value("http://host:8000/v1") == "http://host:8000/v1"

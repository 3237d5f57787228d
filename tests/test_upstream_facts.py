"""The committed upstream facts file, and the refresh tool that generates it.

The real refresh needs the network (``pip download``), so it is not run here; instead the extractors run on small
synthetic wheels built in a temporary folder, twice, and must give identical output.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import refresh_upstream_facts as refresh  # noqa: E402
from facts import extract_trl, extract_vllm  # noqa: E402
from facts.archive import SourceArchive, sha256_of  # noqa: E402
from facts.delta import apply_delta, make_delta  # noqa: E402
from skill_claims import Facts  # noqa: E402

FACTS_PATH = REPO_ROOT / "tests" / "facts" / "upstream_facts.json"
EXPECTED_VERSIONS = {
    "trl": ("1.16.0", {"1.16.0"}),
    "vllm": ("0.31.0", {"0.27.1", "0.31.0", "0.33.0", "0.34.0"}),
    "accelerate": ("1.16.0", {"1.16.0"}),
    "peft": ("0.21.2", {"0.21.2"}),
    "transformers": ("5.25.0", {"5.25.0"}),
    "deepspeed": ("0.19.8", {"0.19.8"}),
    "bitsandbytes": ("0.50.2", {"0.50.2"}),
    "liger-kernel": ("0.8.5", {"0.8.5"}),
    "kernels": ("0.19.1", {"0.19.1"}),
    "huggingface_hub": ("2.4.0", {"2.4.0"}),
}


@pytest.fixture(scope="module")
def raw() -> Dict:
    return json.loads(FACTS_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def facts() -> Facts:
    return Facts.load(FACTS_PATH)


# ---- the committed file --------------------------------------------------------------------------------------------


def test_file_is_canonical_generated_output(raw):
    """Sorted keys and the tool's own layout: a hand edit that reformats or reorders shows up here."""
    assert raw["schema_version"] == refresh.SCHEMA_VERSION
    assert raw["generated_by"] == refresh.REFRESH_COMMAND
    assert FACTS_PATH.read_text(encoding="utf-8") == refresh.render(raw)


def test_file_stays_small():
    assert FACTS_PATH.stat().st_size < 2_000_000


def test_pinned_packages_versions_and_hashes(raw):
    packages = raw["packages"]
    assert set(packages) == set(EXPECTED_VERSIONS)
    for package, (primary, versions) in EXPECTED_VERSIONS.items():
        entry = packages[package]
        assert entry["primary"] == primary
        assert set(entry["versions"]) == versions
        for version, stored in entry["versions"].items():
            assert re.fullmatch(r"[0-9a-f]{64}", stored["sha256"]), (package, version)
            prefix = package.replace("-", "_").lower() + "-" + version
            assert stored["file"].lower().startswith(prefix), stored["file"]
            if version != primary:
                assert stored["delta_from"] == primary
                assert set(stored) == {"file", "sha256", "delta_from", "delta"}
    # The pins in the tool and the file agree.
    pinned = {(p.package, p.version) for p in refresh.PINS}
    stored = {(p, v) for p, e in packages.items() for v in e["versions"]}
    assert pinned == stored


def test_trl_anchor_facts(facts):
    trl = facts.version_facts("trl", "1.16.0")
    grpo = trl["classes"]["trl.trainer.grpo_config.GRPOConfig"]
    assert grpo["fields"]["vllm_gpu_memory_utilization"] == {"type": "float", "default": "0.3"}
    assert grpo["bases"] == ["trl.trainer.base_config._BaseConfig"]
    assert trl["classes"]["trl.trainer.base_config._BaseConfig"]["bases"] == ["transformers.TrainingArguments"]
    async_cfg = trl["classes"]["trl.experimental.async_grpo.async_grpo_config.AsyncGRPOConfig"]
    assert {"max_staleness", "max_inflight_tasks", "vllm_server_base_url"} <= set(async_cfg["fields"])
    assert "tensor_parallel_size ({}) must divide world size ({}) evenly." in trl["messages"]
    sft = trl["clis"]["trl sft"]
    assert sft["forwards_unknown_to"] == "accelerate launch"
    assert {"--accelerate_config", "--config", "--per_device_train_batch_size", "--use_peft", "--lora_r"} <= set(
        sft["flags"]
    )
    assert "--no_gradient_checkpointing" in sft["flags"]  # bool field whose default is True
    serve = trl["clis"]["trl vllm-serve"]
    assert serve["forwards_unknown_to"] == "vllm serve"
    assert "--gpu_memory_utilization" in serve["flags"]
    presets = trl["accelerate_presets"]
    assert set(presets) == {"fsdp1", "fsdp2", "multi_gpu", "single_gpu", "zero1", "zero2", "zero3"}
    assert presets["zero3"]["deepspeed_config"]["zero_stage"] == 3
    assert {p["num_processes"] for p in presets.values()} == {8}
    assert 'vllm<=0.31.0,>=0.22.0; extra == "vllm"' in trl["requires_dist"]
    assert {"VLLM_SERVER_DEV_MODE", "CUDA_VISIBLE_DEVICES"} <= set(trl["env_vars"])


@pytest.mark.parametrize("version", ["0.27.1", "0.31.0", "0.33.0"])
def test_vllm_anchor_facts(facts, version):
    vllm = facts.version_facts("vllm", version)
    flags = vllm["clis"]["vllm serve"]["flags"]
    assert flags["--max-lora-rank"]["choices"] == [1, 8, 16, 32, 64, 128, 256, 320, 512]
    assert flags["--max-lora-rank"]["field"] == "LoRAConfig.max_lora_rank"
    assert {"--enable-lora", "--no-enable-lora", "--max-loras", "-tp", "--tensor-parallel-size"} <= set(flags)
    assert flags["--enable-prefix-caching"]["takes_value"] is False
    assert {"VLLM_SERVER_DEV_MODE", "VLLM_ALLOW_RUNTIME_LORA_UPDATING"} <= set(vllm["env_vars"])
    routes = vllm["routes"]
    lora = routes["/v1/load_lora_adapter"]["variants"]
    assert [v["env"] for v in lora] == [["VLLM_ALLOW_RUNTIME_LORA_UPDATING"]]
    assert all(v["env"] == ["VLLM_SERVER_DEV_MODE"] for v in routes["/server_info"]["variants"])
    assert any("env" not in v and "conditions" not in v for v in routes["/v1/models"]["variants"])
    assert any("conditions" not in v for v in routes["/health"]["variants"])


def test_vllm_versions_differ_where_upstream_changed(facts):
    """The deltas are applied: each release keeps the flags and routes it really has."""
    old = facts.version_facts("vllm", "0.27.1")["clis"]["vllm serve"]["flags"]
    primary = facts.version_facts("vllm", "0.31.0")
    new = facts.version_facts("vllm", "0.33.0")
    assert "--enable-scale-out" not in old and "--enable-scale-out" in primary["clis"]["vllm serve"]["flags"]
    assert "--calculate-kv-scales" in old and "--calculate-kv-scales" not in primary["clis"]["vllm serve"]["flags"]
    assert "--sleep-mode-backend" in new["clis"]["vllm serve"]["flags"]
    assert "/weight_checker" in new["routes"] and "/weight_checker" not in primary["routes"]
    newest = facts.version_facts("vllm", "0.34.0")  # the newest on PyPI (2026-12-06); no TRL extra accepts it
    assert "/v1/fault_tolerance/apply" in newest["routes"] and "/fault_tolerance/apply" not in newest["routes"]
    assert "--enable-extensible-kv-cache" in newest["clis"]["vllm serve"]["flags"]
    assert {"torch==2.14.0", "transformers<5.23.0,>=5.16.1"} <= set(newest["requires_dist"])
    assert "torch==2.14.0" in new["requires_dist"] and "torch==2.13.0" in primary["requires_dist"]


def test_other_package_anchor_facts(facts):
    accelerate = facts.version_facts("accelerate", "1.16.0")
    launch = accelerate["clis"]["accelerate launch"]["flags"]
    assert {"--num_processes", "--config_file", "--mixed_precision", "--use_fsdp", "-m"} <= set(launch)
    assert launch["--multi_gpu"]["takes_value"] is False
    assert "fsdp_version" in accelerate["config_file"]["nested_written_by_questionnaire"]["fsdp_config"]
    assert "distributed_type" in accelerate["config_file"]["top_level"]["ClusterConfig"]
    peft = facts.version_facts("peft", "0.21.2")
    lora = peft["classes"]["peft.tuners.lora.config.LoraConfig"]
    assert lora["fields"]["r"]["default"] == "8" and lora["bases"] == ["peft.config.PeftConfig"]
    transformers = facts.version_facts("transformers", "5.25.0")
    bnb = transformers["classes"]["transformers.utils.quantization_config.BitsAndBytesConfig"]
    assert {"load_in_4bit", "bnb_4bit_quant_type", "bnb_4bit_compute_dtype"} <= set(bnb["init_params"])
    assert (
        "per_device_train_batch_size"
        in transformers["classes"]["transformers.training_args.TrainingArguments"]["fields"]
    )
    deepspeed = facts.version_facts("deepspeed", "0.19.8")
    assert {"stage3_gather_16bit_weights_on_model_save", "offload_optimizer"} <= set(
        deepspeed["deepspeed_config_keys"]["zero_optimization"]
    )
    assert {"DS_BUILD_OPS", "DS_BUILD_FUSED_ADAM"} <= set(deepspeed["env_vars"])
    liger = facts.version_facts("liger-kernel", "0.8.5")
    assert "apply_liger_kernel_to_llama" in liger["identifiers"]
    hub = facts.version_facts("huggingface_hub", "2.4.0")
    run = hub["clis"]["hf jobs run"]["flags"]
    assert {"--flavor", "--secrets", "-e", "--detach", "-d", "--timeout"} <= set(run)
    assert run["--detach"]["takes_value"] is False
    assert "--with" in hub["clis"]["hf jobs uv run"]["flags"]
    assert any(name.startswith("hf buckets ") for name in hub["clis"])


# ---- delta encoding ------------------------------------------------------------------------------------------------


def test_delta_round_trip():
    base = {"a": [1, 2], "b": {"x": 1, "y": {"k": "v"}}, "c": ["p", "q"], "gone": 1}
    other = {"a": [2, 1], "b": {"x": 2, "y": {"k": "v", "n": 0}}, "c": ["q", "r"], "new": True}
    delta = make_delta(base, other)
    assert apply_delta(base, delta) == other
    assert delta["patch"]["c"] == {"add": ["r"], "remove": ["p"]}
    assert delta["unset"] == ["gone"]


# ---- synthetic wheels ----------------------------------------------------------------------------------------------


def _wheel(path: Path, files: Dict[str, str], reverse: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    items = sorted(files.items(), reverse=reverse)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in items:
            archive.writestr(name, text)
    return path


SYNTHETIC_TRL = {
    "trl/__init__.py": "",
    "trl/cli/__init__.py": "",
    "trl/cli/commands/__init__.py": (
        "from .training import TrainingCommand\n\ndef get_commands():\n    return [TrainingCommand('sft')]\n"
    ),
    "trl/cli/commands/training.py": "class TrainingCommand:\n    def __init__(self, name):\n        self.name = name\n",
    "trl/cli/accelerate_config.py": (
        "def resolve(launch_args):\n    if '--accelerate_config' not in launch_args:\n        return launch_args\n"
    ),
    "trl/scripts/__init__.py": "",
    "trl/scripts/utils.py": (
        "from dataclasses import dataclass, field\n\n"
        "@dataclass\nclass ScriptArguments:\n"
        "    dataset_name: str | None = field(default=None, metadata={'aliases': ['--ds']})\n\n"
        "def parse(args):\n    if '--config' in args:\n        return True\n"
    ),
    "trl/scripts/sft.py": (
        "def make_parser(subparsers=None, prog=None):\n"
        "    from trl.scripts.utils import ScriptArguments\n"
        "    from trl.trainer.sft_config import SFTConfig\n"
        "    dataclass_types = (ScriptArguments, SFTConfig)\n"
        "    return dataclass_types\n"
    ),
    "trl/trainer/__init__.py": "",
    "trl/trainer/sft_config.py": (
        "import os\nfrom dataclasses import dataclass, field\n\n"
        "@dataclass\nclass SFTConfig:\n"
        "    max_length: int | None = 1024\n"
        "    packing: bool = field(default=True, metadata={'help': 'pack'})\n"
        "    _private: int = field(default=0, init=False)\n\n"
        "    def __post_init__(self):\n"
        "        if os.environ.get('TRL_SYNTH_FLAG'):\n"
        "            raise ValueError(f'max_length ({self.max_length}) is too small for packing '\n"
        "                             'with these settings.')\n"
    ),
    "trl/accelerate_configs/ddp.yaml": "distributed_type: MULTI_GPU\nnum_processes: 8\n",
    "trl-9.9.9.dist-info/METADATA": (
        "Metadata-Version: 2.4\nName: trl\nVersion: 9.9.9\n"
        'Requires-Dist: vllm<=0.31.0,>=0.22.0; extra == "vllm"\nRequires-Dist: numpy\n\nLong description\n'
    ),
}


def _trl_pins():
    return (refresh.Pin("trl", "9.9.9", extract_trl.extract),)


def test_refresh_is_deterministic_and_records_the_archive_hash(tmp_path):
    wheel_dir = tmp_path / "wheels"
    wheel = _wheel(wheel_dir / "trl-9.9.9-py3-none-any.whl", SYNTHETIC_TRL)
    output = tmp_path / "facts.json"
    first = refresh.refresh(wheel_dir, output, offline=True, pins=_trl_pins())
    second = refresh.refresh(wheel_dir, output, offline=True, pins=_trl_pins())
    assert first == second
    data = json.loads(first)
    stored = data["packages"]["trl"]["versions"]["9.9.9"]
    assert stored["sha256"] == sha256_of(wheel)
    assert stored["file"] == wheel.name
    assert stored["clis"]["trl sft"]["flags"] == [
        "--accelerate_config",
        "--config",
        "--dataset_name",
        "--ds",
        "--max_length",
        "--no_packing",
        "--packing",
    ]
    assert stored["messages"] == ["max_length ({}) is too small for packing with these settings."]
    assert stored["env_vars"] == {"TRL_SYNTH_FLAG": "read"}
    assert stored["accelerate_presets"] == {"ddp": {"distributed_type": "MULTI_GPU", "num_processes": 8}}
    assert stored["requires_dist"] == ['vllm<=0.31.0,>=0.22.0; extra == "vllm"']

    # The member order inside the archive does not matter.
    reordered_dir = tmp_path / "reordered"
    _wheel(reordered_dir / wheel.name, SYNTHETIC_TRL, reverse=True)
    third = json.loads(refresh.refresh(reordered_dir, tmp_path / "other.json", offline=True, pins=_trl_pins()))
    for doc in (data, third):
        doc["packages"]["trl"]["versions"]["9.9.9"].pop("sha256")
    assert third == data


def test_refresh_rejects_an_archive_whose_hash_changed(tmp_path):
    wheel_dir = tmp_path / "wheels"
    wheel = _wheel(wheel_dir / "trl-9.9.9-py3-none-any.whl", SYNTHETIC_TRL)
    output = tmp_path / "facts.json"
    output.write_text(refresh.refresh(wheel_dir, output, offline=True, pins=_trl_pins()), encoding="utf-8")
    _wheel(wheel, {**SYNTHETIC_TRL, "trl/extra.py": "X = 1\n"})
    with pytest.raises(refresh.RefreshError, match="sha256"):
        refresh.refresh(wheel_dir, output, offline=True, pins=_trl_pins())
    # An explicit opt-in accepts the new archive.
    assert refresh.refresh(wheel_dir, output, offline=True, accept_new_hashes=True, pins=_trl_pins())


def test_refresh_offline_without_the_archive_fails_clearly(tmp_path):
    with pytest.raises(refresh.RefreshError, match="not in"):
        refresh.refresh(tmp_path / "empty", tmp_path / "facts.json", offline=True, pins=_trl_pins())


SYNTHETIC_VLLM = {
    "vllm/__init__.py": "",
    "vllm/envs.py": (
        "environment_variables = {\n"
        "    'VLLM_SERVER_DEV_MODE': lambda: False,\n"
        "    'VLLM_ALLOW_RUNTIME_LORA_UPDATING': lambda: False,\n}\n"
    ),
    "vllm/config/__init__.py": "",
    "vllm/config/lora.py": (
        "from dataclasses import dataclass\nfrom typing import Literal\n\n"
        "MaxLoRARanks = Literal[1, 8, 16]\n\n"
        "@dataclass\nclass LoRAConfig:\n"
        "    max_lora_rank: MaxLoRARanks = 16\n"
        "    fully_sharded_loras: bool = False\n"
        "    max_loras: int = 1\n\n"
        "    def __post_init__(self):\n"
        "        if self.max_loras < 1:\n"
        "            raise ValueError(f'max_loras ({self.max_loras}) must be at least one.')\n"
    ),
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": (
        "import argparse\nfrom dataclasses import dataclass\nfrom vllm.config.lora import LoRAConfig\n\n"
        "def get_kwargs(cls):\n    return {}\n\n"
        "@dataclass\nclass EngineArgs:\n"
        "    @staticmethod\n    def add_cli_args(parser):\n"
        "        lora_kwargs = get_kwargs(LoRAConfig)\n"
        "        group = parser.add_argument_group('LoRAConfig')\n"
        "        group.add_argument('--enable-lora', action=argparse.BooleanOptionalAction)\n"
        "        group.add_argument('--max-lora-rank', **lora_kwargs['max_lora_rank'])\n"
        "        group.add_argument('--fully-sharded-loras', '-fsl', **lora_kwargs['fully_sharded_loras'])\n"
        "        return parser\n\n"
        "class AsyncEngineArgs(EngineArgs):\n"
        "    @staticmethod\n    def add_cli_args(parser):\n"
        "        parser = EngineArgs.add_cli_args(parser)\n"
        "        parser.add_argument('--enable-log-requests', action=argparse.BooleanOptionalAction)\n"
        "        return parser\n"
    ),
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": (
        "from vllm.entrypoints.openai.cli_args import make_arg_parser\n\n"
        "class ServeSubcommand:\n"
        "    def subparser_init(self, subparsers):\n"
        "        serve_parser = subparsers.add_parser('serve')\n"
        "        serve_parser = make_arg_parser(serve_parser)\n"
        "        return serve_parser\n"
    ),
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/openai/cli_args.py": (
        "from dataclasses import dataclass\nfrom vllm.engine.arg_utils import AsyncEngineArgs, get_kwargs\n\n"
        "@dataclass\nclass FrontendArgs:\n"
        "    host: str | None = None\n"
        "    enable_auto_tool_choice: bool = False\n"
        "    allow_credentials: bool | str | None = None\n\n"
        "    @classmethod\n    def _customize_cli_kwargs(cls, frontend_kwargs):\n"
        "        frontend_kwargs['host']['flags'] = ['-H']\n"
        "        return frontend_kwargs\n\n"
        "    @classmethod\n    def add_cli_args(cls, parser):\n"
        "        frontend_kwargs = get_kwargs(cls)\n"
        "        frontend_kwargs = cls._customize_cli_kwargs(frontend_kwargs)\n"
        "        for key, value in frontend_kwargs.items():\n"
        "            extra_flags = value.pop('flags', [])\n"
        "            parser.add_argument(*extra_flags, f\"--{key.replace('_', '-')}\", **value)\n"
        "        return parser\n\n"
        "def make_arg_parser(parser):\n"
        "    parser.add_argument('--headless', action='store_true')\n"
        "    parser = FrontendArgs.add_cli_args(parser)\n"
        "    parser = AsyncEngineArgs.add_cli_args(parser)\n"
        "    return parser\n"
    ),
    "vllm/entrypoints/openai/api_server.py": (
        "from fastapi import APIRouter\nimport vllm.envs as envs\n"
        "from vllm.entrypoints.serve import register_dev_routers\n"
        "from vllm.entrypoints.serve.lora import attach_router as attach_lora_router\n\n"
        "scale_router = APIRouter()\n\n"
        "@scale_router.post('/render')\nasync def render():\n    return None\n\n"
        "def build_app(args, app):\n"
        "    attach_lora_router(app)\n"
        "    if envs.VLLM_SERVER_DEV_MODE:\n"
        "        register_dev_routers(app)\n"
        "    if getattr(args, 'enable_scale_out', False):\n"
        "        app.include_router(scale_router)\n\n"
        "    @app.get('/health')\n    async def health():\n        return None\n"
        "    return app\n"
    ),
    "vllm/entrypoints/serve/__init__.py": (
        "def register_dev_routers(app):\n"
        "    from vllm.entrypoints.serve.dev import attach_router\n"
        "    attach_router(app)\n"
    ),
    "vllm/entrypoints/serve/dev.py": (
        "from fastapi import APIRouter\nrouter = APIRouter()\n\n"
        "@router.get('/server_info')\nasync def server_info():\n    return None\n\n"
        "def attach_router(app):\n    app.include_router(router)\n"
    ),
    "vllm/entrypoints/serve/lora.py": (
        "from fastapi import APIRouter\nimport vllm.envs as envs\nrouter = APIRouter()\n\n"
        "def attach_router(app):\n"
        "    if not envs.VLLM_ALLOW_RUNTIME_LORA_UPDATING:\n        return\n\n"
        "    @router.post('/v1/load_lora_adapter')\n    async def load(request):\n"
        "        return None\n\n"
        "    app.include_router(router)\n"
    ),
}


def test_vllm_extractor_on_a_synthetic_wheel(tmp_path):
    wheel = _wheel(tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl", SYNTHETIC_VLLM)
    with SourceArchive(wheel) as archive:
        first = extract_vllm.extract(archive)
    with SourceArchive(wheel) as archive:
        second = extract_vllm.extract(archive)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    flags = first["clis"]["vllm serve"]["flags"]
    assert set(flags) == {
        "--headless",
        "--host",
        "-H",
        "--enable-auto-tool-choice",
        "--no-enable-auto-tool-choice",
        "--allow-credentials",  # bool | str | None takes an optional value: no --no- twin
        "--enable-lora",
        "--no-enable-lora",
        "--max-lora-rank",
        "--fully-sharded-loras",
        "-fsl",
        "--no-fully-sharded-loras",
        "--enable-log-requests",
        "--no-enable-log-requests",
    }
    assert flags["--max-lora-rank"]["choices"] == [1, 8, 16]
    assert flags["--max-lora-rank"]["field"] == "LoRAConfig.max_lora_rank"
    assert flags["--headless"]["takes_value"] is False
    routes = first["routes"]
    assert routes["/server_info"]["variants"][0]["env"] == ["VLLM_SERVER_DEV_MODE"]
    assert routes["/v1/load_lora_adapter"]["variants"][0]["env"] == ["VLLM_ALLOW_RUNTIME_LORA_UPDATING"]
    assert routes["/render"]["variants"][0]["flags"] == ["--enable-scale-out"]
    assert "conditions" not in routes["/health"]["variants"][0]
    assert set(first["env_vars"]) == {"VLLM_SERVER_DEV_MODE", "VLLM_ALLOW_RUNTIME_LORA_UPDATING"}
    assert "max_loras ({}) must be at least one." in first["messages"]
    assert first["classes"]["vllm.config.lora.LoRAConfig"]["fields"]["max_lora_rank"]["default"] == "16"


def test_diff_command_reports_what_changed_between_two_releases():
    result = subprocess.run(
        [sys.executable, str(TOOLS_DIR / "refresh_upstream_facts.py"), "--diff", "vllm", "0.31.0", "0.33.0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("vllm 0.31.0 -> 0.33.0\n")
    assert "  + --sleep-mode-backend\n" in result.stdout
    assert "  + /weight_checker\n" in result.stdout
    bad = subprocess.run(
        [sys.executable, str(TOOLS_DIR / "refresh_upstream_facts.py"), "--diff", "vllm", "0.31.0", "9.9.9"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "error" in bad.stderr


def test_facts_know_which_pinned_vllm_releases_trl_accepts(facts):
    """The 0.33.0 move: the facts hold its flags, and TRL 1.16's declared vllm range excludes it."""
    from packaging.requirements import Requirement

    trl = facts.version_facts("trl", "1.16.0")
    (line,) = [r for r in trl["requires_dist"] if r.startswith("vllm")]
    specifier = Requirement(line).specifier
    assert specifier.contains("0.27.1") and specifier.contains("0.31.0")
    assert not specifier.contains("0.33.0")
    assert len(facts.version_facts("vllm", "0.33.0")["clis"]["vllm serve"]["flags"]) > 400

"""diag_probes (check_optional_backends.py --probe-imports / --probe-torch): errors, hangs and crashes become
findings; each probe runs in its own subprocess with the offline variables and a timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostic_helpers import add_dist, add_fixture_dist, add_stack, backend, fake_nvidia_smi, run_script


@pytest.fixture
def probe_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_fixture_dist(site, "vllm-0.31.0", module_code='__version__ = "0.31.0"\n')
    add_dist(
        site,
        "deepspeed",
        "0.19.8",
        module_code=(
            "import sys\nsys.stderr.write('[WARNING] Setting accelerator to CPU\\n')\n"
            "raise ImportError('libcurand.so.10: cannot open shared object file: No such file or directory')\n"
        ),
    )
    add_dist(site, "bitsandbytes", "0.50.2", module_code="import time\ntime.sleep(120)\n")
    add_dist(
        site,
        "flash-attn",
        "2.8.3",
        modules=["flash_attn"],
        module_code="import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    )
    add_dist(site, "liger-kernel", "0.8.5", modules=["liger_kernel"], module_code="import os\nos.abort()\n")
    add_dist(
        site,
        "safetensors",
        "0.8.0",
        module_code=(
            "import os\n__version__ = '-'.join(os.environ.get(n, '') for n in "
            "('HF_HUB_OFFLINE', 'HF_HUB_DISABLE_UPDATE_CHECK', 'TRANSFORMERS_OFFLINE'))\n"
        ),
    )
    fake_nvidia_smi(tmp_path / "bin")
    return site


def test_import_probes_turn_errors_hangs_and_crashes_into_findings(probe_site: Path, tmp_path: Path) -> None:
    targets = "vllm,deepspeed,bitsandbytes,flash-attn,liger_kernel,safetensors"
    run = run_script(["--json", f"--probe-imports={targets}", "--timeout", "3"], [probe_site], tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.seconds < 25, run.seconds
    report = run.json()
    results = {r["package"]: r for r in report["probes"]["imports"]}
    assert sorted(results) == ["bitsandbytes", "deepspeed", "flash-attn", "liger-kernel", "safetensors", "vllm"]
    assert (results["vllm"]["status"], results["vllm"]["importable"], results["vllm"]["version"]) == (
        "ok",
        True,
        "0.31.0",
    )
    deepspeed = results["deepspeed"]
    assert (deepspeed["status"], deepspeed["error_type"]) == ("import_error", "ImportError")
    assert deepspeed["error"].startswith("libcurand.so.10: cannot open shared object file")
    assert "[WARNING] Setting accelerator to CPU" in deepspeed["stderr_tail"]
    assert results["bitsandbytes"]["status"] == "timeout"
    assert results["flash-attn"]["status"] == "crashed" and "SIGSEGV" in results["flash-attn"]["error"]
    assert results["liger-kernel"]["status"] == "crashed" and "SIGABRT" in results["liger-kernel"]["error"]
    assert results["safetensors"]["version"] == "1-1-1"  # the offline variables reached the child
    codes = {f["code"] for f in report["findings"]}
    assert {"import_import_error", "import_timeout", "import_crashed"} <= codes
    verdict = backend(report, "deepspeed")
    assert verdict["status"] == "unavailable"
    assert any("libcurand.so.10" in e for e in verdict["evidence"])
    assert backend(report, "flash-attn")["status"] == "unavailable"
    assert "imports not probed" not in report["verdict"]


def test_probe_imports_default_covers_installed_packages_only(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_dist(site, "requests", "2.32.3")
    add_dist(site, "aiohttp", "3.13.3")
    run = run_script(["--json", "--probe-imports"], [site], tmp=tmp_path)
    results = run.json()["probes"]["imports"]
    assert [(r["package"], r["status"]) for r in results] == [("requests", "ok"), ("aiohttp", "ok")]
    text = run_script(["--probe-imports"], [site], tmp=tmp_path).stdout
    assert "probe import ok: requests, aiohttp" in text


FAKE_TORCH = """\
__version__ = "2.13.0+cu128"


class _Version:
    cuda = "12.8"
    hip = None


version = _Version()


class _Props:
    def __init__(self, index):
        self.name = "NVIDIA H100 80GB HBM3"
        self.total_memory = 85520809984
        self.major, self.minor = 9, 0
        self.multi_processor_count = 132


def _no_allocation(*args, **kwargs):
    raise AssertionError("the torch probe must not allocate")


class _Nccl:
    @staticmethod
    def version():
        return (2, 27, 3)


class _Cuda:
    nccl = _Nccl()
    is_available = staticmethod(lambda: True)
    device_count = staticmethod(lambda: 2)
    get_device_properties = staticmethod(_Props)
    mem_get_info = staticmethod(_no_allocation)
    is_bf16_supported = staticmethod(_no_allocation)


class _Distributed:
    is_available = staticmethod(lambda: True)
    is_nccl_available = staticmethod(lambda: True)


cuda = _Cuda()
distributed = _Distributed()
empty = zeros = ones = tensor = _no_allocation
"""


def test_torch_probe_reads_properties_and_nccl(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH, encoding="utf-8")
    run = run_script(["--json", "--probe-torch", "--timeout", "20"], [site], tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    report = run.json()
    probe = report["probes"]["torch"]
    assert probe["status"] == "ok", probe
    assert (probe["cuda_available"], probe["device_count"], probe["nccl_version"]) == (True, 2, "2.27.3")
    assert probe["devices"][0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "total_memory_mib": 81559,
        "compute_capability": "9.0",
        "multi_processor_count": 132,
    }
    ddp = backend(report, "ddp")
    assert ddp["status"] == "ready"  # no nvidia-smi on PATH here: the probe is the evidence
    assert "NCCL available" in ddp["evidence"]
    text = run_script(["--probe-torch"], [site], tmp=tmp_path).stdout
    assert "probe torch: torch 2.13.0+cu128 imported" in text


def test_torch_probe_failure_is_reported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    (site / "torch" / "__init__.py").write_text(
        "raise OSError('libcudnn.so.9: cannot open shared object file')\n", encoding="utf-8"
    )
    report = run_script(["--json", "--probe-torch"], [site], tmp=tmp_path).json()
    assert report["probes"]["torch"]["error_type"] == "OSError"
    assert any(f["code"] == "torch_probe_ok" or "libcudnn" in f["message"] for f in report["findings"])

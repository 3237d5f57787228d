"""check_optional_backends.py: packages, compatibility derived from metadata, verdicts, JSON schema, CLI.

Every scenario builds a real fake site-packages tree and runs the script in a subprocess that sees only that tree.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import check_optional_backends as cob
import pytest
from diagnostic import base

from diagnostic_helpers import (
    SCHEMA,
    SCRIPT,
    add_dist,
    add_fixture_dist,
    add_stack,
    add_torch,
    add_trl,
    backend,
    compat_rows,
    fake_nvidia_smi,
    run_script,
    schema_errors,
)

# --- the vLLM range scenario: trl 1.16.0 + vllm 0.33.0 ----------------------------------------------------------------


@pytest.fixture
def vllm_too_new(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_fixture_dist(site, "vllm-0.33.0")
    return site


@pytest.mark.parametrize("with_packaging", [True, False], ids=["packaging", "fallback"])
def test_vllm_outside_trl_range_is_reported(vllm_too_new: Path, tmp_path: Path, with_packaging: bool) -> None:
    text = run_script([], [vllm_too_new], tmp=tmp_path, with_packaging=with_packaging)
    assert text.returncode == 0, text.stderr
    assert "vllm 0.33.0 is outside trl's supported range >=0.22.0,<=0.31.0" in text.stdout

    report = run_script(["--json"], [vllm_too_new], tmp=tmp_path, with_packaging=with_packaging).json()
    assert report["python"]["packaging"] is with_packaging
    [extra_row] = compat_rows(report, "vllm", kind="extra", extra="vllm")
    assert extra_row["status"] == "outside"
    assert extra_row["requirement"] == ">=0.22.0,<=0.31.0"
    assert extra_row["required_by"] == "trl 1.16.0 [vllm]"
    assert extra_row["installed"] == "0.33.0"
    [gate_row] = compat_rows(report, "vllm", kind="gate")
    assert gate_row["status"] == "outside"
    assert gate_row["source"].startswith("trl/import_utils.py (installed source")


def test_vllm_torch_pin_is_checked_against_installed_torch(vllm_too_new: Path, tmp_path: Path) -> None:
    report = run_script(["--json"], [vllm_too_new], tmp=tmp_path).json()
    [pin] = compat_rows(report, "torch", required_by="vllm 0.33.0")
    assert (pin["requirement"], pin["installed"], pin["status"]) == ("==2.14.0", "2.13.0", "outside")
    colocate = backend(report, "vllm-colocate")
    assert colocate["status"] == "unavailable"
    assert any("built for torch ==2.14.0" in e for e in colocate["evidence"])
    text = run_script([], [vllm_too_new], tmp=tmp_path).stdout
    assert "! torch 2.13.0 does not match vllm's pin ==2.14.0 [vllm 0.33.0]" in text
    compat = [line for line in text.splitlines() if line.startswith("  ! ")]
    assert sum("vllm 0.33.0 is outside trl's" in line for line in compat) == 1  # the code gate repeats the range


def test_vllm_inside_range_and_matching_pin_is_ready_with_gpus(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_fixture_dist(site, "vllm-0.31.0")
    add_dist(site, "requests", "2.32.3")
    add_dist(site, "aiohttp", "3.13.3")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    [extra_row] = compat_rows(report, "vllm", kind="extra", extra="vllm")
    assert extra_row["status"] == "ok"
    [pin] = compat_rows(report, "torch", required_by="vllm 0.31.0")
    assert pin["status"] == "ok"
    # vllm 0.31.0 pins transformers<5.18.0, so transformers 5.24.0 makes both vLLM paths "limited".
    colocate = backend(report, "vllm-colocate")
    assert colocate["status"] == "limited"
    assert "vllm requires transformers>=5.10.4,<5.18.0, installed 5.24.0" in colocate["evidence"]
    python = report["python"]["executable"]  # the install names the interpreter it is for
    assert colocate["next_step"] == f'{python} -m pip install "transformers>=5.10.4,<5.18.0"'
    shutil.rmtree(site / "transformers-5.24.0.dist-info")
    add_dist(site, "transformers", "5.17.0", requires=["huggingface-hub<3.0,>=1.31.0"], extras=["kernels"])
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    assert backend(report, "vllm-colocate")["status"] == "ready"
    server = backend(report, "vllm-server")
    assert server["status"] == "ready"
    assert any("check_vllm_server.py" in e for e in server["evidence"])


def _run_printed(command: str, site: Path) -> str:
    """The suggested command run as printed (the planner reads the same fake environment); its output."""
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(shlex.split(command), capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def test_nested_kernels_extra_is_resolved_through_transformers_metadata(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_fixture_dist(site, "kernels-0.17.2")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    rows = compat_rows(report, "kernels", kind="extra", extra="kernels")
    assert rows, report["compatibility"]
    assert rows[0]["required_by"] == "transformers 5.24.0 [kernels]"
    assert rows[0]["requirement"] == ">=0.18.2,<0.19"
    assert rows[0]["status"] == "outside"
    assert any(f["code"] == "nested_extra_absent" and "hub-kernels" in f["message"] for f in report["findings"])
    hub = backend(report, "hub-kernels")
    assert hub["status"] == "unavailable"
    # transformers 5.24.0 takes kernels >=0.18.2,<0.19: the planner moves kernels to 0.18.3 (on PyPI since 2026-11-12)
    python = report["python"]["executable"]
    assert hub["next_step"] == f"{python} {SCRIPT.parent / 'plan_install.py'} --want hub-kernels"
    assert "'trl[kernels]==1.16.0' kernels==0.18.3" in _run_printed(hub["next_step"], site)


# --- "too old" must never read as "not installed" ---------------------------------------------------------------------


def test_too_old_liger_is_reported_as_too_old(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_dist(site, "liger-kernel", "0.5.0", modules=["liger_kernel"])
    add_dist(site, "triton", "3.5.0")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    assert report["packages"]["liger-kernel"]["installed"] is True
    assert report["packages"]["liger-kernel"]["version"] == "0.5.0"
    liger = backend(report, "liger")
    assert liger["status"] == "unavailable"
    text = " ".join(liger["evidence"])
    assert "0.5.0" in text and ">=0.8.2" in text
    assert "not installed" not in text
    python = report["python"]["executable"]
    assert liger["next_step"] == f"{python} {SCRIPT.parent / 'plan_install.py'} --want liger"
    assert "'trl[liger]==1.16.0' liger-kernel==0.8.2" in _run_printed(liger["next_step"], site)
    plain = run_script([], [site], tmp=tmp_path).stdout
    liger_line = next(line for line in plain.splitlines() if line.strip().startswith("liger "))
    assert "not installed" not in liger_line and "0.5.0" in liger_line


def test_liger_in_range_is_limited_because_trl_deprecates_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_fixture_dist(site, "liger_kernel-0.8.5", modules=["liger_kernel"])
    add_dist(site, "triton", "3.5.0")
    fake_nvidia_smi(tmp_path / "bin")
    liger = backend(run_script(["--json"], [site], tmp=tmp_path).json(), "liger")
    assert liger["status"] == "limited"
    assert any("deprecates use_liger_kernel" in e for e in liger["evidence"])


# --- builds, GPUs and verdicts ----------------------------------------------------------------------------------------


def test_torch_build_is_read_from_version_py_without_import(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_torch(site, version="2.13.0+cu128", cuda="12.8")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    build = report["torch_build"]
    assert (build["version"], build["cuda"], build["hip"], build["kind"]) == ("2.13.0+cu128", "12.8", None, "cuda")
    assert build["source"] == "torch/version.py (ast)"
    rocm_site = tmp_path / "rocm"
    add_torch(rocm_site, version="2.13.0+rocm7.1", hip="7.1.25424")
    assert run_script(["--json"], [rocm_site], tmp=tmp_path).json()["torch_build"]["kind"] == "rocm"


def test_cpu_torch_on_gpu_machine_is_an_error_finding(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)  # CPU-only torch
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    assert any(f["code"] == "torch_cpu_build_with_gpu" for f in report["findings"])
    ddp = backend(report, "ddp")
    assert ddp["status"] == "limited"
    assert "CUDA" in ddp["next_step"]


def test_ready_verdict_needs_evidence_and_says_imports_were_not_probed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    assert backend(report, "ddp")["status"] == "ready"
    assert backend(report, "fsdp2")["status"] == "ready"
    peft = backend(report, "peft")
    assert peft["status"] == "ready"
    assert "import not probed" in peft["evidence"]
    assert "4x NVIDIA H100 80GB HBM3 (cc 9.0)" in peft["evidence"]
    assert "imports not probed" in report["verdict"]


def test_driver_older_than_torch_cuda_is_flagged(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_torch(site, version="2.13.0+cu130", cuda="13.0")
    fake_nvidia_smi(tmp_path / "bin")  # driver 550.54.15
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    [finding] = [f for f in report["findings"] if f["code"] == "driver_too_old"]
    assert ">= 580;" in finding["message"] and "550.54.15" in finding["message"]


# --- bare interpreter -------------------------------------------------------------------------------------------------


def test_bare_interpreter_reports_nothing_installed(tmp_path: Path) -> None:
    run = run_script([], [], tmp=tmp_path, extra_flags=("-S", "-I"))
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert "none of the training stack is installed" in run.stdout
    assert "\nVerdict (static checks; imports not probed: add --probe-imports):\n  ready: none\n" in run.stdout
    report = run_script(["--json"], [], tmp=tmp_path, extra_flags=("-S", "-I")).json()
    assert report["python"]["packaging"] is False
    assert not any(entry["installed"] for entry in report["packages"].values())
    assert report["findings"][0]["code"] == "nothing_installed"
    assert all(b["status"] == "unavailable" for b in report["backends"])


# --- JSON schema and output hygiene -----------------------------------------------------------------------------------


def test_json_output_matches_the_schema(vllm_too_new: Path, tmp_path: Path) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    fake_nvidia_smi(tmp_path / "bin")
    add_dist(vllm_too_new, "deepspeed", "0.19.8", with_module=False)
    for args in (["--json"], ["--json", "--verbose"]):
        report = run_script(args, [vllm_too_new], tmp=tmp_path).json()
        assert schema_errors(report, schema) == []
    bare = run_script(["--json"], [], tmp=tmp_path, extra_flags=("-S", "-I")).json()
    assert schema_errors(bare, schema) == []


def test_schema_checker_rejects_a_broken_report(vllm_too_new: Path, tmp_path: Path) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    report = run_script(["--json"], [vllm_too_new], tmp=tmp_path).json()
    report["backends"][0]["status"] = "usable"
    del report["accelerators"]["gpus"]
    report["packages"]["torch"]["surprise"] = 1
    errors = schema_errors(report, schema)
    assert any("usable" in e for e in errors)
    assert any("'gpus'" in e for e in errors)
    assert any("surprise" in e for e in errors)


def test_text_is_compact_plain_and_masks_home(vllm_too_new: Path, tmp_path: Path) -> None:
    fake_nvidia_smi(tmp_path / "bin")
    home = tmp_path / "home"
    run = run_script([], [vllm_too_new], tmp=tmp_path)
    lines = run.stdout.splitlines()
    assert len(lines) < 90, run.stdout  # wrapped at 100 columns
    assert "\x1b[" not in run.stdout
    assert str(home) not in run.stdout
    assert "~/.cache/huggingface/accelerate/default_config.yaml" in run.stdout
    verdict = max(i for i, line in enumerate(lines) if line.startswith("Verdict"))
    assert [line.split(":")[0] for line in lines[verdict + 1 :] if not line.startswith("    ")] == [
        "  ready",
        "  limited",
        "  unavailable",
    ]
    assert all(len(line) <= 100 for line in lines)
    verbose = run_script(["--verbose"], [vllm_too_new], tmp=tmp_path)
    assert str(home) in verbose.stdout
    again = run_script([], [vllm_too_new], tmp=tmp_path)

    def stable(text_lines):  # the header (possibly wrapped) carries the run time
        return [line for line in text_lines if not line.startswith(base.TOOL) and not line.endswith(" s")]

    assert stable(again.stdout.splitlines()) == stable(lines)  # stable ordering


# --- CLI contract -----------------------------------------------------------------------------------------------------


def test_help_mentions_every_flag_and_backend_id() -> None:
    parser = cob.build_parser()
    text = parser.format_help()
    flags = {opt for action in parser._actions for opt in action.option_strings}
    assert {"--json", "--require", "--probe-torch", "--probe-imports", "--timeout", "--accelerate-config"} <= flags
    for flag in flags:
        assert flag in text
    for backend_id in base.BACKEND_IDS:
        assert f"  {backend_id} " in text
    for word in ("exit codes", "HF_HUB_OFFLINE=1", "default_config.yaml"):
        assert word in text


def test_exit_codes(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    assert run_script(["--require", "ddp,peft"], [site], tmp=tmp_path).returncode == 0
    failing = run_script(["--require", "ddp,vllm-server"], [site], tmp=tmp_path)
    assert failing.returncode == 1
    assert failing.stdout.rstrip().splitlines()[-1] == "Require ddp,vllm-server: FAILED (vllm-server not ready)"
    assert run_script(["--json", "--require", "vllm-server"], [site], tmp=tmp_path).returncode == 1
    unknown = run_script(["--require", "ddp,warp-drive"], [site], tmp=tmp_path)
    assert unknown.returncode == 2 and "warp-drive" in unknown.stderr and unknown.stdout == ""
    assert run_script(["--no-such-flag"], [site], tmp=tmp_path).returncode == 2
    assert run_script(["--timeout", "soon"], [site], tmp=tmp_path).returncode == 2
    assert run_script(["--timeout", "0"], [site], tmp=tmp_path).returncode == 2
    assert run_script(["--probe-imports=nonsense"], [site], tmp=tmp_path).returncode == 2
    assert run_script(["--probe-imports="], [site], tmp=tmp_path).returncode == 2
    missing = run_script(["--accelerate-config", str(tmp_path / "nope.yaml")], [site], tmp=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert run_script(["--help"], [site], tmp=tmp_path).returncode == 0


def test_main_returns_codes_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert cob.main(["--require", "nope"]) == 2
    assert cob.main(["--bogus"]) == 2
    capsys.readouterr()


def test_display_specifier_orders_lower_bounds_first() -> None:
    assert base.display_specifier("<=0.31.0,>=0.22.0") == ">=0.22.0,<=0.31.0"
    assert base.display_specifier("<0.19,>=0.18.2") == ">=0.18.2,<0.19"
    assert base.display_specifier("") == ""


def test_trl_gate_table_is_used_only_for_its_exact_version(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    (site / "trl" / "import_utils.py").write_text("# compiled-only install: no readable gate\n", encoding="utf-8")
    add_fixture_dist(site, "vllm-0.33.0")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    [gate] = compat_rows(report, "vllm", kind="gate")
    assert gate["source"].startswith("table: trl-1.16.0")
    assert gate["status"] == "outside"


def test_trl_extras_from_another_release_are_read_not_assumed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_torch(site, cuda="12.8")
    add_trl(site, fixture="trl-1.14.0", low="0.20.0", high="0.30.0")
    add_fixture_dist(site, "vllm-0.31.0")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    [row] = compat_rows(report, "vllm", kind="extra")
    assert (row["requirement"], row["status"]) == (">=0.20.0,<=0.30.0", "outside")
    [gate] = compat_rows(report, "vllm", kind="gate")
    assert gate["requirement"] == ">=0.20.0,<=0.30.0"


def test_next_step_names_the_gate_range_when_trl_extra_would_not_upgrade(tmp_path: Path) -> None:
    """bitsandbytes 0.45.5 satisfies trl[quantization] (>=0.45.1) but not transformers' gate (>=0.46.1)."""
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_dist(site, "bitsandbytes", "0.45.5")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    qlora = backend(report, "qlora")
    assert qlora["status"] == "unavailable"
    assert any("bitsandbytes 0.45.5 is outside transformers 5.24.0's gate >=0.46.1" in e for e in qlora["evidence"])
    assert qlora["next_step"] == f'{report["python"]["executable"]} -m pip install "bitsandbytes>=0.46.1"'

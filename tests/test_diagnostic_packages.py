"""diag_packages (check_optional_backends.py): the metadata scan and install-consistency facts.

Every scenario builds a real fake site-packages tree and runs the script in a subprocess that sees only that tree.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from diagnostic import packages as diag_packages

from diagnostic_helpers import add_dist, add_fixture_dist, add_stack, backend, compat_rows, run_script


def test_inconsistent_installs_are_flagged(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    add_dist(site, "deepspeed", "0.19.8", with_module=False)  # metadata, no module
    (site / "bitsandbytes").mkdir()  # a module without metadata
    (site / "bitsandbytes" / "__init__.py").write_text("", encoding="utf-8")
    add_dist(site, "vllm", "0.31.0")  # two distributions of one module
    second = tmp_path / "second"
    add_dist(second, "vllm", "0.25.0", with_module=False)
    report = run_script(["--json"], [site, second], tmp=tmp_path).json()
    packages = report["packages"]
    codes = {pid: [p["code"] for p in entry["problems"]] for pid, entry in packages.items()}
    assert codes["deepspeed"] == ["metadata_without_module"]
    assert codes["bitsandbytes"] == ["module_without_metadata"]
    assert packages["bitsandbytes"]["installed"] is True and packages["bitsandbytes"]["version"] is None
    [bnb_row] = compat_rows(report, "bitsandbytes", kind="extra", extra="quantization")
    assert bnb_row["status"] == "unknown"  # importable without metadata: not "missing"
    assert codes["vllm"] == ["multiple_distributions"]
    assert packages["vllm"]["version"] == "0.31.0"  # first on sys.path, like importlib.metadata
    assert packages["vllm"]["other_distributions"][0]["version"] == "0.25.0"
    assert backend(report, "deepspeed")["status"] == "unavailable"
    assert "--force-reinstall" in backend(report, "deepspeed")["next_step"]


def test_shadowed_module_is_flagged(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    add_dist(site, "peft", "0.21.2", with_module=False, top_level=False)
    shadow = tmp_path / "shadow"
    (shadow / "peft").mkdir(parents=True)
    (shadow / "peft" / "__init__.py").write_text("", encoding="utf-8")
    report = run_script(["--json"], [shadow, site], tmp=tmp_path).json()
    [problem] = report["packages"]["peft"]["problems"]
    assert problem["code"] == "shadowed"


def test_corrupt_and_non_utf8_metadata_become_findings(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    add_dist(site, "deepspeed", "0.19.8", metadata_bytes=b"\x00\x01garbage without headers\xff\n")
    add_dist(
        site,
        "bitsandbytes",
        "0.50.2",
        metadata_bytes=b"Metadata-Version: 2.1\nName: bitsandbytes\nVersion: 0.50.2\nSummary: caf\xe9\n",
    )
    run = run_script(["--json"], [site], tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    report = run.json()
    deepspeed = report["packages"]["deepspeed"]
    assert [p["code"] for p in deepspeed["problems"]] == ["metadata_not_utf8", "metadata_corrupt"]
    assert deepspeed["version"] == "0.19.8" and deepspeed["version_source"] == "folder name"
    bnb = report["packages"]["bitsandbytes"]
    assert [p["code"] for p in bnb["problems"]] == ["metadata_not_utf8"]
    assert bnb["version"] == "0.50.2"
    assert any(f["severity"] == "error" and "not UTF-8" in f["message"] for f in report["findings"])
    text = run_script([], [site], tmp=tmp_path)
    assert text.returncode == 0 and "Traceback" not in text.stderr


def test_dist_info_without_record_or_top_level_still_reads(tmp_path: Path) -> None:
    """Scenario C'': some editable installs ship no RECORD; trl env crashes there (packages_distributions)."""
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    info = add_fixture_dist(site, "vllm-0.31.0", top_level=False)
    (info / "RECORD").unlink()
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    vllm = report["packages"]["vllm"]
    assert (vllm["version"], vllm["module_found"], vllm["problems"]) == ("0.31.0", True, [])


def test_editable_install_and_git_checkout_commit(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    checkout = tmp_path / "src" / "trl"
    shutil.move(str(site / "trl"), str(checkout / "trl"))
    info = next(site.glob("trl-*.dist-info"))
    (info / "direct_url.json").write_text(
        json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}}), encoding="utf-8"
    )
    git = checkout / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (git / "refs" / "heads" / "main").write_text("0123456789abcdef0123456789abcdef01234567\n", encoding="utf-8")
    report = run_script(["--json"], [site, checkout], tmp=tmp_path).json()
    trl = report["packages"]["trl"]
    assert trl["editable"] is True and trl["problems"] == []  # an editable checkout is not "shadowed"
    assert trl["git_commit"] == "0123456789abcdef0123456789abcdef01234567"
    text = run_script([], [site, checkout], tmp=tmp_path).stdout
    assert "trl 1.16.0+0123456 (editable)" in text


def test_leftover_directory_without_metadata_is_not_a_package(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site)
    (site / "vllm" / "model_executor").mkdir(parents=True)  # what an interrupted uninstall can leave behind
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    [problem] = report["packages"]["vllm"]["problems"]
    assert problem["code"] == "namespace_leftover"
    assert report["packages"]["vllm"]["installed"] is False
    verdict = backend(report, "vllm-colocate")
    assert verdict["status"] == "unavailable"
    python = report["python"]["executable"]
    assert verdict["next_step"].startswith(f"remove the folder {site / 'vllm'}, then {python} ")


def test_metadata_scan_agrees_with_importlib_metadata() -> None:
    """The hand-rolled lookup (one listing per sys.path entry) finds what importlib.metadata finds, in this venv."""
    import importlib.metadata
    import sys

    from common.versions import normalize_name

    scanned = diag_packages.scan_distributions(sys.path)
    expected = {}
    for dist in importlib.metadata.distributions():
        name = normalize_name(dist.metadata["Name"] or "")
        expected.setdefault(name, dist.version)
    assert expected, "the test venv has distributions"
    for name, version in expected.items():
        assert name in scanned, name
        assert scanned[name][0].version() == version, name
        assert importlib.metadata.version(name) == version

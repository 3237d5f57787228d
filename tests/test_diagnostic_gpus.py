"""check_optional_backends.py: nvidia-smi / rocm-smi handling and *_VISIBLE_DEVICES resolution.

Fake tools are real executables on PATH; the script runs in a subprocess that sees only them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostic import gpus as diag_gpus

from diagnostic_helpers import (
    DRIVER_FAILURE,
    H100_CSV,
    T4_CSV,
    add_dist,
    add_stack,
    backend,
    base_env,
    cat,
    fake_nvidia_smi,
    fake_rocm_smi,
    run_script,
    sleep,
    write_tool,
)

UUIDS = [
    "GPU-5c1e7c3a-0f5b-6a6e-8a6e-3b1c1d2e4f01",
    "GPU-8d2f9a41-7c3b-4e55-9f10-aa2b3c4d5e02",
    "GPU-8d2f1111-2222-3333-4444-555566667703",
    "GPU-e07b2c11-1d2e-3f4a-5b6c-7d8e9fa0b104",
]


# --- CUDA_VISIBLE_DEVICES, as torch 2.13.0 reads it -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected", "note"),
    [
        (None, [0, 1, 2, 3], "unset"),
        ("", [], "empty"),
        ("-1", [], "-1 hides every GPU"),
        ("0,2", [0, 2], None),
        (" 3 , 1", [3, 1], None),
        ("0,7,1", [0], "stops at 7: only 4 GPU(s) exist"),
        ("1,-1,2", [1], "stops at invalid entry '-1'"),
        ("2,x,3", [2], "stops at invalid entry 'x'"),
        ("1gpu2,2ampere", [1, 2], None),  # strtoul semantics, as in torch's parser
        ("0,1,0", [], "listed twice"),
        (UUIDS[3], [3], None),
        (f"{UUIDS[2]},{UUIDS[0]}", [2, 0], None),
        ("GPU-5c1e", [0], None),  # unique prefix
        ("GPU-e07b,GPU-8d2f", [3], "matches several GPUs"),  # ambiguous prefix stops the list
        ("GPU-ffff", [], "matches no GPU"),
        ("GPU-5c1e,1", [0], "every entry must start with GPU-"),
        (f"{UUIDS[1]},{UUIDS[1]}", [], "listed twice"),
        ("GPU-5c1e,GPU-5c1e7c3a", [], "twice"),  # two prefixes naming one GPU
    ],
)
def test_resolve_cuda_visible_devices(raw, expected, note) -> None:
    resolved, notes = diag_gpus.resolve_visible(raw, 4, UUIDS)
    assert resolved == expected
    if note:
        assert any(note in n for n in notes), notes


def test_resolve_without_a_gpu_list_reads_entries_only() -> None:
    assert diag_gpus.resolve_visible("0,7,1", None, []) == ([0, 7, 1], [])
    assert diag_gpus.resolve_visible(None, None, [])[0] is None


def test_resolve_mig_uuids_through_the_gpu_listing() -> None:
    parents = {"MIG-bbbbbbbb-5555-6666-7777-888888888888": 0, "MIG-dddddddd-5555-6666-7777-888888888888": 1}
    resolved, notes = diag_gpus.resolve_visible("MIG-dddd", 2, [None, None], parents)
    assert resolved == [1]
    assert any("MIG slice of GPU 1" in n for n in notes)
    resolved, notes = diag_gpus.resolve_visible("MIG-eeee", 2, [None, None], parents)
    assert resolved == [] and any("no unique MIG device" in n for n in notes)


# --- nvidia-smi output parsing ----------------------------------------------------------------------------------------


def test_parse_realistic_nvidia_csv() -> None:
    gpus, reason = diag_gpus.parse_nvidia_csv(H100_CSV, diag_gpus.NVIDIA_FIELDS)
    assert reason == ""
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    first = gpus[0]
    assert first["name"] == "NVIDIA H100 80GB HBM3"
    assert (first["memory_total_mib"], first["memory_used_mib"], first["memory_free_mib"]) == (81559, 4, 81004)
    assert (first["compute_capability"], first["driver"], first["uuid"]) == ("9.0", "550.54.15", UUIDS[0])


def test_parse_nvidia_csv_with_not_available_fields() -> None:
    line = "0, GPU-abc, NVIDIA A10G, [N/A], [N/A], [N/A], 535.54.03, [N/A]\n"
    [gpu], _ = diag_gpus.parse_nvidia_csv(line, diag_gpus.NVIDIA_FIELDS)
    assert gpu["memory_total_mib"] is None and gpu["compute_capability"] is None


@pytest.mark.parametrize(
    "garbage",
    ["Segmentation fault\n", "0, GPU-x, A100, lots, 1, 2, 550, 8.0\n", "0, GPU-x, A100, 1, 1, 1, 550, eight\n"],
)
def test_parse_nvidia_csv_rejects_garbage(garbage: str) -> None:
    gpus, reason = diag_gpus.parse_nvidia_csv(garbage, diag_gpus.NVIDIA_FIELDS)
    assert gpus is None and reason


# --- end to end with fake tools ---------------------------------------------------------------------------------------


def _env(tmp_path: Path, **extra: str) -> dict:
    env = base_env(tmp_path / "home", tmp_path / "bin")
    env.update(extra)
    return env


def test_nvidia_smi_gpus_and_visible_subset(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path, env=_env(tmp_path, CUDA_VISIBLE_DEVICES="0,2")).json()
    accel = report["accelerators"]
    assert accel["nvidia_smi"] == {"status": "ok", "detail": "4 GPU(s)"}
    assert accel["rocm_smi"]["status"] == "not_found"
    assert [g["visible"] for g in accel["gpus"]] == [True, False, True, False]
    assert all(g["bf16"] and g["flash_attn2_eligible"] for g in accel["gpus"])
    assert accel["visible_devices"]["resolved"] == [0, 2]
    assert accel["summary"]["visible_count"] == 2
    assert accel["summary"]["memory_total_mib"] == 2 * 81559
    assert accel["summary"]["memory_free_mib"] == 2 * 81004
    text = " ".join(run_script([], [site], tmp=tmp_path, env=_env(tmp_path, CUDA_VISIBLE_DEVICES="0,2")).stdout.split())
    assert "CUDA_VISIBLE_DEVICES='0,2' -> visible GPUs: 0, 2" in text
    assert (
        "GPU 0,1,2,3 (4x NVIDIA H100 80GB HBM3): 80 GiB each, cc 9.0, bf16, FA2 ok, driver 550.54.15; "
        "free 0:79 GiB 1:11 GiB 2:79 GiB 3:79 GiB; hidden: 1,3"
    ) in text


def test_gap_in_visible_devices_is_a_finding(tmp_path: Path) -> None:
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [], tmp=tmp_path, env=_env(tmp_path, CUDA_VISIBLE_DEVICES="0,7,1")).json()
    assert report["accelerators"]["visible_devices"]["resolved"] == [0]
    assert any(f["code"] == "visible_devices" and "stops at 7" in f["message"] for f in report["findings"])


@pytest.mark.parametrize("raw", ["", "-1"])
def test_hidden_gpus_are_a_finding_and_block_gpu_backends(tmp_path: Path, raw: str) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    fake_nvidia_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path, env=_env(tmp_path, CUDA_VISIBLE_DEVICES=raw)).json()
    assert report["accelerators"]["visible_devices"]["resolved"] == []
    assert any(f["code"] == "no_visible_gpu" for f in report["findings"])
    fsdp2 = backend(report, "fsdp2")
    assert fsdp2["status"] == "unavailable"
    assert any("none visible" in e for e in fsdp2["evidence"])


def test_mig_uuid_selects_its_parent_gpu(tmp_path: Path) -> None:
    csv = (
        "0, GPU-aaaaaaaa-1111-2222-3333-444444444444, NVIDIA A100-SXM4-80GB, 81920, 10, 81910, 550.54.15, 8.0\n"
        "1, GPU-cccccccc-1111-2222-3333-444444444444, NVIDIA A100-SXM4-80GB, 81920, 10, 81910, 550.54.15, 8.0\n"
    )
    fake_nvidia_smi(tmp_path / "bin", csv=csv)
    env = _env(tmp_path, CUDA_VISIBLE_DEVICES="MIG-dddddddd-5555-6666-7777-888888888888")
    report = run_script(["--json"], [], tmp=tmp_path, env=env).json()
    assert [g["visible"] for g in report["accelerators"]["gpus"]] == [False, True]


def test_garbage_nvidia_smi_output_is_unparsable_not_a_crash(tmp_path: Path) -> None:
    write_tool(tmp_path / "bin", "nvidia-smi", "echo 'Unknown Error'\necho '%%% binary junk'\n")
    run = run_script(["--json"], [], tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    status = run.json()["accelerators"]["nvidia_smi"]
    assert status["status"] == "unparsable"
    assert "Unknown Error" in status["detail"]


def test_driver_failure_message_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir(parents=True)
    (tmp_path / "bin" / "failure.txt").write_text(DRIVER_FAILURE, encoding="utf-8")
    write_tool(tmp_path / "bin", "nvidia-smi", f'"{cat()}" "{tmp_path / "bin" / "failure.txt"}"\nexit 9\n')
    report = run_script(["--json"], [], tmp=tmp_path).json()
    status = report["accelerators"]["nvidia_smi"]
    assert status["status"] == "failed"
    assert "couldn't communicate with the NVIDIA driver" in status["detail"]
    assert status["detail"].startswith("exit 9: NVIDIA-SMI has failed")
    assert any(f["code"] == "nvidia_smi_failed" for f in report["findings"])
    text = " ".join(run_script([], [], tmp=tmp_path).stdout.split())  # wrapped at 100 columns
    assert "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" in text


def test_hanging_nvidia_smi_is_cut_off_by_the_timeout(tmp_path: Path) -> None:
    # The hang is a grandchild holding the pipes: killing only the shell would not end the read.
    write_tool(tmp_path / "bin", "nvidia-smi", f'"{sleep()}" 60\necho late\n')
    write_tool(tmp_path / "bin", "rocm-smi", f'"{sleep()}" 60\n')
    run = run_script(["--json", "--timeout", "1"], [], tmp=tmp_path, timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.seconds < 8, run.seconds  # two 1 s timeouts; wide enough for a parallel run (not marked serial)
    accel = run.json()["accelerators"]
    assert accel["nvidia_smi"]["status"] == "timeout"
    assert accel["rocm_smi"]["status"] == "timeout"


def test_old_driver_without_compute_cap_field_is_retried(tmp_path: Path) -> None:
    csv = "0, GPU-11111111-2222-3333-4444-555555555555, Tesla V100-SXM2-16GB, 16160, 0, 16160, 470.82.01\n"
    (tmp_path / "bin").mkdir(parents=True)
    (tmp_path / "bin" / "old.csv").write_text(csv, encoding="utf-8")
    write_tool(
        tmp_path / "bin",
        "nvidia-smi",
        'case "$*" in *compute_cap*) echo \'Field "compute_cap" is not a valid field to query.\'; exit 2;; esac\n'
        f'"{cat()}" "{tmp_path / "bin" / "old.csv"}"\n',
    )
    report = run_script(["--json"], [], tmp=tmp_path).json()
    accel = report["accelerators"]
    assert accel["nvidia_smi"]["status"] == "ok"
    [gpu] = accel["gpus"]
    assert gpu["name"] == "Tesla V100-SXM2-16GB" and gpu["compute_capability"] is None and gpu["bf16"] is None


def test_turing_gpu_is_not_flash_attention_eligible(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda="12.8")
    add_dist(site, "flash-attn", "2.8.3", modules=["flash_attn"])
    fake_nvidia_smi(tmp_path / "bin", csv=T4_CSV)
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    [gpu] = report["accelerators"]["gpus"]
    assert (gpu["compute_capability"], gpu["bf16"], gpu["flash_attn2_eligible"]) == ("7.5", False, False)
    verdict = backend(report, "flash-attn")
    assert verdict["status"] == "unavailable"
    assert "no visible GPU has compute capability >= 8.0" in verdict["evidence"]


# --- ROCm -------------------------------------------------------------------------------------------------------------


def test_rocm_smi_gpus(tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_stack(site, torch_cuda=None)
    fake_rocm_smi(tmp_path / "bin")
    report = run_script(["--json"], [site], tmp=tmp_path).json()
    gpus = report["accelerators"]["gpus"]
    assert [(g["vendor"], g["name"], g["arch"]) for g in gpus] == [("amd", "AMD Instinct MI300X", "gfx942")] * 2
    assert gpus[0]["memory_total_mib"] == 196288 and gpus[0]["bf16"] and gpus[0]["flash_attn2_eligible"]
    assert gpus[0]["driver"] == "6.7.0"
    assert all(g["visible"] for g in gpus)
    assert any(f["code"] == "torch_cpu_build_with_gpu" for f in report["findings"])


@pytest.mark.parametrize(
    ("variables", "visible"),
    [
        ({"HIP_VISIBLE_DEVICES": "1"}, [False, True]),
        ({"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"}, [False, True]),
        ({"ROCR_VISIBLE_DEVICES": "GPU-2a3b4c5d6e7f8091"}, [False, True]),
        ({"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "1"}, [False, True]),
        ({"CUDA_VISIBLE_DEVICES": "1"}, [False, True]),
        ({"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}, [True, False]),
        ({"HIP_VISIBLE_DEVICES": ""}, [False, False]),
        ({"ROCR_VISIBLE_DEVICES": "-1"}, [False, False]),
    ],
)
def test_rocm_visible_devices_chain(tmp_path: Path, variables: dict, visible: list) -> None:
    fake_rocm_smi(tmp_path / "bin")
    report = run_script(["--json"], [], tmp=tmp_path, env=_env(tmp_path, **variables)).json()
    assert [g["visible"] for g in report["accelerators"]["gpus"]] == visible


def test_rocm_smi_garbage_is_unparsable(tmp_path: Path) -> None:
    write_tool(tmp_path / "bin", "rocm-smi", "echo 'ERROR: GPU[0] : Unable to read'\n")
    report = run_script(["--json"], [], tmp=tmp_path).json()
    assert report["accelerators"]["rocm_smi"]["status"] == "unparsable"


def test_visible_devices_parsing_is_linear_and_capped() -> None:
    """Issue 27: 20,000 (or 200,000) entries took seconds when each was checked against a list; now sets, and at
    most MAX_VISIBLE_ENTRIES entries are read (the report says so). A repeat inside the cap still hides every GPU."""
    import time

    for raw, uuids in (
        (",".join(str(i) for i in range(200_000)), [None] * 8),
        (",".join(f"GPU-{i:06d}" for i in range(200_000)), [f"GPU-{i:06d}" for i in range(8)]),
    ):
        started = time.perf_counter()
        picked, notes = diag_gpus.resolve_visible(raw, 8, uuids)
        assert time.perf_counter() - started < 0.5
        assert picked == list(range(8)) and "only the first 4,096 entries were read" in notes[0]
    assert diag_gpus.resolve_visible(",".join(["0", "1"] * 2000), 8, [None] * 8)[0] == []


# --- the query starts before the packages are read (issue: the default run's cost) ---------------------------------


def _slow_nvidia_smi(bin_dir: Path, seconds: float) -> None:
    (bin_dir / "h100.csv").parent.mkdir(parents=True, exist_ok=True)
    (bin_dir / "h100.csv").write_text(H100_CSV, encoding="utf-8")
    write_tool(bin_dir, "nvidia-smi", f'"{sleep()}" {seconds}\nexec "{cat()}" "{bin_dir / "h100.csv"}"\n')


@pytest.mark.serial
def test_a_started_query_answers_while_the_caller_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's time overlaps the caller's: started, then 0.6 s of other work, the answer is read at once."""
    import time

    _slow_nvidia_smi(tmp_path / "bin", 0.5)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    started = diag_gpus.start_nvidia_query()
    assert started is not None
    time.sleep(0.6)
    begin = time.monotonic()
    accel = diag_gpus.gather_accelerators({}, 5.0, started)
    assert time.monotonic() - begin < 0.4
    assert accel["nvidia_smi"]["status"] == "ok" and len(accel["gpus"]) == len(H100_CSV.strip().splitlines())
    assert accel == diag_gpus.gather_accelerators({}, 5.0)  # the same facts as a query run on the spot


@pytest.mark.serial
def test_a_started_query_times_out_from_its_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    _slow_nvidia_smi(tmp_path / "bin", 30)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    started = diag_gpus.start_nvidia_query()
    time.sleep(0.5)
    begin = time.monotonic()
    status, gpus = diag_gpus.query_nvidia(0.8, started)
    assert status["status"] == "timeout" and gpus == []
    assert time.monotonic() - begin < 0.7  # 0.3 s left of the 0.8 s, not a fresh 0.8 s
    assert started.process.poll() is not None  # killed, not left running


def test_no_nvidia_smi_starts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert diag_gpus.start_nvidia_query() is None


def test_collect_stops_the_started_query_when_gathering_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from diagnostic import report as diag_report
    from diagnostic.inputs import load_request

    _slow_nvidia_smi(tmp_path / "bin", 30)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    seen = []

    def start() -> object:
        seen.append(diag_gpus.start_nvidia_query())
        return seen[-1]

    def fail(_entries: object) -> None:
        raise RuntimeError("unreadable site-packages")

    monkeypatch.setattr(diag_report, "start_nvidia_query", start)
    monkeypatch.setattr(diag_report, "scan_distributions", fail)
    with pytest.raises(RuntimeError):
        diag_report.collect(load_request(), {})
    [started] = seen
    assert started.process.poll() is not None  # killed with its process group, not orphaned

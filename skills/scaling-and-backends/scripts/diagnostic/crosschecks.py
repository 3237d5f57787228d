"""Cross-checks between gathered facts that become findings (driver vs CUDA build, visible devices, launch
variables, ...).
"""

from __future__ import annotations

from typing import Any, Dict, List

from diagnostic.base import new_finding, version_tuple

# Minimum Linux driver for each CUDA major: NVIDIA "CUDA Compatibility", minor version compatibility table
# (11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580).
CUDA_MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580"}


def environment_findings(report: Dict[str, Any]) -> List[Dict[str, str]]:
    """Findings from packages, torch build vs GPUs/driver, visibility and the accelerate config."""
    findings: List[Dict[str, str]] = []
    for pid, entry in report["packages"].items():
        for problem in entry["problems"]:
            severity = "error" if problem["code"] in ("metadata_not_utf8", "metadata_without_module") else "warning"
            findings.append(new_finding(severity, problem["code"], f"{pid}: {problem['message']}"))
    for row in report["compatibility"]:
        if row["status"] == "outside" and row["kind"] == "dependency":
            findings.append(
                new_finding(
                    "warning",
                    "pin_outside",
                    f"{row['subject']} {row['installed']} does not satisfy {row['required_by']}'s requirement "
                    f"{row['requirement']}",
                )
            )
        elif row["status"] == "missing" and row["kind"] == "dependency":
            findings.append(
                new_finding(
                    "warning", "pin_missing", f"{row['required_by']} requires {row['subject']}, which is not installed"
                )
            )
    build, accel = report["torch_build"], report["accelerators"]
    nvidia = [g for g in accel["gpus"] if g["vendor"] == "nvidia"]
    amd = [g for g in accel["gpus"] if g["vendor"] == "amd"]
    if build["kind"] == "cpu" and (nvidia or amd):
        findings.append(
            new_finding(
                "error",
                "torch_cpu_build_with_gpu",
                f"torch {build['version']} is a CPU-only build, but {len(nvidia) + len(amd)} GPU(s) are present",
            )
        )
    if build["kind"] == "rocm" and nvidia and not amd:
        findings.append(
            new_finding("error", "torch_build_mismatch", "torch is a ROCm build on a machine with NVIDIA GPUs")
        )
    if build["kind"] == "cuda" and amd and not nvidia:
        findings.append(
            new_finding("error", "torch_build_mismatch", "torch is a CUDA build on a machine with AMD GPUs")
        )
    if build["kind"] == "cuda" and nvidia and build.get("cuda"):
        needed = CUDA_MIN_DRIVER.get((version_tuple(build["cuda"]) or (0,))[0])
        driver = next((g["driver"] for g in nvidia if g.get("driver")), None)
        if needed and driver and version_tuple(driver) < version_tuple(needed):
            findings.append(
                new_finding(
                    "error",
                    "driver_too_old",
                    f"torch is built with CUDA {build['cuda']}, which needs NVIDIA driver >= {needed}; "
                    f"installed {driver} (unless the CUDA forward-compatibility package is set up)",
                )
            )
    for tool in ("nvidia_smi", "rocm_smi"):
        status = accel[tool]
        if status["status"] in ("failed", "timeout", "unparsable"):
            findings.append(
                new_finding("warning", f"{tool}_{status['status']}", f"{tool.replace('_', '-')}: {status['detail']}")
            )
    visible_info = accel["visible_devices"]
    if accel["gpus"] and visible_info.get("resolved") == []:
        findings.append(
            new_finding(
                "warning",
                "no_visible_gpu",
                f"{len(accel['gpus'])} GPU(s) present, but {visible_info['variable'].split(',')[0]}="
                f"{visible_info['raw']!r} hides all of them",
            )
        )
    for note in visible_info.get("notes", []):
        if note.startswith("stops at") or "twice" in note or "mixed GPU" in note or ": stops at" in note:
            findings.append(new_finding("warning", "visible_devices", note))
    config = report["launch"]["accelerate_config"]
    if config["status"] in ("malformed", "not_regular", "too_large", "unreadable"):
        findings.append(
            new_finding(
                "error",
                "accelerate_config_malformed",
                f"accelerate config {config['path']}: {'; '.join(config['problems'])} "
                "(accelerate launch/env will fail)",
            )
        )
    elif config["status"] == "found":
        for problem in config["problems"]:
            findings.append(new_finding("warning", "accelerate_config", f"accelerate config: {problem}"))
        settings = config["settings"]
        visible = [g for g in accel["gpus"] if g.get("visible")]
        processes = settings.get("num_processes")
        dtype = settings.get("distributed_type")
        if (
            isinstance(processes, int)
            and accel["gpus"]
            and dtype in ("MULTI_GPU", "FSDP", "DEEPSPEED")
            and settings.get("num_machines", 1) in (1, None)
            and processes > len(visible)
        ):
            findings.append(
                new_finding(
                    "warning",
                    "accelerate_num_processes",
                    f"accelerate config asks for num_processes={processes} but {len(visible)} GPU(s) are visible",
                )
            )
        if settings.get("mixed_precision") == "bf16" and visible and not all(g.get("bf16") for g in visible):
            findings.append(
                new_finding(
                    "warning",
                    "bf16_unsupported",
                    "accelerate config uses bf16, but a visible GPU lacks bf16 (cc < 8.0)",
                )
            )
        if dtype == "DEEPSPEED" and not report["packages"]["deepspeed"]["installed"]:
            findings.append(
                new_finding(
                    "warning",
                    "accelerate_deepspeed_missing",
                    "accelerate config selects DEEPSPEED, but deepspeed is not installed",
                )
            )
    return findings

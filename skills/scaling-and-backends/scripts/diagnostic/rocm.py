"""``rocm-smi --json`` output read into the diagnostic's GPU records (AMD machines only: the module is imported
where rocm-smi answered)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from common.values import InvalidValue, integer, load_json

from diagnostic.base import GPU_MEMORY_MAX_MIB, first_line


def parse_rocm_json(text: str) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """Parse ``rocm-smi ... --json`` (keys differ between ROCm releases, so they are matched loosely)."""
    start = text.find("{")
    try:
        data = load_json(text[start:], "the output", max_depth=16) if start >= 0 else None
    except InvalidValue as error:
        return None, first_line(str(error), 160)
    if not isinstance(data, dict):
        return None, "not a JSON object"
    driver = None
    for key, value in data.items():
        if key.lower() == "system" and isinstance(value, dict):
            driver = next((str(v) for k, v in value.items() if "driver version" in k.lower()), None)
    gpus = []
    for key in sorted(data, key=lambda k: int(re.sub(r"\D", "", k)[:6] or 0)):
        match = re.fullmatch(r"card(\d{1,4})", key)
        value = data[key]
        if not match or not isinstance(value, dict):
            continue
        fields = {str(k).lower(): first_line(str(v), 200) for k, v in value.items() if not isinstance(v, (dict, list))}

        def pick(*names: str, _fields: Dict[str, str] = fields) -> Optional[str]:
            for name in names:
                for field, content in _fields.items():
                    if name in field and content and content.upper() != "N/A":
                        return content
            return None

        def mib(text_value: Optional[str]) -> Optional[int]:
            if text_value is None:
                return None
            try:
                return integer(text_value, "memory", 0, GPU_MEMORY_MAX_MIB * 1048576) // 1048576
            except InvalidValue:
                return None

        total = mib(pick("vram total memory (b)"))
        used = mib(pick("vram total used memory (b)"))
        unique = pick("unique id")
        arch = pick("gfx version")
        gpus.append(
            {
                "index": int(match.group(1)),
                "uuid": unique,
                "vendor": "amd",
                "name": pick("card series", "device name", "card model", "card sku") or "AMD GPU",
                "memory_total_mib": total,
                "memory_used_mib": used,
                "memory_free_mib": (total - used) if total is not None and used is not None else None,
                "compute_capability": None,
                "arch": arch.lower() if arch else None,
                "driver": driver or pick("driver version"),
            }
        )
    if not gpus:
        return None, "no cardN entries"
    return gpus, ""

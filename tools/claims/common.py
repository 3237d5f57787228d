"""Where the checker looks and the patterns that make inline code a claim."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
SKILL_DIR = REPO_ROOT / "skills" / "scaling-and-backends"
DEFAULT_FACTS = REPO_ROOT / "tests" / "facts" / "upstream_facts.json"
HISTORY_NAME = "release_history.json"  # beside the facts file
DEFAULT_ALLOWLIST = REPO_ROOT / "tests" / "claims_allowlist.txt"
SKILL_DIRS = ("backend-selection", "vllm-reference", "troubleshooting")
VERSIONS_HEADING = "Versions (time-sensitive)"
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
PYTHON_LANGS = {"python", "py", "python3", "pycon"}
YAML_LANGS = {"yaml", "yml"}
# Import-name -> distribution name in the facts file.
IMPORT_PACKAGES = {
    "trl": "trl",
    "vllm": "vllm",
    "accelerate": "accelerate",
    "peft": "peft",
    "transformers": "transformers",
    "deepspeed": "deepspeed",
    "bitsandbytes": "bitsandbytes",
    "liger_kernel": "liger-kernel",
    "kernels": "kernels",
    "huggingface_hub": "huggingface_hub",
}
# ``from transformers import X`` also reaches every model class (registered lazily from ``transformers/models``),
# and the facts hold only part of DeepSpeed's names: for these package roots the imported name is not judged.
UNJUDGED_ROOT_IMPORTS = ("transformers", "deepspeed")
# Which package wins when a class name exists in several (``ModelConfig`` is TRL's unless vllm is imported).
CLASS_PRIORITY = ("trl", "peft", "transformers", "accelerate", "vllm", "deepspeed")
NEAREST_COUNT = 3

FLAG_RE = re.compile(r"^--?[A-Za-z0-9][\w.-]*$")
ENV_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
SNAKE_RE = re.compile(r"^_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+$")
CLASS_RE = re.compile(r"^[A-Z][A-Za-z0-9]*(?:Config|Trainer|Arguments)$")
ROUTE_RE = re.compile(r"^(?:(GET|POST|PUT|DELETE|PATCH)\s+)?(/[A-Za-z0-9_{}<>.:-]*(?:/[A-Za-z0-9_{}<>.:-]*)*)$")
DOTTED_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
CALL_RE = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.S)
ASSIGN_RE = re.compile(r"^(--?[A-Za-z][\w.-]*|[A-Za-z_][\w.]*)=(.*)$", re.S)
LOCAL_URL_RE = re.compile(
    r"\bhttp://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\d+\.\d+\.\d+\.\d+|<[^<>/\s]+>|\$\{?\w+\}?)(?::[\w<>${}]+)?"
    r"(/[^\s\"'?#]*)"
)
KEY_VALUE_RE = re.compile(r"(?:^|[\s,(])([A-Za-z_][\w.]*)=")
YAML_PAIR_RE = re.compile(r"^([a-z][a-z0-9]*(?:_[a-z0-9]+)+):\s+\S")
CITATION_RE = re.compile(r"[\w.-]+/[\w.-]+#\d+|https?://\S+")
BUNDLE_SCRIPT_RE = re.compile(r"(?:^|/)scripts/([\w-]+\.py)$")
TRL_SCRIPT_RE = re.compile(r"(?:^|/)trl/scripts/(\w+)\.py$")
MARKER_RE = re.compile(r"^\s*<!--\s*check:\s*(.*?)\s*-->\s*$")
PLACEHOLDER_RE = re.compile(r"<[^<>\n]{1,60}>")
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXCEPTION_PREFIX_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit): ")

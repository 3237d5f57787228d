"""The planner's verdict: one judgement of a plan, from which the text, ``--json``, ``--require-fit`` and the exit
code are all rendered, so they cannot disagree.

A sibling module of ``plan_training.py`` (not a command); standard library only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # importing the siblings must not leave __pycache__ in scripts/

from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

_HERE = Path(__file__).resolve().parent.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from planner.assemble import Plan, chosen_change  # noqa: E402
from planner.hardware import GIB  # noqa: E402
from planner.inputs import PlanRequest  # noqa: E402
from planner.memory import host_condition, host_unchecked  # noqa: E402
from planner.rules import Finding  # noqa: E402

FITS = "fits"  # fits as asked: the requested method, without CPU offload, and the vLLM side
FITS_WITH_CHANGE = "fits-with-change"  # fits only with the named change (smaller step, adapters, offload)
DOES_NOT_FIT = "does-not-fit"  # no modelled change fits, or the vLLM side does not

# Exit codes. Without --require-fit or --require-lint-clean every report exits 0.
EXIT_OK = 0
EXIT_FAILED = 1  # --require-fit: does not fit; --require-lint-clean: a lint error
EXIT_USAGE = 2  # usage error or unusable input
EXIT_NEEDS_CHANGE = 3  # --require-fit: fits only with a change
FIT_EXIT_CODES = {FITS: EXIT_OK, FITS_WITH_CHANGE: EXIT_NEEDS_CHANGE, DOES_NOT_FIT: EXIT_FAILED}

# The exit codes as --help states them (EXIT_* above; tests/test_planner_verdict.py holds them equal).
EXIT_CODES_HELP = """\
exit codes: 0 report produced (and, with --require-fit, it fits as asked); 1 --require-fit and it
  does not fit (no modelled change fits, or the vLLM side does not), or --require-lint-clean found a
  lint error; 2 usage error or unusable input (unknown architecture, malformed YAML/JSON, impossible
  hardware); 3 --require-fit and it fits only with the change the verdict names (a smaller
  micro-batch, bf16 weights, LoRA/QLoRA or CPU offload). When both --require flags fail, 1 wins.
"""


@dataclass(frozen=True)
class FitVerdict:
    """What the plan says about fitting: the state, the candidate that fits (as asked, or under the change) and
    the change, when one is needed."""

    state: str
    summary: str  # one line, never "None"
    strategy: str = ""  # the candidate that fits: its label and method
    method: str = ""
    per_gpu_gib: float = 0.0
    change: str = ""  # the change to make, when the state is FITS_WITH_CHANGE
    changes_what_is_trained: bool = False
    host_ram_gib: Optional[float] = None  # CPU offload: host RAM per node it needs (upper edge)
    host_ram_checked: bool = True  # False: nobody gave --host-memory-gib, so the fit holds only if the RAM is there

    @property
    def exit_code(self) -> int:
        return FIT_EXIT_CODES[self.state]

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "state": self.state,
            "summary": self.summary,
            "exit_code_with_require_fit": self.exit_code,
        }
        if self.state != DOES_NOT_FIT:
            out.update(strategy=self.strategy, method=self.method, per_gpu_gib=round(self.per_gpu_gib, 2))
        if self.state == FITS_WITH_CHANGE:
            out.update(change=self.change, changes_what_is_trained=self.changes_what_is_trained)
        if self.host_ram_gib is not None:
            out.update(host_ram_per_node_gib=round(self.host_ram_gib, 1), host_ram_checked=self.host_ram_checked)
        return out


def judge_fit(plan: Plan) -> FitVerdict:
    vllm_short = plan.vllm is not None and not plan.vllm.fits
    if vllm_short:
        return FitVerdict(
            DOES_NOT_FIT,
            "does not fit: the vLLM side cannot hold one sequence at max_model_len (see the vLLM line above)",
        )
    if plan.recommended is not None:
        r = plan.recommended
        return FitVerdict(
            FITS,
            f"fits as asked: {r.label} ({r.method}), {r.total_bytes / GIB:.1f} GiB per GPU",
            r.label,
            r.method,
            r.total_bytes / GIB,
        )
    change = chosen_change(plan.changes)
    if change is None:
        return FitVerdict(
            DOES_NOT_FIT,
            "does not fit: no modelled change fits (more GPUs, a shorter sequence, or a smaller model)",
        )
    c = change.candidate
    what = c.method if c.label in change.label else f"{c.method}, {c.label}"
    trained = "; changes what is trained, ask the user" if change.changes_training else ""
    host = f", {host_condition(c)}" if host_unchecked(c) else ""
    offload = "offload" in c.strategy and c.host_upper is not None
    return FitVerdict(
        FITS_WITH_CHANGE,
        f"fits only with a change: {change.label} ({what}), {c.total_bytes / GIB:.1f} GiB per GPU{host}{trained}",
        c.label,
        c.method,
        c.total_bytes / GIB,
        change.label,
        change.changes_training,
        (c.host_upper or 0) / GIB if offload else None,
        c.host_checked,
    )


@dataclass(frozen=True)
class Verdict:
    """The whole judgement: fit (when a plan was made), lint errors (when the lint ran) and the exit code."""

    fit: Optional[FitVerdict]
    lint_ran: bool
    lint_errors: Tuple[str, ...]
    lint_warnings: Tuple[str, ...]
    require_fit: bool
    require_lint_clean: bool

    @property
    def fit_gate_failed(self) -> bool:
        return self.require_fit and self.fit is not None and self.fit.state != FITS

    @property
    def lint_gate_failed(self) -> bool:
        return self.require_lint_clean and self.lint_ran and bool(self.lint_errors)

    @property
    def exit_code(self) -> int:
        if self.lint_gate_failed or (self.fit_gate_failed and self.fit is not None and self.fit.state == DOES_NOT_FIT):
            return EXIT_FAILED
        if self.fit_gate_failed:
            return EXIT_NEEDS_CHANGE
        return EXIT_OK

    def lines(self) -> List[str]:
        """The last lines of the text, always in this order: the fit, the lint's named errors, the gates."""
        out: List[str] = []
        if self.fit is not None:
            out.append(f"Verdict: {self.fit.summary}")
        if self.lint_ran:
            out.append(f"Lint: errors: {', '.join(self.lint_errors) or 'none'}")
            out.append(f"  warnings: {', '.join(self.lint_warnings) or 'none'}")
        if self.require_fit and self.fit is not None:
            if self.fit.state == FITS:
                out.append("Require fit: met (fits as asked)")
            elif self.fit.state == FITS_WITH_CHANGE:
                out.append(
                    f"Require fit: FAILED (exit {EXIT_NEEDS_CHANGE}: fits only with a change: {self.fit.change})"
                )
            else:
                out.append(f"Require fit: FAILED (exit {EXIT_FAILED}: does not fit)")
        if self.require_lint_clean and self.lint_ran:
            out.append(f"Require lint clean: {'FAILED (lint errors above)' if self.lint_errors else 'met'}")
        return out


def judge(request: PlanRequest, plan: Optional[Plan], findings: List[Finding]) -> Verdict:
    return Verdict(
        fit=judge_fit(plan) if plan is not None else None,
        lint_ran=request.linting,
        lint_errors=tuple(dict.fromkeys(f.id for f in findings if f.severity == "error")),
        lint_warnings=tuple(dict.fromkeys(f.id for f in findings if f.severity == "warning")),
        require_fit=request.require_fit,
        require_lint_clean=request.require_lint_clean,
    )

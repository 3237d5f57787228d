"""tools/refresh_window.py: what the plan asks to extend, from given registry answers (no network)."""

from __future__ import annotations

import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import refresh_window as rw  # noqa: E402

HISTORY = {"trl": ["1.15.0", "1.16.0"], "vllm": ["0.31.0", "0.33.0"]}
PINS = {"trl": ["1.16.0"], "vllm": ["0.31.0", "0.27.1", "0.33.0"], "kernels": ["0.17.2"], "huggingface_hub": ["2.4.0"]}
WINDOW = {"trl": ">=1.0.0,<1.17", "vllm": ">=0.10.2,<=0.33.0", "transformers": ">=4.56.0,<5.25"}
CAPS = {"torch": "<=2.14.1"}


def _plan(newest):
    return {(e.package, e.where.split(" in ")[0]): e.change for e in rw.plan(newest, HISTORY, PINS, WINDOW, CAPS)}


def test_nothing_to_extend_when_the_windows_reach_the_newest():
    newest = {"trl": "1.16.0", "vllm": "0.33.0", "transformers": "5.24.0", "torch": "2.14.1", "kernels": "0.17.2"}
    assert rw.plan(newest, HISTORY, PINS, WINDOW, CAPS) == []
    assert rw.render_plan([]) == ["the windows reach the newest release of every package on the registry"]


def test_new_releases_name_each_constant_and_its_new_value():
    newest = {
        "trl": "1.16.0",
        "vllm": "0.34.0",
        "transformers": "5.25.0",
        "torch": "2.15.0",
        "kernels": "0.19.1",
        "huggingface-hub": "2.4.0",
    }
    assert _plan(newest) == {
        ("vllm", "WINDOW['vllm']"): ">=0.10.2,<=0.34.0",
        ("transformers", "WINDOW['transformers']"): ">=4.56.0,<5.26",
        ("torch", "ACCEPTED_CAP['torch']"): "<2.16",
        ("vllm", "HISTORY['vllm']"): "append 0.34.0",
        # the vLLM primary stays the newest release TRL's extra accepts: the newest is an added pin
        ("vllm", "PINS"): 'add Pin("vllm", "0.34.0") after the primary 0.31.0',
        ("kernels", "PINS"): "kernels 0.17.2 -> 0.19.1 (the primary pin)",
    }


def test_a_patch_release_replaces_its_minor_in_the_history_and_a_new_trl_minor_moves_the_window():
    newest = {"trl": "1.17.1", "vllm": "0.33.1"}
    plan = _plan(newest)
    assert plan[("trl", "WINDOW['trl']")] == ">=1.0.0,<1.18"
    assert plan[("trl", "HISTORY['trl']")] == "append 1.17.1"
    assert plan[("vllm", "HISTORY['vllm']")] == "replace 0.33.0 with 0.33.1"
    assert plan[("trl", "PINS")] == "trl 1.16.0 -> 1.17.1 (the primary pin)"
    lines = rw.render_plan(rw.plan(newest, HISTORY, PINS, WINDOW, CAPS))
    assert lines[0] == "6 window(s) to extend before regenerating:"
    assert "  trl 1.17.1: WINDOW['trl'] in tools/stack_matrix.py: >=1.0.0,<1.18" in lines


def test_older_or_missing_answers_extend_nothing():
    # vLLM 0.32.0 lies inside the window and before the last indexed release: the history skips it on purpose
    assert rw.plan({"trl": "1.15.0", "vllm": "0.32.0", "kernels": "0.17.1"}, HISTORY, PINS, WINDOW, CAPS) == []
    assert rw.plan({}, HISTORY, PINS, WINDOW, CAPS) == []


def test_the_steps_run_in_the_order_each_reads_the_one_before():
    labels = [label for label, _argv, _check in rw.STEPS]
    assert labels.index("upstream facts and release history") < labels.index("stack matrix")
    assert labels.index("stack matrix") < labels.index("release differences") < labels.index("triage index")
    assert labels[-1] == "skill text scope checks"
    assert all(Path(rw.REPO_ROOT, argv[0]).is_file() for _label, argv, _check in rw.STEPS if argv[0] != "-m")

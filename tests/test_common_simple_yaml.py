"""scripts/common/simple_yaml.py: the built-in YAML reader agrees with PyYAML or refuses; ``load`` prefers PyYAML."""

from __future__ import annotations

import datetime
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List

import pytest
import yaml
from common import simple_yaml
from common.simple_yaml import YamlError

from conftest import REPO_ROOT, SCRIPTS_DIR

# TRL 1.16's shipped Accelerate presets (tests/fixtures/diagnostic/README.md) and the lint fixtures.
PRESETS = sorted((REPO_ROOT / "tests" / "fixtures" / "diagnostic" / "accelerate").glob("*.yaml"))
LINT_CONFIGS = sorted((REPO_ROOT / "tests" / "fixtures" / "lint").rglob("*.yaml"))
FILES = {str(path.relative_to(REPO_ROOT)): path.read_text(encoding="utf-8") for path in PRESETS + LINT_CONFIGS}


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types, keys in the same order (1, 1.0 and True are told apart; nan equals nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items())
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# --- the corpus: the builtin reader accepts every snippet and reads it exactly as PyYAML's safe_load --------------

SNIPPETS = {
    # what the diagnostic's own reader was tested on
    "accelerate-booleans": "distributed_type: NO\nuse_cpu: yes\nnum_processes: 2\n",
    "scalars": "a: ~\nb: 'it''s'\nc: \"x\\ty\"\nd: 1.5\ne: -3\nf: {}\ng: [1, two]\n",
    "addresses": "gpu_ids: 0,1\nmain_process_ip: 10.0.0.1\nmain_process_port: 29500\n",
    "comments-and-list": "# comment\nfsdp_config:\n  fsdp_version: 2  # inline comment\n"
    "commands:\n- echo a\n- echo b\n",
    # what plan_training's reader was tested on
    "accelerate-quoted": "compute_environment: LOCAL_MACHINE\ndistributed_type: \"NO\"\ndowncast_bf16: 'no'\n"
    "gpu_ids: all\nmixed_precision: 'bf16'\nnum_processes: 8\ntpu_env: []\nuse_cpu: false\n",
    "deepspeed": "deepspeed_config:\n  zero_stage: 3\n  offload_param_device: none  # comment\n"
    "  zero3_init_flag: true\ndistributed_type: DEEPSPEED\nnum_processes: 4\n",
    "trl-config": "model_name_or_path: Qwen/Qwen2.5-0.5B\nlearning_rate: 2.0e-5\nlora_target_modules:\n  - q_proj\n"
    "  - v_proj\nenv:\n  WANDB_PROJECT: test\nreward_funcs: [accuracy, 'format']\n"
    "model_init_kwargs: {dtype: bfloat16, use_kernels: true}\n"
    "bf16: True\nbeta: 0.04\nnull_value: ~\nurl: http://localhost:8000\n",
    "sequence-of-mappings": 'items:\n- name: a\n  value: 1\n- name: b\n  value: 2\nquoted: "a # not a comment"\n',
    # YAML 1.1 scalars as PyYAML resolves them
    "yaml11-booleans": "a: On\nb: OFF\nc: y\nd: n\ne: Y\nf: TRUE\ng: tRue\n",
    "yaml11-ints": "dec: 1_000\noct: 0755\nnot_oct: 08\nhex: 0x1F\nbin: -0b101\nbase60: 1:30\nplus: +7\nzero: -0\n",
    "yaml11-floats": "a: 1e5\nb: 1.0e5\nc: 1.0e+5\nd: 2.0e-5\ne: .5\nf: -.5\ng: 1.\nh: 1:30.5\ni: 1_0.5\n",
    "special-floats": "a: .inf\nb: -.Inf\nc: .NaN\nd: .nan\ne: +.INF\nf: .iNf\n",
    "timestamps": "day: 2024-01-01\nloose: 2024-1-1\nutc: 2001-12-14t21:59:43.10Z\n"
    "offset: 2001-12-14 21:59:43.10 -5\nplain: 2001-12-14T21:59:43\n",
    "nulls": "a:\nb: ~\nc: null\nd: Null\ne: NULL\nf: nULL\ng: # only a comment\n",
    "strings-like-numbers": "a: 0.0.1\nb: 1__\nc: e5\nd: 0o17\ne: 12:30:99\nf: v1.2\ng: '1'\nh: \"yes\"\n",
    "keys-resolve": "2: int\n1.5: float\non: bool\n~: none\n2024-01-01: date\n'2': quoted\n",
    "keys-with-punctuation": "a b: 1\na,b: 2\nit's: 3\na#b: 4\nhttp://x: 5\n-k: 6\nb[0]: 7\n",
    "quoted-keys": "'a': 1\n\"b c\": 2\n'd' : 3\n",
    "apostrophes-and-comments": "a: don't # a comment\nb: x 'y' # c\nc: 'q' # c\nd: [1, 2] # c\ne: \"z\"#c\n",
    "double-quoted-escapes": 'a: "\\u00e9\\x41\\U0001F600"\nb: "\\0\\a\\b\\e\\N\\_\\L\\P\\/\\\\"\nc: "tab\there"\n',
    "single-quoted": "a: ''\nb: 'a \"b\" c'\nc: '#not a comment'\nd: '  padded  '\n",
    "flow-collections": "a: [a, ]\nb: {x: 1, }\nc: {x: 1, y}\nd: {x: , y: 1}\ne: [ ]\nf: [[1, [2]], {k: [v]}]\n"
    'g: {"j":1}\nh: {a:1}\ni: [http://x:8000, a:b]\n',
    "nested-sequences": "- - a\n  - b\n- c\n- -   d\n  -   - e\n",
    "sequence-items": "-\n  a: 1\n- # comment\n  - x\n-\n- 'q'\n- [1]\n-   k: v\n    j: w\n",
    "sequence-under-key": "a:\n- 1\n- 2\nb:\n  - c: 1\n    d:\n    - e\n",
    "plain-scalar-doc": "just text # and a comment\n",
    "flow-doc": "[1, {a: b}]\n",
    "document-markers": "--- # start\na: 1\n... # end\n",
    "byte-order-mark": "\ufeffa: 1\n",
    "crlf": "a: 1\r\nb:\r\n  - x\r\n",
    "empty": "",
    "only-comments": "# nothing\n\n   # here\n",
    "only-start-marker": "---\n",
    "value-on-next-line": "a:\n  hello\nb: 1\n",
    "dashes-and-colons-in-values": "a: -x\nb: ?x\nc: :x\nd: x:y\ne: ---\nf: a -b\n",
    "tabs-in-comments": "a: 1 #\tcomment\n#\tline\n",
}
CORPUS = {**{f"snippet:{k}": v for k, v in SNIPPETS.items()}, **{f"file:{k}": v for k, v in FILES.items()}}


def test_the_corpus_holds_the_presets_and_the_lint_fixtures() -> None:
    assert len(PRESETS) == 7, PRESETS  # trl-1.16.0 trl/accelerate_configs/*.yaml
    assert len(LINT_CONFIGS) >= 20, LINT_CONFIGS


@pytest.mark.parametrize("text", CORPUS.values(), ids=CORPUS.keys())
def test_builtin_reads_the_corpus_exactly_like_pyyaml(text: str) -> None:
    assert same(simple_yaml.parse(text), yaml.safe_load(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("distributed_type: NO\n", {"distributed_type": False}),
        ("a: y\nb: n\n", {"a": "y", "b": "n"}),  # YAML 1.1 in PyYAML: y/n are strings
        ("a: 1e5\nb: 1.0e-5\n", {"a": "1e5", "b": 1.0e-5}),  # a float needs a dot and a signed exponent
        ("a: 0755\nb: 1:30\n", {"a": 493, "b": 90}),
        ("a: 2024-01-01\n", {"a": datetime.date(2024, 1, 1)}),
        ("{1: a, 'b': 2}\n", {1: "a", "b": 2}),
        ("- [a, {b: [c]}]\n", [["a", {"b": ["c"]}]]),
    ],
)
def test_values_that_decide_configs(text: str, expected: Any) -> None:
    assert same(simple_yaml.parse(text), expected)


# --- refusals: a clear error with the line, never a guess ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: 1\n\tb: 2\n", 2, "tab characters are not allowed in YAML indentation"),
        ("a:\tb\n", 1, "tab characters are allowed only inside quoted strings and comments"),
        ("a: 1\na: 2\n", 2, "duplicate key 'a'"),
        ("a: {x: 1, x: 2}\n", 1, "duplicate key 'x'"),
        ("on: 1\nyes: 2\n", 2, "duplicate key True"),
        ("a: 1\n---\nb: 2\n", 2, "several YAML documents in one file are not supported"),
        ("---\n---\n", 2, "several YAML documents in one file are not supported"),
        ("a: 1\n...\nb: 2\n", 3, "several YAML documents in one file are not supported"),
        ("a: |\n  text\n", 1, "block scalars (| or >) are not supported by the built-in parser; install PyYAML"),
        ("a: >-\n  text\n", 1, "block scalars (| or >) are not supported by the built-in parser; install PyYAML"),
        ("a: &anchor 1\n", 1, "anchors, aliases and tags are not supported by the built-in parser; install PyYAML"),
        ("a: 1\nb: *anchor\n", 2, "anchors, aliases and tags are not supported"),
        ("a: !!str 1\n", 1, "anchors, aliases and tags are not supported"),
        ("<<: {a: 1}\n", 1, "'<<' (a YAML merge or value key) is not supported"),
        ("? a\n: 1\n", 1, "a complex mapping key ('?') is not allowed here"),
        ("%YAML 1.1\n---\na: 1\n", 1, "directives (%YAML, %TAG) are not supported"),
        ("a: [1, 2\n", 1, "expected ',' or ']' in a flow sequence"),
        ("a: {b: 1\n", 1, "expected ',' or '}' in a flow mapping"),
        ("a: [1,,2]\n", 1, "expected a value"),
        ("a: 'open\n", 1, "unterminated '-quoted string"),
        ('a: "open\n', 1, 'unterminated "-quoted string'),
        ('a: "\\q"\n', 1, "unknown escape sequence in a double-quoted string: '\\\\q'"),
        ("a: 'x' y\n", 1, "unexpected text after a value: 'y'"),
        ("key without colon\nb: 1\n", 2, "expected a mapping key ('key: value')"),
        ("a: 1\n   b: 2\n", 2, "bad indentation of a mapping entry"),
        ("  a: 1\nb: 2\n", 2, "bad indentation"),
        ("a: b: c\n", 1, "mapping values are not allowed here"),
        ("a: - b\n", 1, "a sequence cannot start on the same line as a mapping key"),
        ("a:\n  - x\n  b: 1\n", 3, "bad indentation of a mapping entry"),
        ("- a\nb: 1\n", 2, "bad indentation"),
        ("a: @x\n", 1, "a plain value cannot start with '@'"),
        ("a: [:x]\n", 1, "a ':' that starts a value inside a flow collection is not supported"),
        ("a: [a?b]\n", 1, "'?' inside a flow collection is not supported"),
        ("...\na: 1\n", 1, "a '...' document end marker before the document"),
        ("--- a: 1\n", 1, "content on the '---' line is not supported"),
        ("a: 0b_\n", 1, "cannot read '0b_'"),
        ("a: 2024-13-01\n", 1, "cannot read '2024-13-01': month must be in 1..12"),
        ("a: b\x07\n", 1, "character 0x0007 is not allowed in YAML"),
        ("a: " + "[" * 5000 + "\n", None, "deeply nested collections are not supported"),
    ],
)
def test_builtin_refuses_with_the_line(text: str, line: Any, message: str) -> None:
    with pytest.raises(YamlError) as caught:
        simple_yaml.parse(text)
    error = caught.value
    assert message in error.message
    assert error.line == line and error.parser == "builtin"
    assert str(error) == (error.message if line is None else f"line {line}: {error.message}")


def test_yaml_error_is_a_value_error() -> None:
    error = YamlError("bad", 3)
    assert isinstance(error, ValueError) and str(error) == "line 3: bad" and error.line == 3


# --- load(): PyYAML first, the built-in reader without it ---------------------------------------------------------


def test_load_prefers_pyyaml_and_can_be_told_not_to() -> None:
    assert simple_yaml.pyyaml_available()
    assert simple_yaml.load("a: 1\n") == ({"a": 1}, "pyyaml")
    assert simple_yaml.load("a: 1\n", prefer_pyyaml=False) == ({"a": 1}, "builtin")
    assert simple_yaml.load("", prefer_pyyaml=False) == (None, "builtin")


@pytest.mark.parametrize("prefer_pyyaml", [True, False], ids=["pyyaml", "builtin"])
def test_load_turns_every_failure_into_a_yaml_error(prefer_pyyaml: bool) -> None:
    with pytest.raises(YamlError) as caught:
        simple_yaml.load("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n   bad: [1, 2\n", prefer_pyyaml)
    error = caught.value
    assert error.line == 4
    assert error.parser == ("pyyaml" if prefer_pyyaml else "builtin")
    if prefer_pyyaml:
        assert isinstance(error.__cause__, yaml.YAMLError)
        assert error.message == error.__cause__.problem


def test_load_turns_pyyaml_value_errors_into_yaml_errors() -> None:
    with pytest.raises(YamlError) as caught:
        simple_yaml.load("a: 2024-13-01\n")  # PyYAML raises a bare ValueError from datetime.date
    assert caught.value.parser == "pyyaml" and caught.value.line is None
    assert caught.value.message == "month must be in 1..12"
    assert isinstance(caught.value.__cause__, ValueError)


def test_load_without_pyyaml_uses_the_builtin_reader(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(SCRIPTS_DIR)!r})\n"
        "from common import simple_yaml\n"
        "data, parser = simple_yaml.load('a: [1, 2]\\nb: yes\\n')\n"
        "try:\n"
        "    simple_yaml.load('a: 1\\na: 2\\n')\n"
        "except simple_yaml.YamlError as error:\n"
        "    failure = [error.parser, error.line, error.message]\n"
        "print(json.dumps([simple_yaml.pyyaml_available(), data, parser, failure, 'yaml' in sys.modules]))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    result = subprocess.run(  # -S: no site-packages, so no PyYAML
        [sys.executable, "-B", "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    available, data, parser, failure, imported = json.loads(result.stdout)
    assert (available, data, parser, imported) == (False, {"a": [1, 2], "b": True}, "builtin", False)
    assert failure == ["builtin", 2, "duplicate key 'a'"]


# --- random config-shaped documents: whatever the builtin reader accepts, PyYAML reads the same -------------------


def _words(text: str) -> List[str]:
    """Tokens separated by two spaces."""
    return text.split("  ")


_SCALARS = _words(
    "a  b c  yes  No  y  on  OFF  true  ~  null  1  -1  0  00  0755  08  0x1F  0b101  0b_  1_000  1.5  -.5  .5  1.  "
    "1e5  1.0e5  2.0e-5  .inf  -.Inf  .NaN  1:30  1:30.5  2024-01-01  2024-13-45  2001-12-14t21:59:43.10-05:00  "
    "http://x:8000  a:b  a: b  a #b  a#b  don't  'q'  \"q\"  'it''s'  \"a\\tb\"  \"\\q\"  [1, 2]  []  {}  {a: 1}  "
    "{a: 1, b}  [a, ]  [a,,b]  {a: , b: 1}  {a:1}  [a: 1]  [[1, [2]], {x: [y]}]  [a #b]  [a?b]  [-a]  &x 1  *x  |  "
    "- a  -  ?  :x  ?x  -x  @x  %x  a]  b[0]  <<  =  a\tb  'a'#c  [1]x  \"open  0.  +.5  12:30:00  0o17  NULL  9:75"
)
_KEYS = [
    *_words("a  b  key  a b  1  yes  on  ~  'q'  \"d\"  1.5  a,b  a]  -k  ?k  it's  2024-01-01  <<  a#b  &k a  [k]"),
    "k ",
]


def _random_block(rng: random.Random, depth: int, indent: int) -> List[str]:
    pad = " " * indent
    lines: List[str] = []
    if rng.random() < 0.55 or depth > 2:
        for key in rng.sample(_KEYS, rng.randint(1, 4)):
            if rng.random() < 0.65 or depth > 2:
                lines.append(f"{pad}{key}: {rng.choice(_SCALARS)}")
            else:
                lines.append(f"{pad}{key}:" + rng.choice(["", " # c"]))
                lines.extend(_random_block(rng, depth + 1, indent + rng.choice([0, 2, 4])))
    else:
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.6:
                lines.append(f"{pad}- {rng.choice(_SCALARS)}")
            else:
                inner = _random_block(rng, depth + 1, indent + 2)
                lines.append(f"{pad}- {inner[0][indent + 2 :]}")
                lines.extend(inner[1:])
    return lines


def _random_document(rng: random.Random) -> str:
    text = "\n".join(_random_block(rng, 0, rng.choice([0, 2]))) + "\n"
    for _ in range(rng.choice([0, 0, 1, 2])):  # a stray character where it hurts
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(["\t", " ", "#", "---\n", "...\n", ":", "- ", "'", '"', "\n"]) + text[at:]
    return text


def test_random_documents_are_read_like_pyyaml_or_refused() -> None:
    rng = random.Random(20260501)
    accepted, mismatches = 0, []
    for _ in range(1500):
        text = _random_document(rng)
        try:
            mine = simple_yaml.parse(text)
        except YamlError:
            continue
        accepted += 1
        try:
            reference = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError) as error:
            reference = f"PyYAML error: {error}"
        if not same(mine, reference):
            mismatches.append((text, mine, reference))
    assert mismatches == []
    assert accepted > 300  # the generator keeps most documents readable, so the check is not empty


# --- bounds: alias bombs, size, nesting ------------------------------------------------------------------------------


def _alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.serial
@pytest.mark.skipif(not simple_yaml.pyyaml_available(), reason="PyYAML expands aliases; the built-in reader refuses")
def test_alias_bomb_is_refused_within_the_node_budget() -> None:
    started = time.monotonic()
    with pytest.raises(simple_yaml.YamlError, match="aliases expanded"):
        simple_yaml.load(_alias_bomb())
    assert time.monotonic() - started < 2.0


def test_builtin_reader_refuses_aliases() -> None:
    with pytest.raises(simple_yaml.YamlError, match="aliases"):
        simple_yaml.load(_alias_bomb(), prefer_pyyaml=False)


@pytest.mark.parametrize("prefer_pyyaml", [True, False])
def test_oversized_and_deep_documents_are_refused(prefer_pyyaml: bool) -> None:
    with pytest.raises(simple_yaml.YamlError, match="larger than"):
        simple_yaml.load("k: v\n" * 100_000, prefer_pyyaml=prefer_pyyaml)
    with pytest.raises(simple_yaml.YamlError):
        simple_yaml.load("a: " + "[" * 200 + "]" * 200 + "\n", prefer_pyyaml=prefer_pyyaml)

#!/usr/bin/env bash
# The prepared GPU measurement (issue #19, item 7): one command on a device machine that has torch, transformers
# and peft but not TRL. Here, once, fetch the missing wheels (about 45 MB) into .whl/ (.gitignore holds it):
#
#     bash tools/device_measure.sh --fetch
#
# There, with carry [".whl"] and timeout_s 540 (the suite stops starting runs after BUDGET_S seconds, 400 by default,
# and writes its record after every run, so a cut-off run keeps what it measured):
#
#     bash tools/device_measure.sh
#
# It writes $OUT/memory.json (commit it as tests/fixtures/memory/<gpu>.json: tests/test_measure_memory.py then
# checks every run against the planner's band), $OUT/compare.txt (the planned-against-measured table) and
# $OUT/measure.log (the whole log).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS="trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 bitsandbytes==0.50.2"
if [ "${1:-}" = "--fetch" ]; then
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl $WHEELS
    exit 0
fi
: "${OUT:?run this on the device machine (OUT is where the record goes)}"
SITE="$(mktemp -d)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
export PYTHONPATH="$SITE" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, peft, trl, datasets, bitsandbytes as b; print(torch.__version__, \
transformers.__version__, peft.__version__, trl.__version__, datasets.__version__, b.__version__, \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU: a tiny CPU run')"
python3 tools/measure_memory.py --suite tools/measure_suite.json --budget-s "${BUDGET_S:-400}" \
    --write "$OUT/memory.json" 2> >(tee "$OUT/measure.log" | grep -E ': (ok|[A-Za-z]+Error)|budget|record:|Traceback' >&2)
python3 tools/measure_memory.py --compare "$OUT/memory.json" | tee "$OUT/compare.txt"

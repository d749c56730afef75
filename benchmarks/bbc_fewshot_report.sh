#!/usr/bin/env bash
# Issue 13's "done when" experiment: CE vs LaCon on BBC News few-shot with the bundled MiniLM,
# k ∈ {5, 20} (setting axis) × 3 split seeds × 2 training seeds (repeats), each method at its
# reported configuration (one configuration per sweep: the comparison is the point, not the
# search), then `contrasweep report` of LaCon against CE. Run from any folder: the sweeps go to
# ./sweeps, MLflow to ./mlflow.db + ./mlartifacts, the report to ./sweeps/bbc-lacon/report/.
# About 25 minutes on 2 CPU cores.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
common=(--set data.protocol=few_shot --set "data.k=[5, 20]" --set "data.seed=[0, 1, 2]" --set "sweep.seeds=[0, 1]"
        --set "grid={}" --set "search={}" --set sweep.scheduler=none --set fixed.epochs=20 --set fixed.batch_size=8
        --set encoder.max_length=64 --set data.test_fraction=0.2 --set sweep.max_concurrent=2)
contrasweep run "$here/search_spaces/ce.yaml" --name "${PREFIX:-bbc}-ce" "${common[@]}" --set reported.batch_size=8
contrasweep run "$here/search_spaces/lacon.yaml" --name "${PREFIX:-bbc}-lacon" "${common[@]}"
contrasweep report "${PREFIX:-bbc}-lacon" --compare "${PREFIX:-bbc}-ce"

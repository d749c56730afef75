#!/usr/bin/env bash
# The Ray range (issue 71): for each Ray version named, a venv of its own with the CPU torch wheel,
# the project's dependencies with `ray[tune,train,default]==VERSION` forced, and the project itself
# (editable, this checkout), then the Tune-facing tests below. Prints per version: passed/failed,
# pytest's closing line, the install and test wall times; exits 1 if any version failed.
#
#   bash benchmarks/dependency_range.sh 2.56.1 2.60.0
#
# Environment (all optional):
#   DEPRANGE_DIR    where the venvs live (default ~/.cache/contrasweep-deprange); a venv whose
#                   recorded requirements are the same is reused, not rebuilt
#   DEPRANGE_PINS   more pins for every venv, e.g. "optuna==4.0.0 mlflow==3.10.1" (the lower bounds)
#   DEPRANGE_TESTS  the pytest arguments instead of the subset below, e.g. '-m "not slow"'
#   DEPRANGE_LOCK   a lock file the test run holds (flock), e.g. /tmp/contrasweep-ray.lock
#
# The requirements are pyproject's own (dependencies + the test extra) with only the Ray line
# replaced, so a version pyproject does not accept yet can still be probed; the script says when
# pyproject's range does not accept the version it installed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ $# -ge 1 ] || { echo "usage: bash benchmarks/dependency_range.sh RAY_VERSION..." >&2; exit 2; }
BASE=${DEPRANGE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/contrasweep-deprange}
mkdir -p "$BASE"

# The Tune-facing tests: each drives Ray Tune's own objects or a real Tune run, where Ray's
# versions differ; the rest of the suite (losses, data, report, MLflow store) does not touch Ray.
# One case of each kind the issue names, not every parametrisation (the suite on the newest Ray
# runs them all; CI's 90 minutes hold both runs): 6.5 minutes on 2026-12-03, the whole files 18.7.
R=tests/test_searcher_resume.py::test_interrupted_twice_resumes_exactly
TESTS=(
  "$R[grid-1seed-asha]"          # SIGKILL/Ctrl-C and resume: a grid with group ASHA over repeats
  "$R[optuna-2seed-none]"        # ... an Optuna study with seed repeats
  "$R[random-2seed-asha]"        # ... random search (Optuna's RandomSampler) with group ASHA
  tests/test_racing_sweep.py::test_a_race_killed_mid_race_resumes_without_running_a_repeat_twice
  tests/test_budget_sweep.py     # the budget gate ending trials of a real Tune run, grid and study
  tests/test_extend.py::test_an_interrupted_sweep_resumes_before_it_grows_and_a_killed_extension_resumes
  tests/test_sweep_e2e.py::test_asha_stops_or_continues_whole_repeat_groups  # pause/stop repeats
  tests/test_group_asha.py       # group ASHA against Tune's Trial and TrialScheduler
  tests/test_budget.py           # the budget gate on Tune Trials
  tests/test_study_search.py     # the Optuna searcher as a Tune Searcher; the schedulers' FIFO base
  tests/test_warm_actors.py      # Tune's actor cache
  tests/test_ray_loopback.py     # ray.init on the loopback address
  tests/test_distributed.py::test_torchtrainer_path_reports_same_metric_keys  # Ray Train's workers
)
if [ -n "${DEPRANGE_TESTS:-}" ]; then eval "PYTEST_ARGS=($DEPRANGE_TESTS)"; else PYTEST_ARGS=("${TESTS[@]}"); fi

# pyproject's requirements with the Ray line (and each DEPRANGE_PINS package's) replaced;
# $1 = the Ray version.
requirements() {
  python3 - "$1" ${DEPRANGE_PINS:-} <<'EOF'
import re, sys, tomllib
name = lambda line: re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower()
pins = {name(p): p for p in [f"ray[tune,train,default]=={sys.argv[1]}", *sys.argv[2:]]}
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
lines = project["dependencies"] + project["optional-dependencies"]["test"]
out = [pins.pop(name(line), line) for line in lines] + list(pins.values())
print("\n".join(out))
EOF
}

# Whether pyproject's own Ray range accepts $1 (with the venv's `packaging`).
accepted() {
  "$2/bin/python" - "$1" <<'EOF'
import re, sys, tomllib
from packaging.requirements import Requirement
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
ray = next(Requirement(d) for d in project["dependencies"] if re.match(r"ray\b", d))
sys.exit(0 if sys.argv[1] in ray.specifier else 1)
EOF
}

status=0
summary=()
for version in "$@"; do
  reqs=$(requirements "$version")
  key=$(printf '%s' "$reqs" | sha1sum | cut -c1-10)
  venv="$BASE/ray-$version-$key"
  t0=$(date +%s)
  if [ -f "$venv/.requirements" ] && [ "$(cat "$venv/.requirements")" = "$reqs" ]; then
    echo "== ray $version: reusing $venv"
  else
    echo "== ray $version: building $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" || { summary+=("ray $version: FAILED (venv)"); status=1; continue; }
    printf '%s\n' "$reqs" | grep -v '^$' > "$venv/requirements.txt"
    if ! { "$venv/bin/pip" install -q torch==2.13.0 \
           && "$venv/bin/pip" install -q -r "$venv/requirements.txt" \
           && "$venv/bin/pip" install -q --no-deps -e "$ROOT"; } > "$venv/install.log" 2>&1; then
      tail -20 "$venv/install.log"
      summary+=("ray $version: FAILED (install: $venv/install.log)"); status=1; continue
    fi
    printf '%s' "$reqs" > "$venv/.requirements"
  fi
  "$venv/bin/pip" install -q --no-deps -e "$ROOT" > /dev/null 2>&1  # this checkout, if the venv is shared
  t1=$(date +%s)
  got=$("$venv/bin/python" -c 'import ray, optuna, mlflow; print(f"ray {ray.__version__}, optuna {optuna.__version__}, mlflow {mlflow.__version__}")')
  accepted "$version" "$venv" || echo "   note: pyproject's Ray range does not accept $version (installed over it)"
  echo "   $got; install $((t1 - t0)) s; running: ${PYTEST_ARGS[*]}"
  log="$venv/pytest-$(date +%Y%m%d-%H%M%S).log"
  lock=()
  [ -n "${DEPRANGE_LOCK:-}" ] && lock=(flock "$DEPRANGE_LOCK")
  ( export PATH="$venv/bin:$PATH" PYTHONPATH="$ROOT/platform:$ROOT"
    "${lock[@]}" "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=30 "${PYTEST_ARGS[@]}" ) > "$log" 2>&1
  rc=$?
  t2=$(date +%s)
  closing=$(grep -E '(passed|failed|error).* in [0-9.]+s' "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
  grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/   /'
  if [ $rc -eq 0 ]; then verdict=passed; else verdict=FAILED; status=1; fi
  summary+=("ray $version: $verdict ($closing); tests $((t2 - t1)) s, install $((t1 - t0)) s; log $log")
done
echo
printf '%s\n' "${summary[@]}"
exit $status

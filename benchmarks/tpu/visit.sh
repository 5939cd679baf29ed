#!/usr/bin/env bash
# One visit to a TPU machine (through the device tool), from the repository root there:
# install the wheel from .whl-tpu, then run each program of benchmarks/tpu/programs bare and
# under collect, verify each bundle there, and pack what came out into $OUT.
#   bash benchmarks/tpu/visit.sh [PROGRAM ...]     (default: every program)
# BARE=1 also times each program bare, collect's stages (XLA_BUGKIT_TIMINGS) and, beside
# verify, one compile and run of the module by the bundle's repro.py; VERIFY="a b" verifies
# only those programs' bundles (default: all); DIR=heldout takes the programs from
# benchmarks/tpu/heldout; TIER=1 first runs the tpu test tier (python -m pytest -m tpu),
# TIER_K=EXPR only its tests that match; REPLAY_TIMEOUT bounds each replay (default 120 s;
# a hang's is 30 s). A program whose source has a line "# LIBTPU_INIT_ARGS: FLAGS" runs, bare
# and under collect, with those flags (and EXTRA_TPU_ARGS) in LIBTPU_INIT_ARGS; verify and
# repro.py run without it: what they apply comes from the bundle. What it prints is also in
# $OUT/visit.log, written as it comes.
set -u
export PYTHONUNBUFFERED=1
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
  --upgrade --target /tmp/site .whl-tpu/*.whl || exit 1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site
root=$PWD
out=${OUT:-/tmp/out}
work=/tmp/tpu-visit
mkdir -p "$out" "$work"
# Everything printed goes to $OUT/visit.log as it comes: a visit cut short by its time
# limit still brings back what it saw.
exec > >(tee -a "$out/visit.log") 2>&1
programs=("$@")
folder=$root/benchmarks/tpu/${DIR:-programs}
[ ${#programs[@]} -gt 0 ] || programs=($(cd "$folder" && ls *.py | sed 's/\.py$//'))
python3 - <<'PY' 2>&1 | tee "$work/machine.txt"
import importlib.metadata as m, jax
print("jax", jax.__version__, "jaxlib", m.version("jaxlib"), "libtpu", m.version("libtpu"))
d = jax.devices()[0]
print("devices", jax.devices(), d.device_kind, getattr(d, "platform", ""))
print("platform_version", d.client.platform_version)
PY
if [ -n "${TIER:-}" ]; then
  echo "=== the tpu test tier"
  python3 -m pytest -q -m tpu -p no:cacheprovider ${TIER_K:+-k "$TIER_K"} tests/tpu/chip_test.py 2>&1 | tee "$work/tier.log" | tail -15
fi
[ "${1:-}" = "none" ] && programs=()
seconds() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$(date +%s.%N)"; }
for p in "${programs[@]}"; do
  src="$folder/$p.py"
  timeout=${TIMEOUT:-90}
  extra=(--replay-timeout "${REPLAY_TIMEOUT:-120}")
  case "$p" in
    *hang*) timeout=${HANG_TIMEOUT:-40}; extra=(--replay-timeout 30) ;;
  esac
  # A program that needs the TPU compiler's flags names them: "# LIBTPU_INIT_ARGS: FLAGS".
  tpu_args=$(sed -n 's/^# LIBTPU_INIT_ARGS: //p' "$src" | head -1)
  unset LIBTPU_INIT_ARGS
  if [ -n "$tpu_args" ]; then
    export LIBTPU_INIT_ARGS="$tpu_args${EXTRA_TPU_ARGS:+ $EXTRA_TPU_ARGS}"
    echo "LIBTPU_INIT_ARGS=$LIBTPU_INIT_ARGS"
  fi
  if [ -n "${BARE:-}" ]; then
  echo "=== $p: bare"
  start=$(date +%s.%N)
  (cd "$work" && timeout "$timeout" python3 "$src" > "$work/$p.bare.log" 2>&1); rc=$?
  echo "bare rc=$rc $(seconds "$start") s"; tail -3 "$work/$p.bare.log"
  export XLA_BUGKIT_TIMINGS="$work/$p.timings.jsonl"
  fi
  echo "=== $p: collect"
  start=$(date +%s.%N)
  (cd "$work" && python3 -m xla_bugkit collect ${COLLECT_ARGS:-} "${extra[@]}" --timeout "$timeout" --keep-workdir \
     --workdir "$work/$p.work" -o "$work/$p.zip" -- python3 "$src" > "$work/$p.collect.log" 2>&1); rc=$?
  echo "collect rc=$rc $(seconds "$start") s"
  unset XLA_BUGKIT_TIMINGS LIBTPU_INIT_ARGS
  [ -f "$work/$p.timings.jsonl" ] && python3 -c "import json, sys; print('stages:', ', '.join(f\"{d['stage']} {d['wall']:.1f} s\" for d in map(json.loads, open(sys.argv[1]))))" "$work/$p.timings.jsonl"
  sed -n '/^xla-bugkit: [^r]/,$p' "$work/$p.collect.log" | grep -v "^    \|^  next\|^  shares\|^  source\|^  work dir" | tail -14
  if [ -f "$work/$p.zip" ] && { [ -z "${VERIFY+x}" ] || [[ " $VERIFY " == *" $p "* ]]; }; then
    echo "=== $p: verify"
    start=$(date +%s.%N)
    (cd "$work" && python3 -m xla_bugkit verify --timeout 60 "$work/$p.zip" > "$work/$p.verify.log" 2>&1); rc=$?
    echo "verify rc=$rc $(seconds "$start") s"; tail -6 "$work/$p.verify.log"
    if [ -n "${BARE:-}" ]; then
      rm -rf "$work/$p.unpacked" && mkdir -p "$work/$p.unpacked"
      python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$work/$p.zip" "$work/$p.unpacked"
      start=$(date +%s.%N)
      (cd "$work/$p.unpacked" && timeout 120 python3 repro.py > "$work/$p.repro.log" 2>&1); rc=$?
      echo "repro.py rc=$rc $(seconds "$start") s"; tail -2 "$work/$p.repro.log"
    fi
  fi
done
# What comes back (16 MiB a file at most): the logs, stage timings and the bundles under 3 MB.
cd "$work" && tar czf "$out/visit.tgz" *.log *.txt $(ls *.jsonl 2>/dev/null) \
  $(find . -maxdepth 1 -name '*.zip' -size -3M -printf '%f\n') 2>/dev/null
ls -la "$out"

#!/usr/bin/env bash
# One visit to a TPU machine (through the device tool), from the repository root there:
# install the wheel from .whl-tpu, then run each program of benchmarks/tpu/programs bare and
# under collect, verify each bundle there, and pack what came out into $OUT.
#   bash benchmarks/tpu/visit.sh [PROGRAM ...]     (default: every program)
# BARE=1 also times each program bare; VERIFY="a b" verifies only those programs' bundles
# (default: all); DIR=heldout takes the programs from benchmarks/tpu/heldout.
set -u
export PYTHONUNBUFFERED=1
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
  --target /tmp/site .whl-tpu/*.whl || exit 1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site
root=$PWD
out=${OUT:-/tmp/out}
work=/tmp/tpu-visit
mkdir -p "$out" "$work"
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
for p in "${programs[@]}"; do
  src="$folder/$p.py"
  timeout=${TIMEOUT:-90}
  extra=()
  case "$p" in
    *hang*) timeout=${HANG_TIMEOUT:-40}; extra=(--replay-timeout 30) ;;
  esac
  if [ -n "${BARE:-}" ]; then
  echo "=== $p: bare"
  start=$(date +%s.%N)
  (cd "$work" && timeout "$timeout" python3 "$src" > "$work/$p.bare.log" 2>&1); rc=$?
  echo "bare rc=$rc $(python3 -c "print(round($(date +%s.%N)-$start,1))") s"; tail -3 "$work/$p.bare.log"
  fi
  echo "=== $p: collect"
  start=$(date +%s.%N)
  (cd "$work" && python3 -m xla_bugkit collect ${COLLECT_ARGS:-} "${extra[@]}" --timeout "$timeout" --keep-workdir \
     --workdir "$work/$p.work" -o "$work/$p.zip" -- python3 "$src" > "$work/$p.collect.log" 2>&1); rc=$?
  echo "collect rc=$rc $(python3 -c "print(round($(date +%s.%N)-$start,1))") s"
  sed -n '/^xla-bugkit: [^r]/,$p' "$work/$p.collect.log" | grep -v "^    \|^  next\|^  shares\|^  source\|^  work dir" | tail -14
  if [ -f "$work/$p.zip" ] && { [ -z "${VERIFY+x}" ] || [[ " $VERIFY " == *" $p "* ]]; }; then
    echo "=== $p: verify"
    (cd "$work" && python3 -m xla_bugkit verify --timeout 60 "$work/$p.zip" > "$work/$p.verify.log" 2>&1); rc=$?
    echo "verify rc=$rc"; tail -6 "$work/$p.verify.log"
  fi
done
# What comes back: the logs and bundles, and the work dirs without their large files.
cd "$work" && tar czf "$out/visit.tgz" --exclude='*.npz' --exclude='*.ll' --exclude='*.o' \
  --exclude='*.so' --exclude='*-live-range.txt' *.log *.txt *.zip *.work 2>/dev/null
ls -la "$out"

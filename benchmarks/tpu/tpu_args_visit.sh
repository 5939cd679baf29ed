#!/usr/bin/env bash
# After `bash benchmarks/tpu/visit.sh tpu_flag_vmem ...` on the TPU machine: proves that a
# bundle's LIBTPU_INIT_ARGS are what verify and repro.py apply there. The program bare with
# and without its flag; the bundle verified again with the flags taken out of its manifest
# (the one difference); repro.py as written and under a LIBTPU_INIT_ARGS of the user's own,
# which wins. None of them runs with LIBTPU_INIT_ARGS set but where said. Logs into $OUT.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site
root=$PWD
out=${OUT:-/tmp/out}
work=/tmp/tpu-visit
p=tpu_flag_vmem
src=$root/benchmarks/tpu/programs/$p.py
flag=$(sed -n 's/^# LIBTPU_INIT_ARGS: //p' "$src" | head -1)
mkdir -p "$out" "$work"
exec > >(tee -a "$out/tpu_args.log") 2>&1
unset LIBTPU_INIT_ARGS
step() {  # step NAME ENV... -- COMMAND...: run from $work, print rc and the last lines
  local name=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "=== $name"
  (cd "$work" && env "${envs[@]}" timeout 150 "$@" > "$work/$name.log" 2>&1); local rc=$?
  echo "rc=$rc"; grep -v "^\s*$" "$work/$name.log" | tail -${TAIL:-4}
}
step bare_no_flag -u LIBTPU_INIT_ARGS -- python3 "$src"
step bare_flag "LIBTPU_INIT_ARGS=$flag" -- python3 "$src"
step memory_stats -u LIBTPU_INIT_ARGS -- python3 -c \
  "import jax; d = jax.devices()[0]; print(d.device_kind, {k: v for k, v in d.memory_stats().items() if 'limit' in k or k == 'bytes_in_use'})"
[ -f "$work/$p.zip" ] || { echo "no $p.zip"; exit 1; }
python3 - "$work/$p.zip" "$work/$p.noargs.zip" <<'PY'
import json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w") as dst:
    for info in src.infolist():
        data = src.read(info)
        if info.filename == "manifest.json":
            m = json.loads(data)
            print("manifest libtpu_init_args:", m.pop("libtpu_init_args", None))
            data = json.dumps(m, indent=2).encode()
        dst.writestr(info, data)
PY
TAIL=8 step verify_without_args -u LIBTPU_INIT_ARGS -- python3 -m xla_bugkit verify --timeout 60 "$work/$p.noargs.zip"
rm -rf "$work/$p.unpacked" && mkdir -p "$work/$p.unpacked"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$work/$p.zip" "$work/$p.unpacked"
grep -n "^TPU_ARGS" "$work/$p.unpacked/repro.py"
TAIL=6 step repro_as_written -u LIBTPU_INIT_ARGS -- python3 "$work/$p.unpacked/repro.py"
TAIL=6 step repro_user_wins "LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib=16384" -- python3 "$work/$p.unpacked/repro.py"
cd "$work" && tar czf "$out/tpu_args.tgz" bare_*.log memory_stats.log verify_without_args.log repro_*.log \
  $(find . -maxdepth 1 -name '*.zip' -size -3M -printf '%f\n') 2>/dev/null
ls -la "$out"

#!/usr/bin/env bash
# One visit to a TPU machine (through the device tool), from the repository root there: bisect
# a bundle recorded on the chip over a folder of libtpu wheels, by the tpu tier's test and by
# the command itself, and put what they printed in $OUT.
#   bash benchmarks/tpu/libtpu_bisect_visit.sh [WHEELS_DIR]
# A TPU machine may reach no index: without WHEELS_DIR, the folder is made there from what it
# has: the installed libtpu packed again as its own wheel, and one wheel laid out as libtpu's
# whose libtpu.so is no library (named 0.0.40: a release that cannot load under this jaxlib).
set -u
export PYTHONUNBUFFERED=1
# The dependencies' wheels from .whl-tpu; xla_bugkit itself from this checkout.
deps=$(ls .whl-tpu/*.whl | grep -v '/xla_bugkit-')
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
  --upgrade --target /tmp/site $deps || exit 1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site:$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
exec > >(tee -a "$out/libtpu_bisect.log") 2>&1
wheels=${1:-/tmp/libtpu-wheels}
if [ $# -eq 0 ]; then
  python3 - "$wheels" <<'PY'
import importlib.metadata as m, os, sys, zipfile
from pathlib import Path
import libtpu
folder = Path(sys.argv[1]); folder.mkdir(parents=True, exist_ok=True)
version, here = m.version("libtpu"), Path(libtpu.__file__).parent
tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
with zipfile.ZipFile(folder / f"libtpu-{version}-{tag}-{tag}-manylinux_2_31_x86_64.whl", "w") as z:
    for f in sorted(here.iterdir()):
        if f.is_file():
            z.write(f, f"libtpu/{f.name}")
with zipfile.ZipFile(folder / f"libtpu-0.0.40-{tag}-{tag}-manylinux_2_31_x86_64.whl", "w") as z:
    z.writestr("libtpu/__init__.py", "")
    z.writestr("libtpu/libtpu.so", b"not a shared library\n")
print("wheels:", sorted(p.name for p in folder.iterdir()))
PY
fi
python3 -c "from xla_bugkit import platforms; print('TPU chips on the PCI bus:', platforms.devices_here(platforms.TPU))"
echo "=== the tpu tier's test"
start=$(date +%s)
XLA_BUGKIT_LIBTPU_WHEELS=$wheels python3 -m pytest -q -m tpu -p no:cacheprovider -s \
  tests/tpu/libtpu_bisect_test.py 2>&1 | tail -40
echo "test: $(( $(date +%s) - start )) s"
echo "=== the command"
start=$(date +%s)
XLA_BUGKIT_CACHE=/tmp/libtpu-cache python3 -m xla_bugkit bisect tests/tpu/recorded/hbm_oom.zip \
  --wheels "$wheels" -o "$out/hbm_oom.bisected.zip"
echo "exit status $? in $(( $(date +%s) - start )) s"

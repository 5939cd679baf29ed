"""The README's example (xla_bugkit.examples.compile_crash) on a TPU: every HLO pass
disabled, which the TPU compiler refuses with a RET_CHECK."""

import runpy

runpy.run_module("xla_bugkit.examples.compile_crash", run_name="__main__")

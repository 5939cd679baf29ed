"""A TPU module's references started beside its test (``worker``), where the replay expects
no crash: the module compiled under the conservative flags on the chip, and its op-by-op
reference on the CPU, each in a thread of its own while the test compiles and runs.

On a TPU a module's compile can take seconds (a scatter of 262,144 elements: 2.4 s on a
v5e), and its conservative reference compiles it once more: made one after the other, the
compiles double a replay's time. Only compiles overlap the test, and the op-by-op reference's
CPU: the conservative executable runs on the chip after the test has run, so the two never
hold the chip's memory at once.

A crash in a thread would end the process before the test's outputs are saved, so the
parent asks for this only where the run itself compiled and ran the module (a wrong result:
``judge``); elsewhere the references follow the test as before (``references``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xla_bugkit import jaxlib_adapter, platforms
from xla_bugkit.replay.child import compiled, replayable, tpu_reference
from xla_bugkit.replay.protocol import EARLY_REFERENCES

Compile = Callable[[Sequence[jaxlib_adapter.Override]], jaxlib_adapter.Executable]


class Early:
    """The conservative compile and the op-by-op reference, under way beside the test."""

    def __init__(self, compile_with: Compile, chosen: Sequence[jaxlib_adapter.Override]) -> None:
        self._chosen = list(chosen)
        self._compiled: jaxlib_adapter.Executable | Exception | None = None
        self._threads: list[threading.Thread] = []
        self._start(self._compile, compile_with)

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="xla-bugkit-early")
        thread.start()
        self._threads.append(thread)

    def _compile(self, compile_with: Compile) -> None:
        try:
            self._compiled = compile_with(self._chosen)
        except Exception as e:  # raised again where the reference asks for it (``take``)
            self._compiled = e

    def op_by_op(self, out: Path, spec: dict[str, Any], text: str, args: list[Any]) -> None:
        """Start the op-by-op reference on the CPU (``tpu_reference.op_by_op``)."""
        conservative = compiled.overrides(spec["conservative"])
        self._start(tpu_reference.op_by_op, out, conservative, text, args)

    def settle(self) -> None:
        """Wait for every thread: nothing of this replay runs on after it."""
        for thread in self._threads:
            thread.join()

    def take(self, chosen: Sequence[jaxlib_adapter.Override]) -> jaxlib_adapter.Executable | None:
        """The executable compiled early, where it was compiled under ``chosen`` (once: a
        second ask, with an override XLA refused left out, compiles afresh); the compile's
        own error raised here, as a compile made now would raise it."""
        if list(chosen) != self._chosen:
            return None
        self.settle()
        found, self._compiled = self._compiled, None
        if isinstance(found, Exception):
            raise found
        return found


def start(spec: dict[str, Any], module_bytes: bytes, text: str, args: list[Any]) -> Early | None:
    """The references started now, where the spec asks it of a module whose references are a
    TPU's (``platforms.Platform.cpu_reference``); None where they follow the test."""
    found = platforms.find(spec["platform"])
    if not (spec.get(EARLY_REFERENCES) and spec["reference"] and found and found.cpu_reference):
        return None
    if not replayable.plain_references(spec["platform"], text):
        return None
    mlir = jaxlib_adapter.hlo_proto_to_stablehlo(module_bytes)

    def compile_with(chosen: Sequence[jaxlib_adapter.Override]) -> jaxlib_adapter.Executable:
        return jaxlib_adapter.compile(mlir, platform=spec["platform"], overrides=chosen)

    early = Early(compile_with, compiled.overrides(spec["conservative"]))
    early.op_by_op(Path(spec["out"]), spec, text, args)
    return early

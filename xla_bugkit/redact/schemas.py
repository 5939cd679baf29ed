"""Where XLA's binary protos keep text: for each kind of proto a bundle holds, the field paths
of the strings that can name a user, a host or a home (source files, stack frames, debug
options), and of the numeric data that must never be read as text (literals).

Field numbers are from xla/service/hlo.proto, xla/xla_data.proto, xla/xla.proto and
xla/pjrt/proto/compile_options.proto, checked against jaxlib 0.10.2. XLA never reuses a
field number, so a newer or older dump at worst has a string field missing here; the binary
redaction then reports it as not rewritten (``binary.copy_proto``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import TypeAlias

from xla_bugkit.hlo.compile_options import (
    DEBUG_OPTIONS,
    ENV_OPTION_OVERRIDES,
    EXECUTABLE_BUILD_OPTIONS,
)


class Leaf(enum.Enum):
    TEXT = "text"  # a string: redacted as any text is
    DATA = "data"  # numbers (a literal's values): copied as is, never searched


Schema: TypeAlias = Mapping[int, "Schema | Leaf"]
TEXT, DATA = Leaf.TEXT, Leaf.DATA

_MAP_OF_STRINGS: Schema = {1: TEXT, 2: TEXT}  # a map<string, string> entry
# OpMetadata: op_type, op_name, source_file, deduplicated_name, scheduling_name.
_OP_METADATA: Schema = {1: TEXT, 2: TEXT, 3: TEXT, 12: TEXT, 16: TEXT}
_FRONTEND_ATTRIBUTES: Schema = {1: _MAP_OF_STRINGS}
# HloInstructionProto: metadata, literal (a constant's values), frontend_attributes.
_INSTRUCTION: Schema = {7: _OP_METADATA, 8: DATA, 68: _FRONTEND_ATTRIBUTES}
_COMPUTATION: Schema = {2: _INSTRUCTION}  # HloComputationProto.instructions
# StackFrameIndexProto: file_names, function_names.
_STACK_FRAME_INDEX: Schema = {1: TEXT, 2: TEXT}
# HloModuleProto: computations, stack_frame_index, frontend_attributes.
HLO_MODULE: Schema = {3: _COMPUTATION, 17: _STACK_FRAME_INDEX, 19: _FRONTEND_ATTRIBUTES}
HLO_PROTO: Schema = {1: HLO_MODULE}  # HloProto.hlo_module
# HloSnapshot: hlo, arguments, result, execution_platform.
HLO_SNAPSHOT: Schema = {1: HLO_PROTO, 2: DATA, 3: DATA, 4: TEXT}

# DebugOptions' string fields: paths (dump, caches, autotune results, PTX and LLVM files,
# the CUDA dir), regular expressions and pass lists, each a place a user's path can be.
_DEBUG_TEXT = (
    30,
    61,
    109,
    110,
    111,
    124,
    127,
    128,
    150,
    154,
    210,
    222,
    223,
    261,
    292,
    295,
    306,
    310,
    333,
    377,
    383,
    407,
    433,
    434,
    451,
    468,
    491,
)
_DEBUG_MAPS = (357, 474, 500)  # map<string, string>: xla_backend_extra_options and the like
_DEBUG: Schema = {
    **{number: TEXT for number in _DEBUG_TEXT},
    **{number: _MAP_OF_STRINGS for number in _DEBUG_MAPS},
}
# CompileOptionsProto: the build options' debug options, and the per-compile overrides
# (map<string, OptionOverrideProto>; OptionOverrideProto.string_field is 1).
COMPILE_OPTIONS: Schema = {
    EXECUTABLE_BUILD_OPTIONS: {DEBUG_OPTIONS: _DEBUG},
    ENV_OPTION_OVERRIDES: {1: TEXT, 2: {1: TEXT}},
    11: TEXT,  # compiler_variant
}
# MemoryUsageReportProto: per memory space, each allocation's defining positions and HLO.
MEMORY_REPORT: Schema = {1: {3: {5: TEXT, 6: TEXT}}}

# By file name, as XLA names its dumps (capture/dumps.py): the first match decides.
_BY_NAME: tuple[tuple[re.Pattern[str], Schema], ...] = (
    (re.compile(r"(?:^|\.)snapshot\.[^/]*\.pb$|\.hlo_snapshot\.pb$"), HLO_SNAPSHOT),
    (re.compile(r"\.hlo\.pb(?:\.gz)?$"), HLO_PROTO),
    (re.compile(r"^compile_options\.pb$"), COMPILE_OPTIONS),
    (re.compile(r"-memory-usage-report\.pb$"), MEMORY_REPORT),
)


def schema_for(name: str) -> Schema | None:
    """The schema of the dump file called ``name``; None for a file of unknown layout."""
    return next((schema for pattern, schema in _BY_NAME if pattern.search(name)), None)

"""XLA's own data, read and written without its Python classes: the bottom layer every stage
imports. ``hlo_proto`` (HloModuleProto, HloSnapshot), ``literal`` (LiteralProto <-> numpy),
``compile_options`` (what a replay takes from a CompileOptionsProto), ``protowire``
(protobuf's wire format). Nothing is imported here."""

"""PyTorch/XLA compile crash: XLA's CPU backend aborts (SIGABRT) on a CHECK.

With --xla_disable_all_hlo_passes=true no layout assignment runs, so a transposed tensor
that must be materialised keeps a column-major layout its consumer does not expect:
emitting the kernel fails ``ir_array.cc:515] Check failed: index.ShapeIsCompatible(shape_)
Shape f32[4,2]{1,0} is not compatible with f32[4,2]{0,1}`` (torch_xla 2.9 on CPU; the line
starts ``F0000 00:00:<seconds>``, logged before absl's logging is initialised). The
elementwise steps before it (and their ``.item()`` sums) compile and run: five modules, three
of them named ``SyncTensorsGraph.11``, the crashing one among them, so only the dump ids
tell them apart. jaxlib 0.10.2's replay of the dumped module, with the same flag, runs to
completion (measured; its XLA is not torch_xla's), so the issue stays pytorch/xla's. The
program appends its flag to XLA_FLAGS, as many training scripts do.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import torch
import torch_xla

device = torch_xla.device()
batch = torch.full((8, 4), 0.25, device=device)
for step in range(3):
    batch = batch * 0.5 + step
    torch_xla.sync()
    print("step", step, "sum", batch.sum().item(), flush=True)

weight = torch.ones(2, 4, device=device)
print("transposed", (weight.t() * 2).cpu())

"""PyTorch/XLA compile error inside XLA: a few training steps, then a noisy evaluation.

With --xla_disable_hlo_passes=rng-bit-generator-expander, XLA's CPU backend cannot emit the
random numbers ``torch.randn`` lowers to: compiling the evaluation graph fails with
UNIMPLEMENTED "RngBitGenerator should be expanded for CPU.", which torch_xla 2.9 raises
as a bare ``RuntimeError: RngBitGenerator should be expanded for CPU.`` (no status code).
The training steps before it compile and run: SGD with momentum makes step 0's graph
differ from the later steps' (step 2 reuses step 1's), so the dump holds three modules, all
named ``SyncTensorsGraph.N`` (N is the graph's instruction count: .70, .81, .96 here), and
the failing one is the last. jaxlib 0.10.2 fails the dumped module the same way, with the
code: ``UNIMPLEMENTED: RngBitGenerator should be expanded for CPU.``. The program appends
its flag to XLA_FLAGS, as many training scripts do.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_disable_hlo_passes=rng-bit-generator-expander"
)

import torch
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.ones(8, 4, device=device)
for step in range(3):
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
    print("step", step, "loss", loss.item(), flush=True)

with torch.no_grad():
    noisy = x + 0.01 * torch.randn(8, 4, device=device)
    print("eval loss", model(noisy).pow(2).mean().item())

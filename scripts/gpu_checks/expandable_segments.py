"""GPU check: PyTorch with expandable segments (cuMemCreate + cuMemMap under the caching
allocator) trains a few steps under vramcache; the mapped pieces are seen as allocations.
"""
# vramcache-expect: allocs_vmm_map>0 vmm_creates>0
import os
import sys

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
import torch  # noqa: E402  (the allocator reads the variable at first use)

if not torch.cuda.is_available():
    print("check skip: no GPU")
    sys.exit(77)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 2048)).cuda()
opt = torch.optim.AdamW(model.parameters())
for _ in range(5):
    loss = model(torch.randn(512, 2048, device="cuda")).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
ok = torch.isfinite(loss).item()
print(f"check {'ok' if ok else 'fail'}: 5 steps, loss {loss.item():.4f}, reserved {torch.cuda.memory_reserved() >> 20} MiB")
sys.exit(0 if ok else 1)

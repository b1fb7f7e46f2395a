"""GPU check: a program that uses CUPTI itself (torch.profiler) keeps working under vramcache:
the profiler still records the CUDA kernels the program runs.
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

if not torch.cuda.is_available():
    print("check skip: no GPU")
    sys.exit(77)
a = torch.randn(2048, 2048, device="cuda")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()
kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
ok = len(kernels) >= 10
print(f"check {'ok' if ok else 'fail'}: torch.profiler recorded {len(kernels)} CUDA kernel events (expected >= 10)")
sys.exit(0 if ok else 1)

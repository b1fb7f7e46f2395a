"""GPU check: a PyTorch CUDA graph captured and replayed under vramcache computes what eager does,
and the kernels it runs are reported (graph kernel nodes enumerated at instantiation).
"""
# vramcache-env: VRAMCACHE_ACTIVITY=1
# vramcache-expect: graph_kernels>0 captures_begun>0
import sys

import torch

if not torch.cuda.is_available():
    print("check skip: no GPU")
    sys.exit(77)
torch.manual_seed(0)
w1 = torch.randn(1024, 1024, device="cuda")
w2 = torch.randn(1024, 1024, device="cuda")
x = torch.randn(256, 1024, device="cuda")


def f(inp):
    return torch.relu(inp @ w1) @ w2


eager = f(x)
static_x = x.clone()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    f(static_x)  # warm-up on a side stream, as PyTorch recommends before capture
torch.cuda.current_stream().wait_stream(s)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_y = f(static_x)
for _ in range(10):
    graph.replay()
torch.cuda.synchronize()
same = torch.equal(static_y, eager)
print(f"check {'ok' if same else 'fail'}: graph replay {'equals' if same else 'differs from'} eager, 10 replays")
sys.exit(0 if same else 1)

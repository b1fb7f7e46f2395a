"""GPT decoder trainer (PyTorch only): the benchmark workload of vramcache and a GPU test.

fp32 master weights, bf16 autocast, AdamW, synthetic tokens from a fixed seed (same data every
run). Prints one line per step and a `summary <json>` line; exits 77 where there is no GPU.
--deterministic makes two runs bitwise identical (see DESIGN.md, "Determinism").
--ddp trains on every GPU of a torchrun job (one process per GPU, DistributedDataParallel over NCCL);
each rank trains on its own slice of the synthetic tokens; rank 0 prints the step lines, and each
rank writes its own --json file (`{rank}` in the path becomes the rank).
"""

import argparse
import contextlib
import functools
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

SIZES = {  # n_layer, d_model, n_head
    "tiny": (4, 256, 4),
    "1.3b": (24, 2048, 16),
    "2.7b": (32, 2560, 20),
}
VOCAB = 50304
DATA_SEED = 1234


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="first steps left out of the timing stats")
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--fp16-from", type=int, metavar="STEP",
                   help="autocast to float16 instead of bfloat16 from this step on: other kernels for every GEMM "
                        "and cast, a program that changes for good (vramcache learns its plan again)")
    p.add_argument("--json", metavar="PATH", help="also write the summary, losses and times here")
    p.add_argument("--offload", choices=["none", "fsdp2", "save_on_cpu"], default="none",
                   help="the classic alternatives vramcache is compared with: fsdp2 = FSDP2 on one GPU with "
                        "CPUOffloadPolicy (parameters, gradients and optimizer state on the CPU, optimizer "
                        "step on the CPU); save_on_cpu = activations saved for backward kept in pinned host memory")
    p.add_argument("--ddp", action="store_true",
                   help="DistributedDataParallel over NCCL, one process per GPU (launch with torchrun)")
    p.add_argument("--access-log", metavar="PATH",
                   help="log every aten op with the host clock and the CUDA tensors it touches (ground truth "
                        "for vramcache's access sets; slow)")
    args = p.parse_args()
    if args.seq < 1 or args.batch < 1 or args.warmup < 0 or args.steps <= args.warmup:
        p.error("need --seq >= 1, --batch >= 1 and --steps > --warmup >= 0")
    if args.ddp and ("LOCAL_RANK" not in os.environ or "WORLD_SIZE" not in os.environ):
        p.error("--ddp needs torchrun (LOCAL_RANK and WORLD_SIZE are not set)")
    if args.ddp and args.offload != "none":
        p.error("--ddp and --offload cannot be combined")
    return args


def make_deterministic():
    """Must run before the first CUDA call: cuBLAS reads CUBLAS_WORKSPACE_CONFIG at handle creation."""
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    # No TF32 (the PyTorch >= 2.9 spelling of allow_tf32 = False).
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.conv.fp32_precision = "ieee"


class Block(nn.Module):
    """Pre-LayerNorm decoder block: causal self-attention, then a 4x GELU MLP."""

    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_attn = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.fc_out = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_attn(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc_out(F.gelu(self.fc(self.ln_mlp(x))))


class GPT(nn.Module):
    """Token + learned position embeddings, blocks, final LayerNorm, head tied to the embedding."""

    def __init__(self, n_layer, d_model, n_head, vocab, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.apply(init_weights)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def init_weights(module):
    """GPT-2 initialization: N(0, 0.02) weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class AccessLog(TorchDispatchMode):
    """One JSON line per aten op: the host clock around it (CLOCK_MONOTONIC_RAW, as vramcache's trace)
    and each CUDA tensor it reads or returns, as (address, bytes spanned by the view, direction).
    The kernels the op launches are the ones vramcache saw inside that interval on this host.
    Ops that take a tensor for its shape only (zeros_like, new_empty, ...) do not read it: their
    inputs are left out."""

    @staticmethod
    def reads_inputs(func):
        name = str(func)
        return "_like" not in name and not name.startswith("aten.new_")

    def __init__(self, path):
        super().__init__()
        self.out = open(path, "w")

    @staticmethod
    def span(t, direction):
        if t.numel() == 0:
            return None
        last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        return [t.data_ptr(), (last + 1) * t.element_size(), direction]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        out = func(*args, **(kwargs or {}))
        t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        spans = []
        inputs = (args, kwargs) if self.reads_inputs(func) else ()
        for direction, tree in (("in", inputs), ("out", out)):
            for t in pytree.tree_leaves(tree):
                if isinstance(t, torch.Tensor) and t.is_cuda:
                    sp = self.span(t, direction)
                    if sp:
                        spans.append(sp)
        self.out.write(json.dumps({"t0": t0, "t1": t1, "op": str(func), "t": spans}) + "\n")
        return out


def shard_with_cpu_offload(model):
    """FSDP2 on a one-process group: every block and the root sharded with CPUOffloadPolicy."""
    import torch.distributed as dist
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    policy = CPUOffloadPolicy(pin_memory=True)
    for block in model.blocks:
        fully_shard(block, offload_policy=policy)
    fully_shard(model, offload_policy=policy)
    return model


def start_ddp():
    """torchrun's process: this rank's GPU and the NCCL process group. Returns (rank, world size)."""
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.get_rank(), dist.get_world_size()


def train_step(model, opt, x, y, attention_backend, save_on_cpu=False, dtype=torch.bfloat16):
    saving = torch.autograd.graph.save_on_cpu(pin_memory=True) if save_on_cpu else contextlib.nullcontext()
    with torch.autocast(device_type="cuda", dtype=dtype), attention_backend(), saving:
        logits = model(x)
        # 2-D logits: the 3-D form dispatches to nll_loss2d, which uses atomics.
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    args = parse_args()
    if args.deterministic:
        make_deterministic()
    if not torch.cuda.is_available():
        print("train_gpt: no CUDA device, skipping")
        sys.exit(77)
    n_layer, d_model, n_head = SIZES[args.size]
    rank, world = 0, 1
    if args.ddp:
        rank, world = start_ddp()
    torch.manual_seed(0)

    with torch.device("cuda"):
        model = GPT(n_layer, d_model, n_head, VOCAB, args.seq)
    params = sum(p.numel() for p in model.parameters())  # the tied weight counts once
    if args.offload == "fsdp2":
        model = shard_with_cpu_offload(model)
    if args.ddp:
        # Gradients are views into DDP's buckets: no second copy of them.
        model = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=False)
    # The math backend is deterministic in backward; flash and memory-efficient may not be.
    if args.deterministic:
        attention_backend = functools.partial(sdpa_kernel, SDPBackend.MATH)
    else:
        attention_backend = contextlib.nullcontext

    gen = torch.Generator().manual_seed(DATA_SEED)
    tokens = torch.randint(0, VOCAB, (args.steps, world * args.batch, args.seq + 1), generator=gen)
    tokens = tokens[:, rank * args.batch:(rank + 1) * args.batch].cuda()

    losses, times = [], []
    access_log = AccessLog(args.access_log) if args.access_log else contextlib.nullcontext()
    with access_log:
        run_steps(args, model, opt, tokens, attention_backend, losses, times, rank)
    if args.access_log:
        access_log.out.close()
    report(args, params, losses, times, rank, world)
    if args.offload == "fsdp2" or args.ddp:
        torch.distributed.destroy_process_group()


def run_steps(args, model, opt, tokens, attention_backend, losses, times, rank):
    for i in range(args.steps):
        x, y = tokens[i, :, :-1], tokens[i, :, 1:]
        torch.cuda.synchronize()
        start = time.perf_counter()
        fp16 = args.fp16_from is not None and i >= args.fp16_from
        loss = train_step(model, opt, x, y, attention_backend, args.offload == "save_on_cpu",
                          torch.float16 if fp16 else torch.bfloat16)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            print(f"train_gpt: rank {rank} step {i} loss is not finite", file=sys.stderr)
            sys.exit(1)
        if rank == 0:  # every rank's losses are in its --json file
            print(f"step {i} loss {losses[-1].hex()} time {times[-1]:.6f}", flush=True)


def report(args, params, losses, times, rank, world):
    stats = torch.cuda.memory_stats()
    median = statistics.median(times[args.warmup:])
    summary = {
        "size": args.size,
        "params": params,
        "seq": args.seq,
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "median_step_s": median,
        "tokens_per_s": args.batch * args.seq / median,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "segments_allocated": stats["segment.all.allocated"],
        "segments_freed": stats["segment.all.freed"],
        "deterministic": args.deterministic,
        "offload": args.offload,
        "rank": rank,
        "world_size": world,
    }
    if rank == 0:
        print("summary " + json.dumps(summary), flush=True)
    if args.json:
        with open(args.json.replace("{rank}", str(rank)), "w") as f:
            json.dump(dict(summary, losses=[l.hex() for l in losses], times=times), f, indent=1)


if __name__ == "__main__":
    main()

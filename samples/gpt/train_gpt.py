"""GPT decoder trainer (PyTorch only): the benchmark workload of vramcache and a GPU test.

fp32 master weights, bf16 autocast, AdamW. Tokens: synthetic from a fixed seed (the default, the same
every run), or with --data PATH the bytes of a text file (or of the text files under a folder) as
tokens, the last --val-fraction held out for the validation loss (`eval` lines). Prints one line per
step and a `summary <json>` line; exits 77 where there is no GPU. --deterministic makes two runs
bitwise identical (DESIGN.md, "Determinism"). --offload runs one of the alternatives vramcache is
compared with (it never loads vramcache itself), and --gpu-memory-limit holds PyTorch's allocator to
a budget. --ddp trains on every GPU of a torchrun job (one process per GPU, DDP over NCCL): each rank
trains on its own slice of the tokens, rank 0 prints, each rank writes its own --json (`{rank}`).
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
    "6.7b": (32, 4096, 32),
}
VOCAB = 50304  # --data uses ids 0-255 of it (one per byte): the model is the same with either tokens
DATA_SEED = 1234
OFFLOADS = {
    "none": "everything on the GPU",
    "fsdp2": "FSDP2 on one GPU with CPUOffloadPolicy: parameters, gradients and optimizer state in pinned host "
             "memory, each block's parameters copied in for its forward and backward, the AdamW step on the CPU",
    "cpu_optimizer": "the model on the GPU, fp32 master weights and AdamW state in host memory, gradients copied "
                     "out as backward produces them, the AdamW step on the CPU, updated weights copied back "
                     "(CPUOffloadAdamW below)",
    "save_on_cpu": "the activations saved for backward kept in pinned host memory "
                   "(torch.autograd.graph.save_on_cpu)",
}


def parse_size(text):
    """'24G', '12.5G', '512M', '1024' -> bytes (binary units, an optional trailing B); ValueError else."""
    t = text.strip().upper()
    t = t[:-1] if t.endswith("B") else t
    scale = 1
    if t and t[-1] in "KMGT":
        scale, t = 1 << (10 * ("KMGT".index(t[-1]) + 1)), t[:-1]
    value = float(t) * scale
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return int(value)


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
    p.add_argument("--offload", choices=list(OFFLOADS), default="none",
                   help="; ".join(f"{k}: {v}" for k, v in OFFLOADS.items()))
    p.add_argument("--cpu-adamw", choices=["fused", "for-loop"], default="fused",
                   help="PyTorch's AdamW on the CPU for --offload fsdp2 and cpu_optimizer: fused (one vectorized pass "
                        "over each tensor on every core) or for-loop (the default implementation); if the fused one "
                        "refuses the tensors at the first step, the for-loop one takes over and the summary says so")
    p.add_argument("--gpu-weights", choices=["fp32", "bf16"], default="fp32",
                   help="--offload cpu_optimizer: the weights the GPU holds (and the gradients it copies out): fp32, as "
                        "the sample trains, or bf16, ZeRO-Offload's way (half the bytes each way)")
    p.add_argument("--gpu-memory-limit", type=parse_size, metavar="SIZE",
                   help="hold PyTorch's CUDA allocator to SIZE (torch.cuda.set_per_process_memory_fraction): an "
                        "allocation past it fails as out of memory")
    p.add_argument("--data", metavar="PATH", help="train on the bytes of this text file (or of the text files "
                   "under this folder) instead of synthetic tokens")
    p.add_argument("--val-fraction", type=float, help="--data: the tail held out for validation (default 0.05)")
    p.add_argument("--eval-every", type=int, metavar="N",
                   help="--data: validation loss every N steps (default: only after the last step)")
    p.add_argument("--eval-batches", type=int, help="--data: batches of held-out windows per evaluation (default 4)")
    p.add_argument("--seed", type=int, default=DATA_SEED, help="seed of the tokens (synthetic) or of the windows (--data)")
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
    if args.gpu_weights != "fp32" and args.offload != "cpu_optimizer":
        p.error("--gpu-weights is an option of --offload cpu_optimizer")
    given = [v for v in (args.val_fraction, args.eval_every, args.eval_batches) if v is not None]
    if given and not args.data:
        p.error("--val-fraction, --eval-every and --eval-batches need --data")
    args.val_fraction = 0.05 if args.val_fraction is None else args.val_fraction
    args.eval_every = args.eval_every or 0
    args.eval_batches = 4 if args.eval_batches is None else args.eval_batches
    if not 0 < args.val_fraction < 1 or args.eval_every < 0 or args.eval_batches < 1:
        p.error("need 0 < --val-fraction < 1, --eval-every >= 0 and --eval-batches >= 1")
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


def read_text(path):
    """The bytes of the file `path`, or of every file under the folder `path` (in sorted path order, one
    newline between files; a file holding a NUL byte, so not text, is left out), as a uint8 tensor."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            data = f.read()
    else:
        chunks = []
        for root, dirs, files in os.walk(path):
            dirs.sort()  # os.walk descends in this order: the same bytes every run
            for name in sorted(files):
                file = os.path.join(root, name)
                if os.path.islink(file) or not os.path.isfile(file):
                    continue
                with open(file, "rb") as f:
                    chunk = f.read()
                if chunk and b"\0" not in chunk:
                    chunks.append(chunk)
        data = b"\n".join(chunks)
    if not data:
        sys.exit(f"train_gpt: --data {path}: no text there")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def windows(data, starts, seq):
    """Token windows of seq + 1 bytes (inputs and the next-byte targets) at `starts`, as int64 token ids."""
    return data[starts.unsqueeze(-1) + torch.arange(seq + 1)].long()


def text_tokens(args, n):
    """(training windows [steps, n, seq + 1], validation windows [eval_batches * batch, seq + 1]) from
    --data: the training windows start at offsets drawn from --seed in the head of the text, the
    validation ones are spread evenly over the held-out tail (the same windows at every evaluation)."""
    data = read_text(args.data)
    held = int(len(data) * args.val_fraction)
    train, val = data[:len(data) - held], data[len(data) - held:]
    if len(train) < args.seq + 2 or len(val) < args.seq + 1:
        sys.exit(f"train_gpt: {args.data} has {len(data)} bytes: too few for --seq {args.seq} with "
                 f"--val-fraction {args.val_fraction} (need {args.seq + 1} held out and {args.seq + 2} to train on)")
    gen = torch.Generator().manual_seed(args.seed)
    starts = torch.randint(0, len(train) - args.seq, (args.steps, n), generator=gen)
    count = args.eval_batches * args.batch
    val_starts = torch.linspace(0, len(val) - args.seq - 1, count).round().long()
    return windows(train, starts, args.seq), windows(val, val_starts, args.seq)


@torch.no_grad()
def validation_loss(model, val, batch, attention_backend):
    """Mean next-byte cross entropy over the validation windows, `batch` windows per forward."""
    total, count = 0.0, 0
    for i in range(0, len(val), batch):
        w = val[i:i + batch].cuda()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16), attention_backend():
            logits = model(w[:, :-1])
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    return total / count


class HostAdamW:
    """PyTorch's AdamW over tensors in host memory, `impl` fused (torch >= 2.4 has a CPU kernel for float32,
    bfloat16 and float16: aten/src/ATen/native/cpu/FusedAdamKernel.cpp, and DTensor takes it for FSDP2's
    shards) or for-loop (one tensor at a time, each op on every core). Should the fused step refuse the
    tensors at the first step, the for-loop one takes over from a fresh state, said once on stderr and
    in `impl`."""

    said = False

    def __init__(self, params, lr, impl):
        self.params, self.lr, self.impl, self.steps = list(params), lr, impl, 0
        self.opt = self.make(impl)

    def make(self, impl):
        if impl == "fused":
            return torch.optim.AdamW(self.params, lr=self.lr, fused=True)
        return torch.optim.AdamW(self.params, lr=self.lr, fused=False, foreach=False)

    def step(self):
        try:
            self.opt.step()
        except (RuntimeError, NotImplementedError) as e:
            if self.impl != "fused" or self.steps:
                raise
            self.impl = f"for-loop (the fused step failed: {str(e).splitlines()[0][:160]})"
            if not HostAdamW.said:
                print(f"train_gpt: fused CPU AdamW failed ({e.__class__.__name__}: {str(e).splitlines()[0][:160]}); "
                      "using the for-loop AdamW", file=sys.stderr, flush=True)
                HostAdamW.said = True
            self.opt = self.make("for-loop")
            self.opt.step()
        self.steps += 1

    def zero_grad(self, set_to_none=True):
        self.opt.zero_grad(set_to_none=set_to_none)


class CPUOffloadAdamW:
    """AdamW with its fp32 master weights and its state in host memory while the model stays on the GPU:
    the approach of torchao's CPUOffloadOptimizer and of ZeRO-Offload, in plain PyTorch. As backward
    produces a gradient (a post-accumulate-grad hook), it is copied on a side stream into a pinned host
    buffer and its device memory is handed back; step() takes the tensors in the order their gradients
    came, each as soon as its copy is done, updates it on the CPU and copies the weight back on another
    stream, so the copy of one overlaps the update of the next (and the first updates overlap the end of
    backward). The current stream waits for the copies back before the next forward."""

    def __init__(self, model, lr, impl, gpu_dtype):
        self.d2h, self.h2d = torch.cuda.Stream(), torch.cuda.Stream()
        self.ready = []  # (parameter, event of its gradient's copy), in the order backward produced them
        self.slots = {}  # parameter -> (master, gradient buffer, weight buffer, optimizer)
        self.cpu_s = self.d2h_bytes = self.h2d_bytes = 0
        params = [p for p in model.parameters() if p.requires_grad]  # the tied weight once
        masters = []
        for p in params:
            master = torch.empty(p.shape, dtype=torch.float32, pin_memory=True)
            master.copy_(p.detach())
            masters.append(master)
        if gpu_dtype != torch.float32:
            model.to(gpu_dtype)  # in place: the same Parameter objects, now holding gpu_dtype
        for p, master in zip(params, masters):
            grad = torch.empty(p.shape, dtype=p.dtype, pin_memory=True)
            master.grad = grad if p.dtype == torch.float32 else torch.empty_like(master)
            weight = master if p.dtype == torch.float32 else torch.empty(p.shape, dtype=p.dtype, pin_memory=True)
            self.slots[p] = (master, grad, weight, HostAdamW([master], lr, impl))
            p.register_post_accumulate_grad_hook(self.grad_ready)

    @property
    def impl(self):
        impls = sorted({opt.impl for _, _, _, opt in self.slots.values()})
        return impls[0] if len(impls) == 1 else "mixed: " + "; ".join(impls)

    def grad_ready(self, p):
        """Runs on autograd's thread once p.grad is complete. The copy waits for everything queued on the
        current stream so far (what produced the gradient); record_stream keeps the allocator from reusing
        the gradient's memory before the copy has read it."""
        grad, host = p.grad, self.slots[p][1]
        self.d2h.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.d2h):
            host.copy_(grad, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        grad.record_stream(self.d2h)
        p.grad = None
        self.ready.append((p, done))

    def step(self):
        """The CPU update of each tensor once its gradient is in host memory. A weight buffer is written
        again only after the next forward, which waited for its copy back, so no copy reads a half-written
        buffer; the event of a gradient's copy comes after every kernel that read the old weight."""
        cpu_s = d2h = h2d = 0
        for p, done in self.ready:
            master, grad, weight, opt = self.slots[p]
            done.synchronize()
            start = time.perf_counter()
            if master.grad is not grad:
                master.grad.copy_(grad)
            opt.step()
            if weight is not master:
                weight.copy_(master)
            cpu_s += time.perf_counter() - start
            with torch.cuda.stream(self.h2d), torch.no_grad():
                p.copy_(weight, non_blocking=True)
            d2h += grad.nbytes
            h2d += weight.nbytes
        torch.cuda.current_stream().wait_stream(self.h2d)
        self.ready.clear()
        self.cpu_s, self.d2h_bytes, self.h2d_bytes = cpu_s, d2h, h2d

    def zero_grad(self, set_to_none=True):
        """The gradients on the GPU were handed back as they were copied; the host buffers are overwritten."""


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


def limit_memory(limit):
    """Holds the caching allocator of this process's GPU to `limit` bytes; returns the device's total."""
    device = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(device).total_memory
    if limit > total:
        sys.exit(f"train_gpt: --gpu-memory-limit {limit} is more than the GPU's {total} bytes")
    torch.cuda.set_per_process_memory_fraction(limit / total, device)
    return total


def train_step(model, opt, x, y, attention_backend, save_on_cpu=False, dtype=torch.bfloat16):
    """One step; returns (loss, host seconds in opt.step(): the CPU AdamW itself under --offload fsdp2,
    whose step runs on the CPU and returns when done)."""
    saving = torch.autograd.graph.save_on_cpu(pin_memory=True) if save_on_cpu else contextlib.nullcontext()
    with torch.autocast(device_type="cuda", dtype=dtype), attention_backend(), saving:
        logits = model(x)
        # 2-D logits: the 3-D form dispatches to nll_loss2d, which uses atomics.
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    start = time.perf_counter()
    opt.step()
    step_s = time.perf_counter() - start
    opt.zero_grad(set_to_none=True)
    return loss, step_s


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
    total = limit_memory(args.gpu_memory_limit) if args.gpu_memory_limit else None
    torch.manual_seed(0)

    with torch.device("cuda"):
        model = GPT(n_layer, d_model, n_head, VOCAB, args.seq)
    params = sum(p.numel() for p in model.parameters())  # the tied weight counts once
    if args.offload == "fsdp2":
        model = shard_with_cpu_offload(model)
    if args.ddp:
        # Gradients are views into DDP's buckets: no second copy of them.
        model = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    if args.offload == "cpu_optimizer":
        gpu_dtype = torch.bfloat16 if args.gpu_weights == "bf16" else torch.float32
        opt = CPUOffloadAdamW(model, 1e-4, args.cpu_adamw, gpu_dtype)
    elif args.offload == "fsdp2":
        opt = HostAdamW(model.parameters(), 1e-4, args.cpu_adamw)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=False)
    # The math backend is deterministic in backward; flash and memory-efficient may not be.
    if args.deterministic:
        attention_backend = functools.partial(sdpa_kernel, SDPBackend.MATH)
    else:
        attention_backend = contextlib.nullcontext

    val = None
    if args.data:
        tokens, val = text_tokens(args, world * args.batch)
    else:
        gen = torch.Generator().manual_seed(args.seed)
        tokens = torch.randint(0, VOCAB, (args.steps, world * args.batch, args.seq + 1), generator=gen)
    tokens = tokens[:, rank * args.batch:(rank + 1) * args.batch].cuda()

    log = {"losses": [], "times": [], "cpu_adamw_s": [], "optimizer_step_s": [], "val_losses": []}
    access_log = AccessLog(args.access_log) if args.access_log else contextlib.nullcontext()
    with access_log:
        run_steps(args, model, opt, tokens, val, attention_backend, log, rank)
    if args.access_log:
        access_log.out.close()
    report(args, params, log, rank, world, opt, total)
    if args.offload == "fsdp2" or args.ddp:
        torch.distributed.destroy_process_group()


def run_steps(args, model, opt, tokens, val, attention_backend, log, rank):
    for i in range(args.steps):
        x, y = tokens[i, :, :-1], tokens[i, :, 1:]
        torch.cuda.synchronize()
        start = time.perf_counter()
        fp16 = args.fp16_from is not None and i >= args.fp16_from
        loss, step_s = train_step(model, opt, x, y, attention_backend, args.offload == "save_on_cpu",
                                  torch.float16 if fp16 else torch.bfloat16)
        torch.cuda.synchronize()
        log["times"].append(time.perf_counter() - start)
        log["losses"].append(loss.item())
        log["optimizer_step_s"].append(step_s)
        if args.offload in ("fsdp2", "cpu_optimizer"):
            log["cpu_adamw_s"].append(opt.cpu_s if args.offload == "cpu_optimizer" else step_s)
        if not math.isfinite(log["losses"][-1]):
            print(f"train_gpt: rank {rank} step {i} loss is not finite", file=sys.stderr)
            sys.exit(1)
        if rank == 0:  # every rank's losses are in its --json file
            print(f"step {i} loss {log['losses'][-1].hex()} time {log['times'][-1]:.6f}", flush=True)
        if val is not None and ((args.eval_every and (i + 1) % args.eval_every == 0) or i + 1 == args.steps):
            v = validation_loss(model, val, args.batch, attention_backend)
            log["val_losses"].append([i + 1, v.hex()])
            if rank == 0:
                print(f"eval {i + 1} val_loss {v.hex()} {v:.4f}", flush=True)


def report(args, params, log, rank, world, opt, total):
    stats = torch.cuda.memory_stats()
    times = log["times"]
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
        "data": args.data or "synthetic",
        "gpu_memory_limit_bytes": args.gpu_memory_limit,
        "device_total_bytes": total,
        "rank": rank,
        "world_size": world,
    }
    if log["cpu_adamw_s"]:
        summary["cpu_adamw"] = opt.impl
        summary["cpu_adamw_median_s"] = statistics.median(log["cpu_adamw_s"][args.warmup:])
        summary["optimizer_step_median_s"] = statistics.median(log["optimizer_step_s"][args.warmup:])
    if args.offload == "cpu_optimizer":
        summary.update(gpu_weights=args.gpu_weights, copied_h2d_bytes_per_step=opt.h2d_bytes,
                       copied_d2h_bytes_per_step=opt.d2h_bytes)
    if log["val_losses"]:
        summary["val_loss"] = float.fromhex(log["val_losses"][-1][1])
    if rank == 0:
        print("summary " + json.dumps(summary), flush=True)
    if args.json:
        with open(args.json.replace("{rank}", str(rank)), "w") as f:
            json.dump(dict(summary, losses=[l.hex() for l in log["losses"]], times=times,
                           val_losses=log["val_losses"]), f, indent=1)


if __name__ == "__main__":
    main()

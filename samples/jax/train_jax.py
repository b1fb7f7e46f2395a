"""Small JAX transformer trainer (jax only): a GPU test workload of vramcache.

4 pre-LayerNorm layers, d=512, seq 512, batch 8, vocab 8192, hand-written AdamW, one jit-compiled
step, synthetic tokens from a fixed key. Prints one line per step and a `summary <json>` line;
exits 77 where there is no GPU. XLA flags are read when jax starts, so they are set before import.
"""

import argparse
import functools
import json
import math
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="first steps left out of the timing stats")
    p.add_argument("--deterministic", action="store_true")
    args = p.parse_args()
    if args.warmup < 0 or args.steps <= args.warmup:
        p.error("need --steps > --warmup >= 0")
    return args


ARGS = parse_args()
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # grow on demand: allocations stay visible
if ARGS.deterministic:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_deterministic_ops=true").strip()

import jax  # noqa: E402 (after the environment above)
import jax.numpy as jnp  # noqa: E402

N_LAYER, D_MODEL, N_HEAD, SEQ, BATCH, VOCAB = 4, 512, 8, 512, 8, 8192
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 3e-4, 0.9, 0.999, 1e-8, 0.01


def init_params(key):
    """N(0, 0.02) weights, zero biases, unit LayerNorm scales; the output head is the embedding."""
    keys = iter(jax.random.split(key, 2 + 4 * N_LAYER))

    def normal(*shape):
        return 0.02 * jax.random.normal(next(keys), shape, jnp.float32)

    def norm_params():
        return {"scale": jnp.ones(D_MODEL), "bias": jnp.zeros(D_MODEL)}

    layers = [
        {
            "ln_attn": norm_params(),
            "qkv": normal(D_MODEL, 3 * D_MODEL), "qkv_b": jnp.zeros(3 * D_MODEL),
            "proj": normal(D_MODEL, D_MODEL), "proj_b": jnp.zeros(D_MODEL),
            "ln_mlp": norm_params(),
            "fc": normal(D_MODEL, 4 * D_MODEL), "fc_b": jnp.zeros(4 * D_MODEL),
            "fc_out": normal(4 * D_MODEL, D_MODEL), "fc_out_b": jnp.zeros(D_MODEL),
        }
        for _ in range(N_LAYER)
    ]
    return {"tok": normal(VOCAB, D_MODEL), "pos": normal(SEQ, D_MODEL), "layers": layers,
            "ln_f": norm_params()}


def layer_norm(p, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * p["scale"] + p["bias"]


def attention(p, x):
    b, t, d = x.shape
    q, k, v = jnp.split(x @ p["qkv"] + p["qkv_b"], 3, axis=-1)
    q, k, v = (z.reshape(b, t, N_HEAD, d // N_HEAD).transpose(0, 2, 1, 3) for z in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // N_HEAD)
    scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -1e30)
    y = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return y @ p["proj"] + p["proj_b"]


def loss_fn(params, tokens):
    x, y = tokens[:, :-1], tokens[:, 1:]
    h = params["tok"][x] + params["pos"][: x.shape[1]]
    for p in params["layers"]:
        h = h + attention(p, layer_norm(p["ln_attn"], h))
        mlp = jax.nn.gelu(layer_norm(p["ln_mlp"], h) @ p["fc"] + p["fc_b"])
        h = h + mlp @ p["fc_out"] + p["fc_out_b"]
    logits = layer_norm(params["ln_f"], h) @ params["tok"].T
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, y[..., None], axis=-1).mean()


def adamw(params, grads, m, v, t):
    """One AdamW step; t is the 1-based step number."""
    tree_map = jax.tree_util.tree_map
    m = tree_map(lambda m, g: BETA1 * m + (1 - BETA1) * g, m, grads)
    v = tree_map(lambda v, g: BETA2 * v + (1 - BETA2) * g * g, v, grads)
    c1, c2 = 1 - BETA1 ** t, 1 - BETA2 ** t

    def update(p, m, v):
        return p - LR * ((m / c1) / (jnp.sqrt(v / c2) + EPS) + WEIGHT_DECAY * p)

    return tree_map(update, params, m, v), m, v


# params, m and v are donated (updated in place, as a real trainer does); i is traced, so one
# compilation serves every step.
@functools.partial(jax.jit, donate_argnums=(0, 1, 2))
def train_step(params, m, v, data, i):
    tokens = jax.lax.dynamic_index_in_dim(data, i, keepdims=False)
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    params, m, v = adamw(params, grads, m, v, (i + 1).astype(jnp.float32))
    return loss, params, m, v


def main():
    try:
        jax.devices("gpu")
    except RuntimeError as e:
        print(f"train_jax: no GPU ({e}), skipping")
        sys.exit(77)

    params_key, data_key = jax.random.split(jax.random.key(0))
    params = init_params(params_key)
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    data = jax.random.randint(data_key, (ARGS.steps, BATCH, SEQ + 1), 0, VOCAB, jnp.int32)

    losses, times = [], []
    for i in range(ARGS.steps):
        start = time.perf_counter()
        loss, params, m, v = train_step(params, m, v, data, jnp.int32(i))
        jax.block_until_ready((loss, params, m, v))
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
        if not math.isfinite(losses[-1]):
            print(f"train_jax: step {i} loss is not finite", file=sys.stderr)
            sys.exit(1)
        print(f"step {i} loss {losses[-1].hex()} time {times[-1]:.6f}", flush=True)

    median = statistics.median(times[ARGS.warmup:])
    summary = {
        "params": n_params,
        "steps": ARGS.steps,
        "warmup": ARGS.warmup,
        "median_step_s": median,
        "tokens_per_s": BATCH * SEQ / median,
        "deterministic": ARGS.deterministic,
    }
    print("summary " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

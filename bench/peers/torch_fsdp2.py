#!/usr/bin/env python3
"""The GPU peer for `fsdp4j bench step`: the same GPT-2 in PyTorch FSDP2, timed the same way.

Why it exists: issue 12 asks whether fsdp4j's bf16 step beats PyTorch FSDP2 (eager, no
torch.compile) on the same card in the same run. scripts/gpu-check.sh runs this beside
`fsdp4j bench step` and prints both with the ratio.

The model is fsdp4j's GptModel: pre-LN blocks, learned position embeddings, tanh GELU, biases
everywhere, LayerNorm eps 1e-5, the LM head tied to wte. Attention is PyTorch's own
scaled_dot_product_attention (is_causal=True), i.e. what a PyTorch user gets (flash attention
on Hopper), so the peer is as strong as eager PyTorch is; `--attention math` materialises the
(B, H, T, T) scores instead, as fsdp4j's CUDA attention does today.

Sharding: fully_shard on every block, then on the root (FSDP2's per-parameter sharding on a
1-D device mesh), MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) for --dtype bf16,
fp32 master parameters, torch.optim.AdamW (its default foreach implementation).

Timing, as fsdp4j's StepBenchmark: `--warmup` untimed steps, then `--steps` timed ones; each
step is forward, backward, optimizer step and one host read of the loss (fsdp4j's one host
sync per step); the report is the median. FLOPs per step use fsdp4j's Flops.trainingStep:
tokens x (6 x parameters + 12 x layers x width x T). MFU divides by --peak-tflops (pass the
figure fsdp4j used, so both MFUs share a denominator); without it MFU is left out.

Run (one GPU, one process):
  python3 bench/peers/torch_fsdp2.py --layers 12 --heads 12 --hidden 768 --vocab 50257 \
      --batch-size 8 --seq-len 1024 --dtype bf16 --json-out peer.json
For several GPUs start it with torchrun --nproc-per-node N (NCCL needs one GPU per rank).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, width, heads, kind):
        super().__init__()
        self.heads = heads
        self.kind = kind
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.kind == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # the materialised (B, H, T, T) path
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = F.softmax(s.float().masked_fill(mask, float("-inf")), dim=-1).to(v.dtype) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width, heads, kind):
        super().__init__()
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = Attention(width, heads, kind)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, seq_len, layers, heads, width, kind):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq_len, width)
        self.blocks = nn.ModuleList(Block(width, heads, kind) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)   # the tied head
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--batch-size", type=int, default=8, help="per rank")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--attention", choices=("sdpa", "math"), default="sdpa")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--peak-tflops", type=float, default=None, help="the device's dense peak per GPU, for MFU")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args()

    if not torch.cuda.is_available():
        sys.exit("torch_fsdp2.py: PyTorch sees no GPU (torch.cuda.is_available() is False); run it on the GPU machine")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if world > torch.cuda.device_count():
        sys.exit(f"torch_fsdp2.py: {world} ranks need {world} GPUs (NCCL takes one GPU per rank), "
                 f"{torch.cuda.device_count()} visible")
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", local))
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(1234)
    dev = torch.device("cuda", local)
    model = Gpt(a.vocab, a.seq_len, a.layers, a.heads, a.hidden, a.attention).to(dev)
    params = sum(p.numel() for p in model.parameters())   # tied: wte counted once, as fsdp4j does
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if a.dtype == "bf16" \
        else MixedPrecisionPolicy()
    for blk in model.blocks:
        fully_shard(blk, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.1)

    g = torch.Generator(device="cpu").manual_seed(42 + rank)
    idx = torch.randint(0, a.vocab, (a.batch_size, a.seq_len + 1), generator=g).to(dev)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()

    times, losses = [], []
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())   # the step's one host sync
        if s >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    median_ms = statistics.median(times)
    tokens = a.batch_size * a.seq_len * world
    flops = tokens * (6.0 * params + 12.0 * a.layers * a.hidden * a.seq_len)
    tflops = flops / (median_ms / 1e3) / 1e12
    r = {
        "peer": "pytorch-fsdp2", "torch": torch.__version__, "gpu": torch.cuda.get_device_name(dev),
        "world_size": world, "dtype": a.dtype, "attention": a.attention, "parameters": params,
        "batch_size": a.batch_size, "seq_len": a.seq_len, "warmup": a.warmup, "steps": a.steps,
        "step_times_ms": times, "step_time_ms_median": median_ms,
        "tokens_per_second": tokens / (median_ms / 1e3), "achieved_tflops": tflops,
        "mfu": (tflops / (a.peak_tflops * world)) if a.peak_tflops else None,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(dev),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(dev),
        "losses": losses,
    }
    if rank == 0:
        print(f"pytorch-fsdp2 {a.dtype} N={world} params={params / 1e6:.1f}M B={a.batch_size} T={a.seq_len}: "
              f"median {median_ms:.1f} ms/step, {r['tokens_per_second']:.0f} tok/s, {tflops:.1f} TFLOP/s"
              + (f", MFU {100 * r['mfu']:.1f}%" if r["mfu"] else "")
              + f", peak allocated {r['peak_allocated_bytes'] / 2**30:.2f} GiB, losses {losses[0]:.4f} -> {losses[-1]:.4f}")
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(r, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PyTorch eager CPU training step of fsdp4j's bench-4x256 GPT, to compare with
`./fsdp4j bench step --device cpu`.

Same model as fsdp4j's bench-4x256 preset (vocab 256, context 128, 4 layers, 4 heads, width 256;
the GPT of gpt_reference.py: pre-LN GPT-2, tied LM head), same batch (8 x 128), same step:
zero the gradients, forward, backward, clip the global gradient norm to 1.0, AdamW (weight decay
on 2-D weights). Warm-up steps first, then the median of the timed steps, reported as tokens/s
and as achieved GFLOP/s with the same count fsdp4j uses (6 per parameter per token plus
12 * layers * width * seq for attention).

Run with Debian's PyTorch (no pip), in the same environment (OPENBLAS_* variables) and the same
quiet sitting as the fsdp4j benchmark:
    /usr/bin/python3 tools/reference/bench_step.py [--threads N] [--steps 10] [--warmup 3]
"""
import argparse
import os
import statistics
import time

import torch

from gpt_reference import Gpt, make_optimizer

BENCH_4X256 = dict(vocabSize=256, maxSeqLen=128, numLayers=4, numHeads=4, embedDim=256)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--steps", type=int, default=10, help="timed steps; the median is reported")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads (default: all cores)")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()
    if args.seq_len > BENCH_4X256["maxSeqLen"] or min(args.batch_size, args.seq_len, args.steps) < 1:
        ap.error(f"need 1 <= --seq-len <= {BENCH_4X256['maxSeqLen']} and positive --batch-size and --steps")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = Gpt(**BENCH_4X256)
    opt = make_optimizer(model)
    params = sum(p.numel() for p in model.parameters())
    b, t = args.batch_size, args.seq_len
    gen = torch.Generator().manual_seed(args.seed)
    vocab = BENCH_4X256["vocabSize"]

    times_ms = []
    for step in range(args.warmup + args.steps):
        tokens = torch.randint(vocab, (b, t), generator=gen)    # (B, T)
        targets = torch.randint(vocab, (b, t), generator=gen)   # (B, T)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = model(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        print(f"step {step + 1}/{args.warmup + args.steps} | loss {loss.item():.4f} | {elapsed_ms:.1f} ms"
              + (" (warm-up)" if step < args.warmup else ""))
        if step >= args.warmup:
            times_ms.append(elapsed_ms)

    median_ms = statistics.median(times_ms)
    gflop = b * t * (6.0 * params + 12.0 * BENCH_4X256["numLayers"] * BENCH_4X256["embedDim"] * t) / 1e9
    print(f"pytorch {torch.__version__} eager cpu, {torch.get_num_threads()} threads | {params} params | "
          f"batch {b} x {t}")
    print(f"# {'batch':>8} {'seq':>10} {'time(ms)':>12} {'tok/s':>12} {'GFLOP/step':>10} {'GFLOP/s':>10}")
    print(f"  {b:8d} {t:10d} {median_ms:12.2f} {b * t / (median_ms / 1e3):12.0f} {gflop:10.3f} "
          f"{gflop / (median_ms / 1e3):10.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""fsdp4j against PyTorch on the same CPU training configuration, alternating, with the ratio.

Runs `./fsdp4j bench step` and the PyTorch peer (../shared/peers/torch_fsdp_cpu.py, PyTorch 1.13
with OpenBLAS) on the same GPT shape, batch and world size, in turn (fsdp4j, PyTorch, fsdp4j,
PyTorch, ...), so that both see the same machine when its speed drifts, and prints per round the
tokens/s of each, their ratio, the load average before and after, and the peak resident memory
(RSS) of each process. At the end: the median ratio and its range over the rounds.

  N = 1: fsdp4j single rank (all cores) against PyTorch eager in one process with --torch-threads
         threads (default: all cores).
  N > 1: fsdp4j FULL_SHARD with N in-process ranks (cores / N threads each) against PyTorch FSDP
         FULL_SHARD over gloo with N processes of max(1, cores / N) threads each.

fsdp4j's RSS is its one process (all N ranks); PyTorch's is per rank process (the largest), and
the sum over its ranks. For N > 1, after the rounds, fsdp4j also runs once as PyTorch does, one
process per rank (`fsdp4j launch --standalone --nproc-per-node N -- train`, TCP over loopback), and
its largest process's peak RSS is printed beside PyTorch's per rank process: the per-process
comparison in the same layout. That run's tokens/s (median of its last --steps steps, from the
log of process 0, after --process-warmup steps, default 30: each process JIT-compiles the step for
itself, so its early steps are slower than the in-process run's, bench/archive/NOTES.md 2.11) is printed
with its ratio to PyTorch's median of the rounds: one run, not alternated. Between processes of
this host the bytes go through shared memory (bench/archive/NOTES.md 2.23). Example (from the
repository root):

  /usr/bin/python3 bench/vs_torch.py --preset small --seq-len 256 --world-size 1 --rounds 3
  /usr/bin/python3 bench/vs_torch.py --layers 8 --hidden 512 --heads 8 --seq-len 128 --world-size 2

A shared machine is noisy: quote the median ratio and its range, and the load beside them.

PyTorch's GEMMs run on OpenBLAS kernels picked by OPENBLAS_CORETYPE where it is set (each run's
header prints it). A machine that pins an older core (Haswell's AVX2 kernels on an AVX-512 CPU)
slows PyTorch's GEMMs by up to ~1.6x; quote such a run beside one with the CPU's own core, e.g.
OPENBLAS_CORETYPE=SkylakeX (bench/archive/NOTES.md, 2.16).

--suite runs issue 13's whole check in one sitting: bench-4x256 at T = 128, small at T = 128 and
256, and 8 layers of width 512 (8 heads) at T = 128, each at N = 1, 2 and 4 (--suite-rounds rounds
each), then prints one markdown table with the targets (N = 1 >= 1.5x PyTorch eager, N = 2 and 4
>= 1.3x PyTorch FSDP, on the median of the rounds) and fsdp4j's N = 2 against its own N = 1:

  /usr/bin/python3 bench/vs_torch.py --suite --suite-rounds 3,3,1 --json-out suite.json

(three rounds at N = 1 too; about 45 minutes on 2 cores with its N2/N1 pairs). With --as-processes,
every N > 1 round runs fsdp4j as N processes of one rank each (`fsdp4j launch`), PyTorch's own
layout, so that speed and peak RSS per process are both measured like for like in the same rounds.
After the table it checks fsdp4j's N = 2 against its own N = 1 with --self-pairs pairs per
configuration: N = 1 and N = 2 back to back, the order flipped every round and the configurations
interleaved, so that both sides of a pair see the same machine. Single runs of one configuration
differ by 10-20% on a 2-core machine, so only the median of such paired ratios says which is faster
(the suite's unpaired N = 1 rounds ran minutes before its N = 2 rounds; bench/archive/NOTES.md 12e). Its
runs take --self-warmup (40) untimed and --self-steps (32) timed steps, not --warmup and --steps:
the in-process N = 2 step is still settling over steps 30-40 at bench-4x256 on 2 cores, and 8-step
medians swing by +-8% (bench/archive/NOTES.md 2.25). --self-scaling runs that check alone, without PyTorch
(about 20 minutes for 6 pairs on 2 cores):

  /usr/bin/python3 bench/vs_torch.py --self-scaling --self-pairs 6 --json-out self.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.normpath(os.path.join(ROOT, "..", "shared", "peers", "torch_fsdp_cpu.py"))
# fsdp4j's presets (GptConfig): vocab 256 everywhere
PRESETS = {"tiny": dict(context=64, layers=2, heads=2, hidden=64),
           "small": dict(context=256, layers=6, heads=6, hidden=384),
           "bench-4x256": dict(context=128, layers=4, heads=4, hidden=256)}
# issue 13's configurations: (label, preset, overrides, seq_len)
SUITE = [("bench-4x256, T=128", "bench-4x256", {}, 128),
         ("small, T=128", "small", {}, 128),
         ("small, T=256", "small", {}, 256),
         ("L8, C512, H8, T=128", "small", dict(layers=8, hidden=512, heads=8), 128)]
TARGETS = {1: 1.5, 2: 1.3, 4: 1.3}   # fsdp4j / PyTorch tokens/s at each world size


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cmd, env=None):
    """Runs cmd; returns (exit code, output, peak RSS of the process tree's largest waited process in MiB)."""
    start = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out, usage.ru_maxrss / 1024.0, time.time() - start


def fsdp4j(a, shape, outdir):
    cmd = [os.path.join(ROOT, "fsdp4j"), "bench", "step", "--device", "cpu", "--preset", a.preset,
           "--layers", str(shape["layers"]), "--hidden", str(shape["hidden"]), "--heads", str(shape["heads"]),
           "--context", str(shape["context"]), "--seq-len", str(a.seq_len), "--batch-size", str(a.batch_size),
           "--world-size", str(a.world_size), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--out", outdir]
    if a.world_size > 1:
        cmd += ["--strategy", "full_shard"]
    code, out, rss, wall = run(cmd)
    if code != 0:
        sys.exit(f"fsdp4j failed ({code}):\n{out}")
    with open(os.path.join(outdir, "step.json")) as f:
        r = json.load(f)
    tok = r.get("tokensPerSecond", r.get("tokens_per_second"))
    return tok, rss, [rss], wall


def fsdp4j_processes(a, shape, outdir):
    """fsdp4j as N processes of one rank each: (peak RSS MiB of the largest process, tokens/s of the last a.steps steps)."""
    cmd = [os.path.join(ROOT, "fsdp4j"), "launch", "--standalone", "--nproc-per-node", str(a.world_size), "--",
           "train", "--device", "cpu", "--preset", a.preset,
           "--layers", str(shape["layers"]), "--hidden", str(shape["hidden"]), "--heads", str(shape["heads"]),
           "--context", str(shape["context"]), "--seq-len", str(a.seq_len), "--batch-size", str(a.batch_size),
           "--world-size", str(a.world_size), "--strategy", "full_shard", "--steps", str(a.steps + a.process_warmup),
           "--out", outdir]
    code, out, rss, _ = run(cmd)   # wait4's peak RSS: the largest of the launcher and the processes it waited for
    if code != 0:
        sys.exit(f"fsdp4j launch failed ({code}):\n{out}")
    with open(os.path.join(outdir, "metrics.jsonl")) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    times = [s["time_ms"] for s in steps[-a.steps:]]
    return rss, a.batch_size * a.seq_len / (statistics.median(times) / 1000.0)


def torch(a, shape):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        js = f.name
    mode = "single" if a.world_size == 1 else "fsdp_full"
    threads = a.torch_threads if a.world_size == 1 else 0   # 0: max(1, cores / N) per rank
    cmd = ["/usr/bin/python3", PEER, "--modes", mode, "--nprocs", str(a.world_size),
           "--n-layer", str(shape["layers"]), "--n-embd", str(shape["hidden"]), "--n-head", str(shape["heads"]),
           "--seq-len", str(a.seq_len), "--global-batch", str(a.batch_size),
           "--steps", str(a.steps + a.warmup), "--warmup", str(a.warmup), "--threads", str(threads),
           "--json-out", js]
    code, out, _, wall = run(cmd)
    try:
        with open(js) as f:
            runs = json.load(f)["runs"]
    finally:
        os.unlink(js)
    r = next((r for r in runs if r["mode"] == mode and r["N"] == a.world_size), None)
    if code != 0 or r is None or "error" in r:
        sys.exit(f"the PyTorch peer failed ({code}):\n{out}")
    return r["tok_s"], max(r["peak_rss_mib"]), r["peak_rss_mib"], wall


def blas_core():
    """The OpenBLAS kernels both sides were told to use: PyTorch's GEMM speed depends on it (bench/archive/NOTES.md, 2.16)."""
    return os.environ.get("OPENBLAS_CORETYPE", "(auto-detected)")


def compare(a, shape, rounds_wanted):
    """rounds_wanted fsdp4j-then-PyTorch pairs at a.world_size; prints a line per round; returns the rounds."""
    what = "single rank vs PyTorch eager" if a.world_size == 1 else f"FULL_SHARD N={a.world_size} vs PyTorch FSDP"
    if a.as_processes and a.world_size > 1:
        what += (f" | fsdp4j as {a.world_size} processes of one rank (launch --standalone; RSS of the largest;"
                 f" {a.process_warmup} warm-up steps)")
    print(f"# {what} | layers {shape['layers']} hidden {shape['hidden']} heads {shape['heads']} "
          f"| batch {a.batch_size} x {a.seq_len} | {a.warmup} warm-up + {a.steps} timed steps | {os.cpu_count()} cores "
          f"| OPENBLAS_CORETYPE {blas_core()}")
    print(f"# {'round':>5} {'fsdp4j tok/s':>13} {'torch tok/s':>12} {'ratio':>7} {'load before/after':>18} "
          f"{'fsdp4j RSS MiB':>15} {'torch RSS/rank MiB':>19}")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="vs_torch_") as tmp:
        for i in range(rounds_wanted):
            l0 = loadavg()
            if a.as_processes and a.world_size > 1:
                f_rss, f_tok = fsdp4j_processes(a, shape, os.path.join(tmp, f"r{i}"))
            else:
                f_tok, f_rss, _, _ = fsdp4j(a, shape, os.path.join(tmp, f"r{i}"))
            t_tok, t_rss, t_ranks, _ = torch(a, shape)
            l1 = loadavg()
            rounds.append(dict(fsdp4j_tok_s=f_tok, torch_tok_s=t_tok, ratio=f_tok / t_tok, load_before=l0,
                               load_after=l1, fsdp4j_rss_mib=f_rss, torch_rss_mib_per_rank=t_ranks))
            print(f"  {i + 1:5d} {f_tok:13.0f} {t_tok:12.0f} {f_tok / t_tok:7.2f} {l0:8.2f} / {l1:<7.2f} "
                  f"{f_rss:15.0f} {'/'.join(f'{x:.0f}' for x in t_ranks):>19}", flush=True)
        per_process = None
        if a.world_size > 1 and not a.as_processes:
            p_rss, p_tok = fsdp4j_processes(a, shape, os.path.join(tmp, "processes"))
            t_med = statistics.median(r["torch_tok_s"] for r in rounds)
            per_process = dict(rss_mib=p_rss, tok_s=p_tok, ratio_to_torch_median=p_tok / t_med)
            print(f"# fsdp4j as {a.world_size} processes (one rank each): peak RSS {p_rss:.0f} MiB in the largest;"
                  f" {p_tok:.0f} tok/s over its last {a.steps} of {a.steps + a.process_warmup} steps,"
                  f" {p_tok / t_med:.2f}x PyTorch's median above (one run, not alternated)", flush=True)
    ratios = [r["ratio"] for r in rounds]
    f_rss = max(r["fsdp4j_rss_mib"] for r in rounds)
    t_rank = max(max(r["torch_rss_mib_per_rank"]) for r in rounds)
    t_sum = max(sum(r["torch_rss_mib_per_rank"]) for r in rounds)
    print(f"# ratio fsdp4j/PyTorch tokens/s: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}"
          f" | peak RSS fsdp4j {f_rss:.0f} MiB ("
          f"{'the largest of its processes' if a.as_processes and a.world_size > 1 else f'one process, {a.world_size} rank(s)'});"
          f" PyTorch {t_rank:.0f} MiB per rank,"
          f" {t_sum:.0f} MiB over its {a.world_size} process(es)", flush=True)
    return rounds, per_process


def self_scaling(a, pairs):
    """fsdp4j N = 2 against its own N = 1 on the suite's configurations, paired and alternated; returns the rows.

    Its runs take --self-warmup and --self-steps instead of --warmup and --steps, on a copy of the options."""
    a = argparse.Namespace(**vars(a))
    a.warmup, a.steps = a.self_warmup, a.self_steps
    print(f"## fsdp4j N = 2 against its own N = 1, paired | {pairs} pair(s) per configuration, order flipped each round "
          f"| batch {a.batch_size} | {a.warmup} warm-up + {a.steps} timed steps | {os.cpu_count()} cores", flush=True)
    print(f"# {'round':>5} {'configuration':<22} {'N=1 tok/s':>10} {'N=2 tok/s':>10} {'N2/N1':>7} {'load before/after':>18}")
    pairs_of = {label: [] for label, *_ in SUITE}
    with tempfile.TemporaryDirectory(prefix="vs_torch_self_") as tmp:
        for i in range(pairs):
            for c, (label, preset, overrides, seq_len) in enumerate(SUITE):
                a.preset, a.seq_len = preset, seq_len
                shape = shape_of(a, preset, overrides)
                l0 = loadavg()
                tok = {}
                order = (1, 2) if i % 2 == 0 else (2, 1)
                for n in order:
                    a.world_size = n
                    tok[n], _, _, _ = fsdp4j(a, shape, os.path.join(tmp, f"p{i}-c{c}-n{n}"))
                l1 = loadavg()
                pairs_of[label].append(dict(n1_tok_s=tok[1], n2_tok_s=tok[2], ratio=tok[2] / tok[1],
                                            first=order[0], load_before=l0, load_after=l1))
                print(f"  {i + 1:5d} {label:<22} {tok[1]:10.0f} {tok[2]:10.0f} {tok[2] / tok[1]:7.3f} "
                      f"{l0:8.2f} / {l1:<7.2f}", flush=True)
    rows = []
    print()
    print("fsdp4j N = 2 against its own N = 1 (tokens/s, N2/N1 per pair; >= 1.00 on the median: no slower):")
    for label, ps in pairs_of.items():
        ratios = [p["ratio"] for p in ps]
        med = statistics.median(ratios)
        rows.append(dict(config=label, pairs=ps, median_ratio=med, no_slower=med >= 1.0))
        print(f"  {label}: median {med:.3f}, range {min(ratios):.3f}-{max(ratios):.3f} "
              f"({', '.join(f'{r:.3f}' for r in ratios)}) -> {'no slower' if med >= 1.0 else 'slower'}")
    print(f"# N = 2 no slower than N = 1 on the median of the pairs: {sum(r['no_slower'] for r in rows)} of {len(rows)}",
          flush=True)
    return rows


def shape_of(a, preset, overrides):
    shape = dict(PRESETS[preset])
    shape.update(overrides)
    shape["context"] = max(shape["context"], a.seq_len)
    return shape


def suite(a, ap):
    """Issue 13's configurations at N = 1, 2, 4 in one sitting; a markdown table of ratios against the targets."""
    try:
        per_n = [int(x) for x in a.suite_rounds.split(",")]
    except ValueError:
        per_n = []
    if len(per_n) != 3 or min(per_n) < 1:
        ap.error(f"--suite-rounds takes three counts >= 1 (N = 1, 2, 4), got '{a.suite_rounds}'")
    results = []
    for label, preset, overrides, seq_len in SUITE:
        for n, r in zip((1, 2, 4), per_n):
            a.preset, a.seq_len, a.world_size = preset, seq_len, n
            shape = shape_of(a, preset, overrides)
            print(f"## {label}, N = {n}", flush=True)
            rounds, per_process = compare(a, shape, r)
            results.append(dict(config=label, N=n, shape=shape, rounds=rounds, fsdp4j_processes=per_process))
    print()
    print("| configuration | N | fsdp4j tok/s | PyTorch tok/s | fsdp4j/PyTorch | target | load | "
          "peak RSS MiB: fsdp4j process vs PyTorch process (sum) | fsdp4j as N processes: RSS of one (tok/s, x PyTorch) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for res in results:
        rs = res["rounds"]
        ratios = [r["ratio"] for r in rs]
        med = statistics.median(ratios)
        target = TARGETS[res["N"]]
        span = f"{min(ratios):.2f}–{max(ratios):.2f} (median {med:.2f})" if len(rs) > 1 else f"{med:.2f}"
        loads = [r["load_before"] for r in rs] + [r["load_after"] for r in rs]
        t_rank = max(max(r["torch_rss_mib_per_rank"]) for r in rs)
        t_sum = max(sum(r["torch_rss_mib_per_rank"]) for r in rs)
        res["median_ratio"] = med
        res["meets_target"] = med >= target
        pp = res["fsdp4j_processes"]
        processes = "–" if pp is None else (f"{pp['rss_mib']:.0f} vs {t_rank:.0f}"
                                            f" ({'below' if pp['rss_mib'] < t_rank else 'above'};"
                                            f" {pp['tok_s']:.0f}, {pp['ratio_to_torch_median']:.2f}x)")
        f_toks = ", ".join("%.0f" % r["fsdp4j_tok_s"] for r in rs)
        t_toks = ", ".join("%.0f" % r["torch_tok_s"] for r in rs)
        print(f"| {res['config']} | {res['N']} | {f_toks} | {t_toks} | {span} "
              f"| >= {target} ({'yes' if med >= target else 'no'}) | {min(loads):.1f}–{max(loads):.1f} "
              f"| {max(r['fsdp4j_rss_mib'] for r in rs):.0f} vs {t_rank:.0f} ({t_sum:.0f}) | {processes} |")
    met = sum(r["meets_target"] for r in results)
    print(f"# targets met on the median: {met} of {len(results)}", flush=True)
    scaling = None
    if a.self_pairs > 0:
        print()
        scaling = self_scaling(a, a.self_pairs)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(dict(args=vars(a), openblas_coretype=blas_core(), results=results, self_scaling=scaling),
                      f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--context", type=int, help="default: the preset's, or --seq-len if larger")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8, help="global batch (sequences per step, all ranks)")
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="fsdp4j-then-PyTorch pairs")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per run (the median is taken)")
    ap.add_argument("--warmup", type=int, default=15,
                    help="untimed steps per run, as `fsdp4j bench step`'s default: on 2 cores fsdp4j's JIT "
                         "needs 10-14 steps, and 8 left compilation in the timed steps (bench/archive/NOTES.md, 2.16)")
    ap.add_argument("--process-warmup", type=int, default=30,
                    help="N > 1: warm-up steps of the run as N processes (each JVM compiles the step itself)")
    ap.add_argument("--as-processes", action="store_true",
                    help="N > 1: every round runs fsdp4j as N processes of one rank each, as PyTorch runs, instead"
                         " of N in-process ranks (tokens/s after --process-warmup steps; RSS of the largest process)")
    ap.add_argument("--torch-threads", type=int, default=os.cpu_count(), help="PyTorch threads at N = 1")
    ap.add_argument("--json-out", help="write every round and the summary here")
    ap.add_argument("--suite", action="store_true",
                    help="issue 13's configurations at N = 1, 2, 4 (shape and world-size options are then ignored)")
    ap.add_argument("--suite-rounds", default="3,3,1", help="--suite: rounds at N = 1, 2, 4")
    ap.add_argument("--self-scaling", action="store_true",
                    help="only fsdp4j N = 2 against its own N = 1 on the suite's configurations, paired (no PyTorch)")
    ap.add_argument("--self-pairs", type=int, default=6,
                    help="--suite and --self-scaling: N = 1 / N = 2 pairs per configuration (0: none, --suite only)")
    ap.add_argument("--self-warmup", type=int, default=40,
                    help="untimed steps of each N2/N1 pair's runs: at bench-4x256 (~75 ms a step) the in-process N = 2"
                         " step still settles over steps 30-40 (bench/archive/NOTES.md 2.25)")
    ap.add_argument("--self-steps", type=int, default=32,
                    help="timed steps of each N2/N1 pair's runs (the median): 8-step medians of one run swing by"
                         " +-8%% on 2 cores, more than the few %% the pairs are to tell (2.25)")
    a = ap.parse_args()
    if a.process_warmup < 0:
        ap.error(f"--process-warmup must be >= 0, got {a.process_warmup}")
    if a.self_warmup < 0 or a.self_steps < 1:
        ap.error(f"--self-warmup must be >= 0 and --self-steps >= 1, got {a.self_warmup} and {a.self_steps}")
    if a.self_pairs < 0 or (a.self_scaling and a.self_pairs < 1):
        ap.error(f"--self-pairs must be >= 1 with --self-scaling (>= 0 with --suite), got {a.self_pairs}")
    if a.batch_size % 4 and a.suite:
        ap.error("--suite needs a --batch-size that 4 ranks divide")
    if a.batch_size % 2 and a.self_scaling:
        ap.error("--self-scaling needs a --batch-size that 2 ranks divide")
    if a.suite and a.self_scaling:
        ap.error("--suite already ends with the --self-scaling check: give one of them")
    if a.suite:
        suite(a, ap)
        return
    if a.self_scaling:
        rows = self_scaling(a, a.self_pairs)
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(dict(args=vars(a), self_scaling=rows), f, indent=1)
        return
    overrides = {k: getattr(a, k) for k in ("layers", "hidden", "heads", "context") if getattr(a, k) is not None}
    shape = shape_of(a, a.preset, overrides)
    if a.batch_size % a.world_size:
        ap.error("--batch-size must be a multiple of --world-size")

    rounds, per_process = compare(a, shape, a.rounds)
    ratios = [r["ratio"] for r in rounds]
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(dict(shape=shape, args=vars(a), openblas_coretype=blas_core(), rounds=rounds, median_ratio=statistics.median(ratios),
                           fsdp4j_processes=per_process), f, indent=1)


if __name__ == "__main__":
    main()

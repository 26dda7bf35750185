#!/usr/bin/python3
"""PyTorch reference for fsdp4j's GPT: builds the tiny model from a seed and dumps what the
Java parity test (runtime-core: org.fsdp4j.model.GptParityTest) compares against.

The model is nanoGPT's GPT-2 written out in plain PyTorch: token + position embeddings,
pre-LN blocks (LayerNorm eps 1e-5 with bias; causal self-attention with one qkv Linear laid
out [q|k|v] and scale 1/sqrt(head size); MLP 4C with tanh-approximated GELU), a final
LayerNorm and an LM head tied to the token embedding. Loss: cross-entropy, mean over B*T.
AdamW: torch.optim.AdamW, weight decay on 2-D weights only.

Two dumps, same model, batch and hyperparameters, different initial weights:
    gpt_tiny.bin        nanoGPT's init: weights N(0, 0.02), residual projections
                        N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gains 1
    gpt_tiny_large.bin  every weight and bias N(0, 0.25), gains 1 + N(0, 0.25): GELU, softmax
                        and LayerNorm far from linear, and biases and gains that matter
and a bf16 dump of each, the same weights rounded to bf16 (gpt_tiny_bf16.bin,
gpt_tiny_large_bf16.bin).

Precision: the weights are drawn in fp32 (so Java and PyTorch start from the same bits); all
the reference computation runs in float64 and is stored rounded to fp32, so the Java test
measures its own fp32 error against (nearly) exact values. The same computation in fp32
PyTorch is run too, and its deviation from float64 is written to the header as a yardstick
for what an fp32 implementation's error looks like (the "torchFp32Error" entry).
The bf16 dumps hold what bf16 autocast computes (one forward and its backward, with CUDA
autocast's numerics: see BF16_NUMERICS and fp32() below); their yardstick "torchBf16Error" is
its deviation from the float64 run of the same bf16 weights.

File format (all little-endian), version 1:
    bytes 0..7    magic  b"FSDP4JRF"
    bytes 8..11   uint32 format version (1)
    bytes 12..15  uint32 H = byte length of the header
    bytes 16..16+H  UTF-8 JSON header
    then the payload: the tensors' raw elements, each at header.tensors[i].offset bytes
    from the start of the payload, row-major, dtype "f32" (IEEE float32) or "i32" (int32).
Header keys: format, version, generator, torchVersion, seed, init, config {vocabSize, maxSeqLen,
numLayers, numHeads, embedDim}, batch {batchSize, seqLen}, adamw {lr, beta1, beta2, eps,
weightDecay, steps} (fp32 dumps), params (parameter names in module order), torchFp32Error
(fp32 dumps) or paramDtype "bf16", numerics and torchBf16Error (bf16 dumps), and tensors: a
list of {name, dtype, shape, offset, numBytes}. Tensor names:
    tokens, targets      (B, T) i32
    logits               (B, T, V) f32, of the first forward (bf16 values in a bf16 dump)
    loss                 () f32, mean cross-entropy of the first forward
    param.<name>         initial weights (bf16 values in a bf16 dump)
    grad.<name>          gradient of the first forward's loss (bf16 values in a bf16 dump)
    step1.<name>         weights after the first AdamW step (fp32 dumps)
    stepLosses           (steps,) f32, the loss of each forward in the AdamW loop; each
                         iteration is forward, loss, backward, step on the same batch, so
                         stepLosses[0] == loss (fp32 dumps)

Run: /usr/bin/python3 tools/reference/gpt_reference.py [--out-dir DIR] (see README.md).
"""
import argparse
import contextlib
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC = b"FSDP4JRF"
FORMAT_VERSION = 1
DEFAULT_OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime-core", "src",
                               "test", "resources", "reference")

SEED = 1234
CONFIG = dict(vocabSize=64, maxSeqLen=16, numLayers=2, numHeads=2, embedDim=32)
BATCH = dict(batchSize=4, seqLen=16)
ADAMW = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weightDecay=0.1, steps=10)
LARGE_STD = 0.25
INITS = {"nanogpt": "nanoGPT: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, gains 1",
         "large": f"every weight and bias N(0, {LARGE_STD}), LayerNorm gains 1 + N(0, {LARGE_STD})"}
OUTPUTS = {"gpt_tiny.bin": "nanogpt", "gpt_tiny_large.bin": "large"}
BF16_OUTPUTS = {"gpt_tiny_bf16.bin": "nanogpt", "gpt_tiny_large_bf16.bin": "large"}
HALF = (torch.bfloat16, torch.float16)
BF16_NUMERICS = ("parameters bf16; activations and gradients bf16; matmul/linear fp32 accumulation, one rounding"
                 " (bias included); layer_norm, softmax, cross_entropy and GELU in fp32, one rounding of the"
                 " output; embedding gradient summed in fp32; loss fp32")

# The half run's numerics are CUDA autocast's (what FSDP2's MixedPrecisionPolicy(param_dtype=bf16)
# trains with, and what fsdp4j computes): matmul/linear take half operands, accumulate in fp32 and
# round once (bias included); layer_norm, softmax and cross_entropy run in fp32 (autocast's fp32
# list), their outputs rounded once by the matmul that reads them; pointwise ops compute in fp32
# and round once. torch 1.13's CPU autocast gets the matmuls right (oneDNN; check_bf16_gemm) but
# has no layer_norm/softmax in its fp32 list, and its bf16 layer_norm and GELU kernels round
# intermediates to bf16 (58% and 47% of outputs off by an ulp), its bf16 index backward sums in
# bf16. The helpers below restore CUDA autocast's arithmetic in the half run and are the identity
# (same ops, same bits) in the float64 and fp32 runs.


def fp32(x):
    """x in fp32 if it is a half activation or parameter, else x itself."""
    return x.float() if x.dtype in HALF else x


def layer_norm(ln, x):
    """ln(x), in fp32 for a half x (CUDA autocast's fp32 list)."""
    return F.layer_norm(fp32(x), ln.normalized_shape, fp32(ln.weight), fp32(ln.bias), ln.eps)


def embed(wte, tokens):
    """wte[tokens]; for a half wte as a one-hot matmul, whose backward sums each token's row
    gradients in fp32 and rounds once (as F.embedding's CUDA backward does, and fsdp4j; torch 1.13's
    CPU index backward rounds after each addition)."""
    if wte.dtype in HALF:
        return F.one_hot(tokens, wte.size(0)).to(wte.dtype) @ wte   # one term per output: exact
    return wte[tokens]


class CausalSelfAttention(nn.Module):
    def __init__(self, c, n_head, max_t):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(c, 3 * c)      # weight (3C, C): rows [q | k | v]
        self.proj = nn.Linear(c, c)
        self.register_buffer("mask", torch.tril(torch.ones(max_t, max_t, dtype=torch.bool)))

    def forward(self, x):
        b, t, c = x.shape
        hs = c // self.n_head
        q, k, v = self.qkv(x).split(c, dim=2)                   # each (B, T, C)
        q = q.view(b, t, self.n_head, hs).transpose(1, 2)       # (B, H, T, hs)
        k = k.view(b, t, self.n_head, hs).transpose(1, 2)
        v = v.view(b, t, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, H, T, T)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        att = F.softmax(fp32(att), dim=-1)                       # fp32 out, rounded by the next matmul
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c, 4 * c)
        self.proj = nn.Linear(4 * c, c)

    def forward(self, x):
        h = self.fc(x)
        return self.proj(F.gelu(fp32(h), approximate="tanh").to(h.dtype))   # one rounding in the half run


class Block(nn.Module):
    def __init__(self, c, n_head, max_t):
        super().__init__()
        self.ln1 = nn.LayerNorm(c, eps=1e-5)
        self.attn = CausalSelfAttention(c, n_head, max_t)
        self.ln2 = nn.LayerNorm(c, eps=1e-5)
        self.mlp = Mlp(c)

    def forward(self, x):
        x = x + self.attn(layer_norm(self.ln1, x))
        return x + self.mlp(layer_norm(self.ln2, x))


class Gpt(nn.Module):
    def __init__(self, vocabSize, maxSeqLen, numLayers, numHeads, embedDim):
        super().__init__()
        self.wte = nn.Parameter(torch.empty(vocabSize, embedDim))   # (V, C), also the LM head
        self.wpe = nn.Parameter(torch.empty(maxSeqLen, embedDim))   # (maxT, C)
        self.h = nn.ModuleList(Block(embedDim, numHeads, maxSeqLen) for _ in range(numLayers))
        self.lnf = nn.LayerNorm(embedDim, eps=1e-5)
        self._init(numLayers)

    def _init(self, num_layers):
        # nanoGPT: N(0, 0.02) for embeddings and Linear weights, 0.02/sqrt(2L) for the residual
        # projections, zero biases; LayerNorm keeps its default gain 1 and bias 0.
        nn.init.normal_(self.wte, 0.0, 0.02)
        nn.init.normal_(self.wpe, 0.0, 0.02)
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * num_layers) if name.endswith("proj") else 0.02
                nn.init.normal_(m.weight, 0.0, std)
                nn.init.zeros_(m.bias)

    def forward(self, tokens, targets):
        b, t = tokens.shape
        x = embed(self.wte, tokens) + self.wpe[:t]           # (B, T, C)
        for block in self.h:
            x = block(x)
        logits = layer_norm(self.lnf, x) @ self.wte.t()      # (B, T, V), tied head
        loss = F.cross_entropy(fp32(logits).view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def param_names(cfg):
    """fsdp4j's parameter names, in PyTorch's module order (they are the module names too)."""
    names = ["wte", "wpe"]
    for i in range(cfg["numLayers"]):
        p = f"h.{i}."
        names += [p + "ln1.weight", p + "ln1.bias", p + "attn.qkv.weight", p + "attn.qkv.bias",
                  p + "attn.proj.weight", p + "attn.proj.bias", p + "ln2.weight", p + "ln2.bias",
                  p + "mlp.fc.weight", p + "mlp.fc.bias", p + "mlp.proj.weight", p + "mlp.proj.bias"]
    return names + ["lnf.weight", "lnf.bias"]


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weightDecay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"],
                             foreach=False)


def forward_backward(model, tokens, targets, autocast_dtype=None):
    """One forward (under CPU autocast to autocast_dtype, if given) and backward; returns the
    logits, the loss and every gradient as fp32 tensors, and the loss tensor itself."""
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext():
        logits, loss = model(tokens, targets)
    loss.backward()   # outside autocast, as PyTorch recommends: each op's backward runs in its forward's dtypes
    out = {"logits": logits.detach().float(), "loss": loss.detach().float()}
    for n, p in model.named_parameters():
        out["grad." + n] = p.grad.detach().float().clone()
    return out, loss


def run(model, tokens, targets):
    """First forward/backward, then the AdamW loop on the same batch; returns fp32 results."""
    out, loss = forward_backward(model, tokens, targets)
    params = dict(model.named_parameters())
    opt = make_optimizer(model)
    step_losses = []
    for step in range(ADAMW["steps"]):
        if step > 0:   # the first step reuses the gradient of the forward above
            opt.zero_grad(set_to_none=True)
            _, loss = model(tokens, targets)
            loss.backward()
        step_losses.append(loss.item())
        opt.step()
        if step == 0:
            for n, p in params.items():
                out["step1." + n] = p.detach().float().clone()
    out["stepLosses"] = torch.tensor(step_losses, dtype=torch.float64).float()
    return out


def large_weights(model, std, gen):
    """Redraws every parameter at a scale where GELU, softmax and LayerNorm are far from linear and
    biases and gains matter (nanoGPT's init, with zero biases and unit gains, hides mistakes there)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            gain = name == "lnf.weight" or name.endswith((".ln1.weight", ".ln2.weight"))
            p.copy_(torch.randn(p.shape, generator=gen) * std + (1.0 if gain else 0.0))


def max_abs(a, b):
    return float((a.double() - b.double()).abs().max())


def make_batch():
    """tokens, targets (B, T), drawn from their own seed so both dumps share them."""
    gen = torch.Generator().manual_seed(SEED + 1)
    shape = (BATCH["batchSize"], BATCH["seqLen"])
    return (torch.randint(CONFIG["vocabSize"], shape, generator=gen),
            torch.randint(CONFIG["vocabSize"], shape, generator=gen))


def initial_weights(init_name):
    """The fp32 weights by name, for init "nanogpt" or "large" (see INITS)."""
    torch.manual_seed(SEED)
    model = Gpt(**CONFIG)
    assert [n for n, _ in model.named_parameters()] == param_names(CONFIG)
    if init_name == "large":
        large_weights(model, LARGE_STD, torch.Generator().manual_seed(SEED + 2))
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def model_with(weights, dtype):
    model = Gpt(**CONFIG).to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(weights[n].to(dtype))
    return model


def deviation(run, ref, names):
    """How far one run's logits, loss and gradients land from the float64 reference's."""
    return {
        "logitsMaxAbs": max_abs(run["logits"], ref["logits"]),
        "logitsMaxAbsOverMaxAbsLogit": max_abs(run["logits"], ref["logits"]) / float(ref["logits"].abs().max()),
        "lossAbs": max_abs(run["loss"], ref["loss"]),
        "gradMaxAbs": max(max_abs(run["grad." + n], ref["grad." + n]) for n in names),
        "gradMaxAbsOverMaxAbsGrad": max(max_abs(run["grad." + n], ref["grad." + n])
                                        / float(ref["grad." + n].abs().max()) for n in names),
    }


def header(init_name, adamw=None, **entries):
    """The header entries every dump has (adamw where it has AdamW results), then the given ones."""
    h = {"format": "fsdp4j-reference", "version": FORMAT_VERSION, "generator": "tools/reference/gpt_reference.py",
         "torchVersion": torch.__version__, "seed": SEED, "init": INITS[init_name], "config": CONFIG, "batch": BATCH}
    if adamw:
        h["adamw"] = adamw
    return dict(h, params=param_names(CONFIG), **entries)


def reference_case(init_name, tokens, targets):
    """(header entries, tensors) of one dump: fp32 initial weights, float64 results stored as fp32."""
    init = initial_weights(init_name)
    ref = run(model_with(init, torch.float64), tokens, targets)
    fp32_run = run(model_with(init, torch.float32), tokens, targets)

    names = param_names(CONFIG)
    torch_fp32_error = dict(deviation(fp32_run, ref, names), stepLossesMaxRel=float(
        ((fp32_run["stepLosses"].double() - ref["stepLosses"].double()).abs()
         / ref["stepLosses"].double().abs()).max()))
    tensors = [("tokens", tokens.to(torch.int32)), ("targets", targets.to(torch.int32)),
               ("logits", ref["logits"]), ("loss", ref["loss"])]
    tensors += [("param." + n, init[n]) for n in names]
    tensors += [("grad." + n, ref["grad." + n]) for n in names]
    tensors += [("step1." + n, ref["step1." + n]) for n in names]
    tensors.append(("stepLosses", ref["stepLosses"]))
    return header(init_name, adamw=ADAMW, torchFp32Error=torch_fp32_error), tensors


def bf16_case(init_name, tokens, targets):
    """(header entries, tensors) of one bf16 dump: the initial weights rounded to bf16 (as FSDP2's
    MixedPrecisionPolicy(param_dtype=bfloat16) casts the unsharded parameters), one forward under
    autocast to bf16 with CUDA autocast's numerics (see fp32() above) and its backward, results
    (bf16 logits and gradients, fp32 loss) widened to fp32. The float64 run from the same bf16
    weights gives the yardstick torchBf16Error: the rounding of activations and gradients alone."""
    weights = {n: w.to(torch.bfloat16) for n, w in initial_weights(init_name).items()}
    bf16, _ = forward_backward(model_with(weights, torch.bfloat16), tokens, targets, torch.bfloat16)
    ref, _ = forward_backward(model_with(weights, torch.float64), tokens, targets)

    names = param_names(CONFIG)
    tensors = [("tokens", tokens.to(torch.int32)), ("targets", targets.to(torch.int32)),
               ("logits", bf16["logits"]), ("loss", bf16["loss"])]
    tensors += [("param." + n, weights[n].float()) for n in names]
    tensors += [("grad." + n, bf16["grad." + n]) for n in names]
    return header(init_name, paramDtype="bf16", numerics=BF16_NUMERICS,
                  torchBf16Error=deviation(bf16, ref, names)), tensors


def check_bf16_gemm():
    """Refuses to write bf16 dumps unless this PyTorch's CPU bf16 linear accumulates in fp32 and
    rounds once, bias included (oneDNN's path, taken on CPUs with AVX-512; the fallback differs)."""
    gen = torch.Generator().manual_seed(SEED)
    x, w, b = (torch.randn(shape, generator=gen).bfloat16() for shape in ((256, 128), (96, 128), (96,)))
    once = (x.double() @ w.double().t() + b.double()).float().bfloat16()
    off = float((F.linear(x, w, b) != once).float().mean())
    if off > 0.01:   # fp32 summation order may flip a rare tie; bf16 accumulation or a second rounding: ~25%
        raise SystemExit(f"this PyTorch's bf16 linear differs from fp32 accumulation with one rounding in {off:.0%}"
                         " of its outputs (no oneDNN bf16 GEMM on this CPU?): the bf16 dumps would not be the"
                         " reference fsdp4j is held to; generate them on a CPU with AVX-512")


def write_dump(path, header, tensors):
    entries, payload, offset = [], [], 0
    for name, x in tensors:
        x = x.contiguous()
        dtype = {torch.float32: "f32", torch.int32: "i32"}[x.dtype]
        raw = x.numpy().astype("<" + ("f4" if dtype == "f32" else "i4")).tobytes()
        entries.append({"name": name, "dtype": dtype, "shape": list(x.shape), "offset": offset,
                        "numBytes": len(raw)})
        payload.append(raw)
        offset += len(raw)
    header_bytes = json.dumps(dict(header, tensors=entries), indent=1).encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", FORMAT_VERSION, len(header_bytes)))
        f.write(header_bytes)
        for raw in payload:
            f.write(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR, help="output folder (default: the test resources)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokens, targets = make_batch()
    for file_name, init_name in OUTPUTS.items():
        header_entries, tensors = reference_case(init_name, tokens, targets)
        path = os.path.join(os.path.abspath(args.out_dir), file_name)
        write_dump(path, header_entries, tensors)
        losses = " ".join(f"{x:.6f}" for x in tensors[-1][1].tolist())
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")
        print(f"  step losses {losses}")
        print(f"  PyTorch fp32 vs float64: {json.dumps(header_entries['torchFp32Error'])}")
    check_bf16_gemm()
    for file_name, init_name in BF16_OUTPUTS.items():
        header_entries, tensors = bf16_case(init_name, tokens, targets)
        path = os.path.join(os.path.abspath(args.out_dir), file_name)
        write_dump(path, header_entries, tensors)
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors, loss {tensors[3][1].item():.6f}")
        print(f"  PyTorch bf16 autocast vs float64: {json.dumps(header_entries['torchBf16Error'])}")


if __name__ == "__main__":
    main()

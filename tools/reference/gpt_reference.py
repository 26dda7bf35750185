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
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_common as common  # noqa: E402
from reference_common import embed, fp32  # noqa: E402,F401

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
BF16_NUMERICS = ("parameters bf16; activations and gradients bf16; matmul/linear fp32 accumulation, one rounding"
                 " (bias included); layer_norm, softmax, cross_entropy and GELU in fp32, one rounding of the"
                 " output; embedding gradient summed in fp32; loss fp32")

# The half run's numerics are CUDA autocast's: see reference_common.py. fp32(), embed() and
# layer_norm() restore them in the half run and are the identity in the float64 and fp32 runs.


def layer_norm(ln, x):
    """ln(x), in fp32 for a half x (CUDA autocast's fp32 list)."""
    return F.layer_norm(fp32(x), ln.normalized_shape, fp32(ln.weight), fp32(ln.bias), ln.eps)


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
    return common.adamw_optimizer(model, ADAMW)


def run(model, tokens, targets):
    """First forward/backward, then the AdamW loop on the same batch; returns fp32 results."""
    return common.run(model, tokens, targets, ADAMW, lambda m: make_optimizer(m))


def large_weights(model, std, gen):
    """Redraws every parameter at a scale where GELU, softmax and LayerNorm are far from linear and
    biases and gains matter (nanoGPT's init, with zero biases and unit gains, hides mistakes there)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            gain = name == "lnf.weight" or name.endswith((".ln1.weight", ".ln2.weight"))
            p.copy_(torch.randn(p.shape, generator=gen) * std + (1.0 if gain else 0.0))


FAMILY = common.Family(
    generator="tools/reference/gpt_reference.py", seed=SEED, config=CONFIG, batch=BATCH, adamw=ADAMW, inits=INITS,
    build=lambda: Gpt(**CONFIG),
    redraw={"large": lambda model: large_weights(model, LARGE_STD, torch.Generator().manual_seed(SEED + 2))},
    make_optimizer=lambda m: make_optimizer(m), param_names=param_names(CONFIG))


def make_batch():
    """tokens, targets (B, T), drawn from their own seed so both dumps share them."""
    return common.make_batch(FAMILY)


def initial_weights(init_name):
    """The fp32 weights by name, for init "nanogpt" or "large" (see INITS)."""
    return common.initial_weights(FAMILY, init_name)


def model_with(weights, dtype):
    return common.model_with(FAMILY, weights, dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR, help="output folder (default: the test resources)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokens, targets = make_batch()
    for file_name, init_name in OUTPUTS.items():
        header_entries, tensors = common.reference_case(FAMILY, init_name, tokens, targets)
        path = os.path.join(os.path.abspath(args.out_dir), file_name)
        common.write_dump(path, header_entries, tensors)
        losses = " ".join(f"{x:.6f}" for x in tensors[-1][1].tolist())
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")
        print(f"  step losses {losses}")
        print(f"  PyTorch fp32 vs float64: {json.dumps(header_entries['torchFp32Error'])}")
    common.check_bf16_gemm(SEED)
    for file_name, init_name in BF16_OUTPUTS.items():
        header_entries, tensors = common.bf16_case(FAMILY, init_name, tokens, targets, BF16_NUMERICS)
        path = os.path.join(os.path.abspath(args.out_dir), file_name)
        common.write_dump(path, header_entries, tensors)
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors, loss {tensors[3][1].item():.6f}")
        print(f"  PyTorch bf16 autocast vs float64: {json.dumps(header_entries['torchBf16Error'])}")


if __name__ == "__main__":
    main()

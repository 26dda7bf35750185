#!/usr/bin/python3
"""PyTorch reference for fsdp4j's Llama: builds a tiny Llama from a seed and dumps what the Java
parity test (runtime-core: org.fsdp4j.model.LlamaParityTest) compares against, plus its weights in
Hugging Face's safetensors layout for the loading test (org.fsdp4j.weights.LlamaWeightsTest).

The model is Hugging Face's LlamaForCausalLM written out in plain PyTorch, with its parameter
names: a token embedding (no position embedding), pre-norm blocks (RMSNorm with a gain, eps
NORM_EPS; attention with separate q, k, v projections, grouped-query (numKvHeads key/value heads,
query head h reading key/value head h // (numHeads / numKvHeads), as repeat_kv orders them),
rotary embeddings in rotate_half form with base ROPE_THETA, scale 1/sqrt(head size), an output
projection; SwiGLU MLP down(silu(gate(x)) * up(x))), a final RMSNorm and an untied LM head; no
biases. Loss: cross-entropy, mean over B*T. AdamW as gpt_reference.py's.

Two dumps, same model, batch and hyperparameters, different initial weights:
    llama_tiny.bin        fsdp4j's init: weights N(0, 0.02), the residual projections (o_proj,
                          down_proj) N(0, 0.02/sqrt(2L)), RMSNorm gains 1
    llama_tiny_large.bin  every weight N(0, 0.25), gains 1 + N(0, 0.25): SiLU, softmax and the
                          rotations far from linear, and gains that matter
and a bf16 dump of each (llama_tiny_bf16.bin, llama_tiny_large_bf16.bin), in gpt_reference.py's
format (reference_common.py writes both). The rotary tables: the float64 run computes its angles
in float64; the fp32 run behind torchFp32Error computes them as Hugging Face does (inv_freq and
t * inv_freq in fp32); the bf16 run uses the float64 cosines and sines rounded to fp32, as fsdp4j
does (RotaryTables), and turns q and k in fp32 with one rounding (as a fused rotary kernel does;
Hugging Face's eager bf16 code rounds cos and sin to bf16 and each product). Likewise RMSNorm and
the SwiGLU product run in fp32 with one rounding (the eager code rounds the normalized value
before the gain, and SiLU's output before the product).

The large weights are also written as safetensors, F32 and BF16 (llama_tiny_large.safetensors,
llama_tiny_large_bf16.safetensors), with the model's config as metadata: a loaded model's logits
must match llama_tiny_large.bin's.

Run: /usr/bin/python3 tools/reference/llama_reference.py [--out-dir DIR] (see README.md).
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
from reference_common import embed, fp32  # noqa: E402

DEFAULT_OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime-core", "src",
                               "test", "resources", "reference")

SEED = 4321
# head size 8; a theta well below Llama's 10000 so that every pair turns visibly over 16 positions
CONFIG = dict(vocabSize=64, maxSeqLen=16, numLayers=2, numHeads=4, numKvHeads=2, embedDim=32, hiddenDim=56,
              ropeTheta=500.0, normEps=1e-5)
BATCH = dict(batchSize=4, seqLen=16)
ADAMW = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weightDecay=0.1, steps=10)
LARGE_STD = 0.25
INITS = {"llama": "fsdp4j: weights N(0, 0.02), o_proj and down_proj N(0, 0.02/sqrt(2L)), RMSNorm gains 1",
         "large": f"every weight N(0, {LARGE_STD}), RMSNorm gains 1 + N(0, {LARGE_STD})"}
OUTPUTS = {"llama_tiny.bin": "llama", "llama_tiny_large.bin": "large"}
BF16_OUTPUTS = {"llama_tiny_bf16.bin": "llama", "llama_tiny_large_bf16.bin": "large"}
SAFETENSORS = {"llama_tiny_large.safetensors": torch.float32, "llama_tiny_large_bf16.safetensors": torch.bfloat16}
BF16_NUMERICS = ("parameters bf16; activations and gradients bf16; linear fp32 accumulation, one rounding; RMSNorm,"
                 " rotary turns (fp32 cos/sin), softmax, cross_entropy and the SwiGLU product in fp32, one rounding"
                 " of the output; embedding gradient summed in fp32; loss fp32")


def rotary_tables(t, head_dim, theta, dtype):
    """cos, sin (T, D/2) of t * theta^(-2i/D): in float64 for the float64 run, as Hugging Face computes
    them (fp32 inv_freq and angles) for the fp32 run, fp32 roundings of the float64 values (fsdp4j's
    RotaryTables) for a half run."""
    if dtype == torch.float32:
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        angles = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq)
        return angles.cos(), angles.sin()
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    if dtype == torch.float64:
        return angles.cos(), angles.sin()
    return angles.cos().float(), angles.sin().float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, cos, sin):
    """Hugging Face's apply_rotary_pos_emb for one of q, k (B, H, T, D), in fp32 for a half x, one rounding."""
    cos = torch.cat((cos, cos), dim=-1)
    sin = torch.cat((sin, sin), dim=-1)
    xf = fp32(x)
    return ((xf * cos) + (rotate_half(xf) * sin)).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, c, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.eps = eps

    def forward(self, x):
        """In fp32 for a half x, the output left in fp32 (rounded once by the matmul that reads it)."""
        xf = fp32(x)
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * fp32(self.weight)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, self.h, self.kv = cfg["embedDim"], cfg["numHeads"], cfg["numKvHeads"]
        self.d = c // self.h
        self.q_proj = nn.Linear(c, self.h * self.d, bias=False)
        self.k_proj = nn.Linear(c, self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(c, self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, c, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(cfg["maxSeqLen"], cfg["maxSeqLen"], dtype=torch.bool)))

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)       # (B, H, T, D)
        k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)      # (B, Hkv, T, D)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        g = self.h // self.kv                                               # repeat_kv: head h reads h // g
        k = k[:, :, None].expand(b, self.kv, g, t, self.d).reshape(b, self.h, t, self.d)
        v = v[:, :, None].expand(b, self.kv, g, t, self.d).reshape(b, self.h, t, self.d)
        att = q @ k.transpose(-2, -1)                                       # (B, H, T, T)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        att = F.softmax(fp32(att) * (1.0 / math.sqrt(self.d)), dim=-1)     # fp32 out, rounded by the next matmul
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.o_proj(y)


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, f = cfg["embedDim"], cfg["hiddenDim"]
        self.gate_proj = nn.Linear(c, f, bias=False)
        self.up_proj = nn.Linear(c, f, bias=False)
        self.down_proj = nn.Linear(f, c, bias=False)

    def forward(self, x):
        gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj((F.silu(fp32(gate)) * fp32(up)).to(gate.dtype))   # one rounding in the half run


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["embedDim"], cfg["normEps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["embedDim"], cfg["normEps"])
        self.mlp = Mlp(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocabSize"], cfg["embedDim"])   # weight (V, C); used through embed()
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg["numLayers"]))
        self.norm = RMSNorm(cfg["embedDim"], cfg["normEps"])


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg["embedDim"], cfg["vocabSize"], bias=False)
        self._init()

    def _init(self):
        # fsdp4j's init (LlamaParams): N(0, 0.02), the two projections into the residual stream
        # N(0, 0.02/sqrt(2L)); the RMSNorm gains keep their 1
        nn.init.normal_(self.model.embed_tokens.weight, 0.0, 0.02)
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * self.cfg["numLayers"]) if name.endswith(("o_proj", "down_proj")) else 0.02
                nn.init.normal_(m.weight, 0.0, std)

    def forward(self, tokens, targets):
        b, t = tokens.shape
        d = self.cfg["embedDim"] // self.cfg["numHeads"]
        cos, sin = rotary_tables(t, d, self.cfg["ropeTheta"], self.model.embed_tokens.weight.dtype)
        x = embed(self.model.embed_tokens.weight, tokens)                  # (B, T, C)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.model.norm(x))                          # (B, T, V)
        loss = F.cross_entropy(fp32(logits).view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def param_names(cfg):
    """Hugging Face's LlamaForCausalLM names, which are fsdp4j's, in PyTorch's module order."""
    names = ["model.embed_tokens.weight"]
    for i in range(cfg["numLayers"]):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight", p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                  p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight",
                  p + "post_attention_layernorm.weight", p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
                  p + "mlp.down_proj.weight"]
    return names + ["model.norm.weight", "lm_head.weight"]


def large_weights(model, std, gen):
    """Redraws every parameter at a scale where SiLU, softmax and the rotations are far from linear and
    the RMSNorm gains matter."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            gain = name.endswith("norm.weight")
            p.copy_(torch.randn(p.shape, generator=gen) * std + (1.0 if gain else 0.0))


def make_optimizer(model):
    return common.adamw_optimizer(model, ADAMW)


def run(model, tokens, targets):
    """First forward/backward, then the AdamW loop on the same batch; returns fp32 results."""
    return common.run(model, tokens, targets, ADAMW, lambda m: make_optimizer(m))


FAMILY = common.Family(
    generator="tools/reference/llama_reference.py", seed=SEED, config=CONFIG, batch=BATCH, adamw=ADAMW, inits=INITS,
    build=lambda: Llama(CONFIG),
    redraw={"large": lambda model: large_weights(model, LARGE_STD, torch.Generator().manual_seed(SEED + 2))},
    make_optimizer=lambda m: make_optimizer(m), param_names=param_names(CONFIG))


def make_batch():
    """tokens, targets (B, T), drawn from their own seed so every dump shares them."""
    return common.make_batch(FAMILY)


def initial_weights(init_name):
    """The fp32 weights by name, for init "llama" or "large" (see INITS)."""
    return common.initial_weights(FAMILY, init_name)


def model_with(weights, dtype):
    return common.model_with(FAMILY, weights, dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR, help="output folder (default: the test resources)")
    args = ap.parse_args()
    out_dir = os.path.abspath(args.out_dir)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokens, targets = make_batch()
    for file_name, init_name in OUTPUTS.items():
        header_entries, tensors = common.reference_case(FAMILY, init_name, tokens, targets)
        path = os.path.join(out_dir, file_name)
        common.write_dump(path, header_entries, tensors)
        losses = " ".join(f"{x:.6f}" for x in tensors[-1][1].tolist())
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")
        print(f"  step losses {losses}")
        print(f"  PyTorch fp32 vs float64: {json.dumps(header_entries['torchFp32Error'])}")
    common.check_bf16_gemm(SEED)
    for file_name, init_name in BF16_OUTPUTS.items():
        header_entries, tensors = common.bf16_case(FAMILY, init_name, tokens, targets, BF16_NUMERICS)
        path = os.path.join(out_dir, file_name)
        common.write_dump(path, header_entries, tensors)
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors, loss {tensors[3][1].item():.6f}")
        print(f"  PyTorch bf16 autocast vs float64: {json.dumps(header_entries['torchBf16Error'])}")
    weights = initial_weights("large")
    metadata = {"format": "pt", "fsdp4j_config": json.dumps(CONFIG), "fsdp4j_reference": "llama_tiny_large.bin"}
    for file_name, dtype in SAFETENSORS.items():
        path = os.path.join(out_dir, file_name)
        common.write_safetensors(path, {n: w.to(dtype) for n, w in weights.items()}, metadata)
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(weights)} tensors")


if __name__ == "__main__":
    main()

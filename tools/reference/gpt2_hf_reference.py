#!/usr/bin/python3
"""PyTorch reference for loading Hugging Face GPT-2 checkpoints into fsdp4j's GPT: a tiny GPT-2
written out as Hugging Face's modeling_gpt2 (GPT2LMHeadModel: its module tree, parameter and buffer
names, Conv1D layers) with random weights from a fixed seed, saved in Hugging Face's safetensors
layout, and the logits and loss PyTorch computes from them, for the Java test
org.fsdp4j.weights.Gpt2WeightsTest.

The model follows modeling_gpt2.py line by line (eager attention, no dropout): wte and wpe are
nn.Embedding; each block is x + attn(ln_1(x)), then x + mlp(ln_2(x)); attention is Conv1D c_attn
(weight stored (in, out) = (C, 3C), y = x @ W + b, output columns [q | k | v]), heads split as
view(B, T, H, D), scores q·kᵀ / sqrt(D), the causal mask applied from the attn.bias buffer with
finfo.min, softmax, Conv1D c_proj; the MLP is Conv1D c_fc (C, 4C), gelu_new (the tanh
approximation), Conv1D c_proj (4C, C); ln_f; the LM head is a bias-free Linear tied to wte.
LayerNorm eps 1e-5. Loss: cross-entropy against the given targets, mean over B*T, as fsdp4j computes
it (Hugging Face's own loss shifts its labels by one; here the targets are simply given).

Written into runtime-core/src/test/resources/reference/:
    gpt2_hf_tiny.safetensors       GPT2LMHeadModel.state_dict(): every name under "transformer.",
                                   the buffers attn.bias (BOOL (1, 1, P, P)) and attn.masked_bias
                                   (F32 scalar) of each block, and lm_head.weight (equal to wte,
                                   tied), as torch.save of the state dict holds them
    gpt2_hf_tiny_base.safetensors  GPT2Model.state_dict(): the same without the prefix and lm_head
    gpt2_hf_tiny.bin               the dump (gpt_reference.py's format): config (fsdp4j's GptConfig
                                   fields), batch, tokens, targets, logits, loss, computed in float64
                                   from the fp32 weights and stored as fp32; torchFp32Error: how far
                                   the same model in fp32 PyTorch lands from it
Weights: every weight and bias N(0, 0.25), LayerNorm gains 1 + N(0, 0.25) (GELU, softmax and
LayerNorm far from linear, so a mapping mistake moves the logits far).

The script also runs gpt_reference.py's Gpt (fsdp4j's layout and names) on the weights mapped the way
Gpt2Weights maps them (Conv1D weights transposed) and refuses to write anything unless its logits
equal the Hugging Face model's: the mapping stated once more, independently of the Java code.

Run: /usr/bin/python3 tools/reference/gpt2_hf_reference.py [--out-dir DIR] (see README.md).
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
import gpt_reference  # noqa: E402
import reference_common as common  # noqa: E402

DEFAULT_OUT_DIR = gpt_reference.DEFAULT_OUT_DIR

SEED = 2468
# Hugging Face's GPT2Config fields (vocab_size, n_positions, n_layer, n_head, n_embd) under fsdp4j's names;
# a vocabulary of 50 so that no size is a multiple of another by accident
CONFIG = dict(vocabSize=50, maxSeqLen=16, numLayers=2, numHeads=4, embedDim=32)
BATCH = dict(batchSize=4, seqLen=16)
STD = 0.25
LN_EPS = 1e-5
PREFIX = "transformer."
FILES = {"gpt2_hf_tiny.safetensors": "lm_head", "gpt2_hf_tiny_base.safetensors": "base"}
DUMP = "gpt2_hf_tiny.bin"
SAFETENSORS_DTYPES = {**common.SAFETENSORS_DTYPES, torch.bool: "BOOL"}


class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D: a Linear whose weight is stored transposed, (nx, nf) = (in, out)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    """transformers.activations.NewGELUActivation (GPT-2's activation_function "gelu_new")."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        p = cfg["maxSeqLen"]
        self.register_buffer("bias", torch.tril(torch.ones((p, p), dtype=torch.bool)).view(1, 1, p, p))
        self.register_buffer("masked_bias", torch.tensor(-1e4))
        self.embed_dim = cfg["embedDim"]
        self.num_heads = cfg["numHeads"]
        self.head_dim = self.embed_dim // self.num_heads
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _split_heads(self, x):
        return x.view(x.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x):
        query, key, value = self.c_attn(x).split(self.embed_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        w = torch.matmul(query, key.transpose(-1, -2))
        w = w / torch.full([], value.size(-1) ** 0.5, dtype=w.dtype)
        q_len, k_len = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, k_len - q_len:k_len, :k_len]
        w = torch.where(causal_mask, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = F.softmax(w, dim=-1).type(value.dtype)
        y = torch.matmul(w, value).permute(0, 2, 1, 3).contiguous()
        return self.c_proj(y.view(y.size()[:-2] + (self.embed_dim,)))


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["embedDim"]
        self.c_fc = Conv1D(4 * c, c)
        self.c_proj = Conv1D(c, 4 * c)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["embedDim"]
        self.ln_1 = nn.LayerNorm(c, eps=LN_EPS)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(c, eps=LN_EPS)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocabSize"], cfg["embedDim"])
        self.wpe = nn.Embedding(cfg["maxSeqLen"], cfg["embedDim"])
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg["numLayers"]))
        self.ln_f = nn.LayerNorm(cfg["embedDim"], eps=LN_EPS)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(-1), dtype=torch.long).unsqueeze(0)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["embedDim"], cfg["vocabSize"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight   # tie_word_embeddings

    def forward(self, tokens, targets):
        logits = self.lm_head(self.transformer(tokens))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def draw_weights(model, gen):
    """Every weight and bias N(0, STD), LayerNorm gains 1 + N(0, STD), in fp32, in named_parameters order."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            gain = name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight"))
            p.copy_(torch.randn(p.shape, generator=gen) * STD + (1.0 if gain else 0.0))


def fsdp4j_weights(hf):
    """GPT2Model's parameters {name: tensor} in fsdp4j's names and layout (gpt_reference.py's Gpt):
    Gpt2Weights' mapping, Conv1D weights transposed."""
    m = {"wte": hf["wte.weight"], "wpe": hf["wpe.weight"], "lnf.weight": hf["ln_f.weight"],
         "lnf.bias": hf["ln_f.bias"]}
    for i in range(CONFIG["numLayers"]):
        h = f"h.{i}."
        for ours, theirs, conv in (("ln1", "ln_1", False), ("attn.qkv", "attn.c_attn", True),
                                   ("attn.proj", "attn.c_proj", True), ("ln2", "ln_2", False),
                                   ("mlp.fc", "mlp.c_fc", True), ("mlp.proj", "mlp.c_proj", True)):
            w = hf[h + theirs + ".weight"]
            m[h + ours + ".weight"] = w.t().contiguous() if conv else w
            m[h + ours + ".bias"] = hf[h + theirs + ".bias"]
    return m


def write_safetensors(path, tensors, metadata):
    """reference_common.write_safetensors, plus BOOL (the attn.bias masks)."""
    saved = common.SAFETENSORS_DTYPES
    common.SAFETENSORS_DTYPES = SAFETENSORS_DTYPES
    try:
        common.write_safetensors(path, tensors, metadata)
    finally:
        common.SAFETENSORS_DTYPES = saved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR, help="output folder (default: the test resources)")
    args = ap.parse_args()
    out_dir = os.path.abspath(args.out_dir)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(SEED)
    model = GPT2LMHeadModel(CONFIG)
    draw_weights(model, gen)
    shape = (BATCH["batchSize"], BATCH["seqLen"])
    tokens = torch.randint(CONFIG["vocabSize"], shape, generator=gen)
    targets = torch.randint(CONFIG["vocabSize"], shape, generator=gen)

    with torch.no_grad():
        logits32, loss32 = model(tokens, targets)
        model64 = GPT2LMHeadModel(CONFIG).double()
        model64.load_state_dict({n: t.double() if t.is_floating_point() else t for n, t in model.state_dict().items()})
        logits, loss = model64(tokens, targets)
        # the same weights through fsdp4j's layout (gpt_reference.Gpt), in float64
        base = {n: p.detach() for n, p in model.transformer.named_parameters()}
        gpt = gpt_reference.Gpt(**CONFIG).double()
        loaded = gpt.load_state_dict({n: t.double() for n, t in fsdp4j_weights(base).items()}, strict=False)
        assert not loaded.unexpected_keys and all(k.endswith(".attn.mask") for k in loaded.missing_keys), loaded
        gpt_logits, _ = gpt(tokens, targets)
    scale = float(logits.abs().max())
    mapped_diff = float((gpt_logits - logits).abs().max()) / scale
    if mapped_diff > 1e-12:
        raise SystemExit(f"fsdp4j's layout gives other logits than Hugging Face's ({mapped_diff:.3g}·max|ref|):"
                         " the mapping is wrong")
    fp32_err = {"logitsMaxAbs": common.max_abs(logits32, logits),
                "logitsMaxAbsOverMaxAbsLogit": common.max_abs(logits32, logits) / scale,
                "lossAbs": common.max_abs(loss32, loss)}

    state = {n: t.detach().clone() for n, t in model.state_dict().items()}   # lm_head.weight: wte's values
    assert set(state) == {PREFIX + n for n in model.transformer.state_dict()} | {"lm_head.weight"}
    metadata = {"format": "pt", "fsdp4j_config": json.dumps(CONFIG), "fsdp4j_reference": DUMP}
    for file_name, kind in FILES.items():
        tensors = state if kind == "lm_head" else {n[len(PREFIX):]: t for n, t in state.items() if n.startswith(PREFIX)}
        path = os.path.join(out_dir, file_name)
        write_safetensors(path, tensors, metadata)
        print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")

    header = {"format": "fsdp4j-reference", "version": common.FORMAT_VERSION,
              "generator": "tools/reference/gpt2_hf_reference.py", "torchVersion": torch.__version__, "seed": SEED,
              "init": f"Hugging Face GPT-2 layout; every weight and bias N(0, {STD}), LayerNorm gains 1 + N(0, {STD})",
              "config": CONFIG, "batch": BATCH, "params": sorted(state), "checkpoints": list(FILES),
              "torchFp32Error": fp32_err, "fsdp4jLayoutLogitsDiffOverMaxAbsLogit": mapped_diff}
    tensors = [("tokens", tokens.to(torch.int32)), ("targets", targets.to(torch.int32)),
               ("logits", logits.float()), ("loss", loss.float())]
    path = os.path.join(out_dir, DUMP)
    common.write_dump(path, header, tensors)
    print(f"wrote {path}: {os.path.getsize(path)} bytes; loss {loss.item():.6f}")
    print(f"  PyTorch fp32 vs float64: {json.dumps(fp32_err)}")
    print(f"  fsdp4j's layout (gpt_reference.Gpt) vs Hugging Face's, float64: {mapped_diff:.3g}·max|ref|")


if __name__ == "__main__":
    main()

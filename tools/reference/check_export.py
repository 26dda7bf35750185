"""Reads an fsdp4j safetensors export and the checkpoint it came from, each without fsdp4j's code,
and checks that they hold the same model.

    /usr/bin/python3 tools/reference/check_export.py CHECKPOINT_DIR model.safetensors

1. The safetensors file is parsed by hand (8-byte little-endian header length, JSON header,
   little-endian data; Python's `safetensors` package is not needed).
2. The checkpoint is consolidated from index.json and the rank files: every entry's element range
   of the "param" buffer (fp32 master) is placed into its parameter (the re-slicing a load does).
3. Each exported tensor equals its parameter: transposed for GPT-2's Conv1D weights, exactly in
   fp32, or rounded once to bf16 (nearest even).
4. The weights go into two forwards on the same tokens: fsdp4j's GPT from gpt_reference.py loaded
   from the checkpoint, and a plain Hugging Face GPT-2 forward (Conv1D: x @ W + b, c_attn split
   into q, k, v) written here from the safetensors names. Their logits agree, which shows that the
   names and layouts are GPT-2's.
Prints one line per check and exits 1 if one fails.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402  (fsdp4j's GPT in PyTorch)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        raw = data[base + begin:base + end]
        if t["dtype"] == "F32":
            v = np.frombuffer(raw, dtype="<f4").copy()
        elif t["dtype"] == "BF16":
            v = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: unexpected dtype {t['dtype']} for {name}")
        out[name] = (t["dtype"], v.reshape(t["shape"]))
    return meta, out


def read_checkpoint(ckpt):
    with open(os.path.join(ckpt, "index.json")) as f:
        index = json.load(f)
    params = {p["name"]: np.zeros(int(np.prod(p["shape"])), dtype=np.float32) for p in index["params"]}
    shapes = {p["name"]: p["shape"] for p in index["params"]}
    files = {}
    for e in index["entries"]:
        if e["buffer"] != "param":
            continue
        if e["file"] not in files:
            with open(os.path.join(ckpt, e["file"]), "rb") as f:
                files[e["file"]] = f.read()
        count = e["end"] - e["start"]
        raw = files[e["file"]][e["offset"]:e["offset"] + 4 * count]
        params[e["param"]][e["start"]:e["end"]] = np.frombuffer(raw, dtype="<f4")
    return index, {n: v.reshape(shapes[n]) for n, v in params.items()}


def hf_name(name):
    root = {"wte": "transformer.wte.weight", "wpe": "transformer.wpe.weight",
            "lnf.weight": "transformer.ln_f.weight", "lnf.bias": "transformer.ln_f.bias"}
    if name in root:
        return root[name]
    _, layer, rest = name.split(".", 2)
    rest = (rest.replace("ln1", "ln_1").replace("ln2", "ln_2").replace("attn.qkv", "attn.c_attn")
            .replace("attn.proj", "attn.c_proj").replace("mlp.fc", "mlp.c_fc").replace("mlp.proj", "mlp.c_proj"))
    return f"transformer.h.{layer}.{rest}"


def to_bf16(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return rounded.astype(np.uint32).view(np.float32)


def hf_gpt2_logits(w, cfg, tokens):
    """GPT-2 as Hugging Face lays it out: Conv1D weights (in, out), c_attn = [q | k | v] columns."""
    c, n_head = cfg["n_embd"], cfg["n_head"]
    t = lambda name: torch.from_numpy(np.ascontiguousarray(w[name][1])).double()  # noqa: E731
    b, s = tokens.shape
    x = t("transformer.wte.weight")[tokens] + t("transformer.wpe.weight")[:s]
    mask = torch.tril(torch.ones(s, s, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (c,), t(p + "ln_1.weight"), t(p + "ln_1.bias"), 1e-5)
        q, k, v = (h @ t(p + "attn.c_attn.weight") + t(p + "attn.c_attn.bias")).split(c, dim=2)
        q, k, v = (z.view(b, s, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // n_head)
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, c)
        x = x + y @ t(p + "attn.c_proj.weight") + t(p + "attn.c_proj.bias")
        h = F.layer_norm(x, (c,), t(p + "ln_2.weight"), t(p + "ln_2.bias"), 1e-5)
        h = F.gelu(h @ t(p + "mlp.c_fc.weight") + t(p + "mlp.c_fc.bias"), approximate="tanh")
        x = x + h @ t(p + "mlp.c_proj.weight") + t(p + "mlp.c_proj.bias")
    x = F.layer_norm(x, (c,), t("transformer.ln_f.weight"), t("transformer.ln_f.bias"), 1e-5)
    return x @ t("transformer.wte.weight").t()


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    ckpt, st = sys.argv[1], sys.argv[2]
    meta, exported = read_safetensors(st)
    index, params = read_checkpoint(ckpt)
    cfg = index["model"]
    failures = 0
    if set(exported) != {hf_name(n) for n in params}:
        print("FAIL names:", sorted(set(exported) ^ {hf_name(n) for n in params}))
        failures += 1
    worst = 0.0
    for name, value in params.items():
        dtype, got = exported[hf_name(name)]
        want = value.T if (value.ndim == 2 and name.startswith("h.")) else value
        if dtype == "BF16":
            want = to_bf16(want)
        if got.shape != want.shape or not np.array_equal(got, want):
            print(f"FAIL {hf_name(name)}: shape {got.shape} vs {want.shape}, max |diff| "
                  f"{np.abs(got - want).max() if got.shape == want.shape else 'n/a'}")
            failures += 1
    print(f"{len(params)} tensors of step {index['step']} ({meta.get('n_layer')} layers, width {meta.get('n_embd')}): "
          f"every exported value equals the checkpoint's ({'bf16-rounded' if dtype == 'BF16' else 'exact'})")

    torch.manual_seed(0)
    tokens = torch.randint(0, cfg["vocab_size"], (2, min(16, cfg["n_positions"])))
    model = gpt_reference.Gpt(cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"]).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(to_bf16(params[name]) if dtype == "BF16" else params[name]).double())
        ours, _ = model(tokens, tokens)
        theirs = hf_gpt2_logits(exported, cfg, tokens)
    worst = (ours - theirs).abs().max().item() / ours.abs().max().item()
    ok = worst < 1e-12
    print(f"logits of fsdp4j's GPT (from the checkpoint) vs a Hugging Face GPT-2 forward (from the export), float64: "
          f"max |diff| / max |logit| = {worst:.2e} {'ok' if ok else 'FAIL'}")
    failures += 0 if ok else 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

"""What the model reference scripts share (gpt_reference.py, llama_reference.py): the dump format
and its writer, a safetensors writer, the helpers that give the half runs CUDA autocast's numerics,
one forward/backward, the AdamW loop, the deviation yardsticks, and the two kinds of dump
(fp32 initial weights with float64 results; bf16 autocast results) built for any model family.

A family is described by a Family: its config, batch and AdamW settings, its named inits and a
function that builds the fp32 model from them. Its model's forward(tokens, targets) returns
(logits, loss); its parameter names (named_parameters order) are fsdp4j's.
"""
import contextlib
import dataclasses
import json
import os
import struct
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F

MAGIC = b"FSDP4JRF"
FORMAT_VERSION = 1
HALF = (torch.bfloat16, torch.float16)

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


def embed(wte, tokens):
    """wte[tokens]; for a half wte as a one-hot matmul, whose backward sums each token's row
    gradients in fp32 and rounds once (as F.embedding's CUDA backward does, and fsdp4j; torch 1.13's
    CPU index backward rounds after each addition)."""
    if wte.dtype in HALF:
        return F.one_hot(tokens, wte.size(0)).to(wte.dtype) @ wte   # one term per output: exact
    return wte[tokens]


@dataclasses.dataclass
class Family:
    """One model family's reference: what its dumps are made from."""
    generator: str                      # the script, for the header
    seed: int
    config: Dict
    batch: Dict                         # batchSize, seqLen
    adamw: Dict                         # lr, beta1, beta2, eps, weightDecay, steps
    inits: Dict[str, str]               # init name -> how the weights are drawn, in words
    build: Callable[[], torch.nn.Module]                      # the fp32 model, initial weights drawn
    redraw: Dict[str, Callable[[torch.nn.Module], None]]      # init name -> redraws the weights in place
    make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer]
    param_names: List[str]


def adamw_optimizer(model, adamw):
    """torch.optim.AdamW with decay on the 2-D weights only (as fsdp4j's)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": adamw["weightDecay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=adamw["lr"], betas=(adamw["beta1"], adamw["beta2"]), eps=adamw["eps"],
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


def run(model, tokens, targets, adamw, make_optimizer):
    """First forward/backward, then the AdamW loop on the same batch; returns fp32 results."""
    out, loss = forward_backward(model, tokens, targets)
    params = dict(model.named_parameters())
    opt = make_optimizer(model)
    step_losses = []
    for step in range(adamw["steps"]):
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


def max_abs(a, b):
    return float((a.double() - b.double()).abs().max())


def make_batch(family):
    """tokens, targets (B, T), drawn from their own seed so every dump of a family shares them."""
    gen = torch.Generator().manual_seed(family.seed + 1)
    shape = (family.batch["batchSize"], family.batch["seqLen"])
    return (torch.randint(family.config["vocabSize"], shape, generator=gen),
            torch.randint(family.config["vocabSize"], shape, generator=gen))


def initial_weights(family, init_name):
    """The fp32 weights by name, for one of the family's inits."""
    torch.manual_seed(family.seed)
    model = family.build()
    assert [n for n, _ in model.named_parameters()] == family.param_names
    if init_name in family.redraw:
        family.redraw[init_name](model)
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def model_with(family, weights, dtype):
    model = family.build().to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(weights[n].to(dtype))
    return model


def deviation(run_out, ref, names):
    """How far one run's logits, loss and gradients land from the float64 reference's."""
    return {
        "logitsMaxAbs": max_abs(run_out["logits"], ref["logits"]),
        "logitsMaxAbsOverMaxAbsLogit": max_abs(run_out["logits"], ref["logits"]) / float(ref["logits"].abs().max()),
        "lossAbs": max_abs(run_out["loss"], ref["loss"]),
        "gradMaxAbs": max(max_abs(run_out["grad." + n], ref["grad." + n]) for n in names),
        "gradMaxAbsOverMaxAbsGrad": max(max_abs(run_out["grad." + n], ref["grad." + n])
                                        / float(ref["grad." + n].abs().max()) for n in names),
    }


def header(family, init_name, adamw=None, **entries):
    """The header entries every dump has (adamw where it has AdamW results), then the given ones."""
    h = {"format": "fsdp4j-reference", "version": FORMAT_VERSION, "generator": family.generator,
         "torchVersion": torch.__version__, "seed": family.seed, "init": family.inits[init_name],
         "config": family.config, "batch": family.batch}
    if adamw:
        h["adamw"] = adamw
    return dict(h, params=family.param_names, **entries)


def reference_case(family, init_name, tokens, targets, fp32_family=None):
    """(header entries, tensors) of one dump: fp32 initial weights, float64 results stored as fp32.
    The fp32 run behind torchFp32Error builds its model from fp32_family (default: family)."""
    init = initial_weights(family, init_name)
    ref = run(model_with(family, init, torch.float64), tokens, targets, family.adamw, family.make_optimizer)
    fam32 = fp32_family or family
    fp32_run = run(model_with(fam32, init, torch.float32), tokens, targets, family.adamw, family.make_optimizer)

    names = family.param_names
    torch_fp32_error = dict(deviation(fp32_run, ref, names), stepLossesMaxRel=float(
        ((fp32_run["stepLosses"].double() - ref["stepLosses"].double()).abs()
         / ref["stepLosses"].double().abs()).max()))
    tensors = [("tokens", tokens.to(torch.int32)), ("targets", targets.to(torch.int32)),
               ("logits", ref["logits"]), ("loss", ref["loss"])]
    tensors += [("param." + n, init[n]) for n in names]
    tensors += [("grad." + n, ref["grad." + n]) for n in names]
    tensors += [("step1." + n, ref["step1." + n]) for n in names]
    tensors.append(("stepLosses", ref["stepLosses"]))
    return header(family, init_name, adamw=family.adamw, torchFp32Error=torch_fp32_error), tensors


def bf16_case(family, init_name, tokens, targets, numerics):
    """(header entries, tensors) of one bf16 dump: the initial weights rounded to bf16 (as FSDP2's
    MixedPrecisionPolicy(param_dtype=bfloat16) casts the unsharded parameters), one forward under
    autocast to bf16 with CUDA autocast's numerics (see fp32() above) and its backward, results
    (bf16 logits and gradients, fp32 loss) widened to fp32. The float64 run from the same bf16
    weights gives the yardstick torchBf16Error: the rounding of activations and gradients alone."""
    weights = {n: w.to(torch.bfloat16) for n, w in initial_weights(family, init_name).items()}
    bf16, _ = forward_backward(model_with(family, weights, torch.bfloat16), tokens, targets, torch.bfloat16)
    ref, _ = forward_backward(model_with(family, weights, torch.float64), tokens, targets)

    names = family.param_names
    tensors = [("tokens", tokens.to(torch.int32)), ("targets", targets.to(torch.int32)),
               ("logits", bf16["logits"]), ("loss", bf16["loss"])]
    tensors += [("param." + n, weights[n].float()) for n in names]
    tensors += [("grad." + n, bf16["grad." + n]) for n in names]
    return header(family, init_name, paramDtype="bf16", numerics=numerics,
                  torchBf16Error=deviation(bf16, ref, names)), tensors


def check_bf16_gemm(seed):
    """Refuses to write bf16 dumps unless this PyTorch's CPU bf16 linear accumulates in fp32 and
    rounds once, bias included (oneDNN's path, taken on CPUs with AVX-512; the fallback differs)."""
    gen = torch.Generator().manual_seed(seed)
    x, w, b = (torch.randn(shape, generator=gen).bfloat16() for shape in ((256, 128), (96, 128), (96,)))
    once = (x.double() @ w.double().t() + b.double()).float().bfloat16()
    off = float((F.linear(x, w, b) != once).float().mean())
    if off > 0.01:   # fp32 summation order may flip a rare tie; bf16 accumulation or a second rounding: ~25%
        raise SystemExit(f"this PyTorch's bf16 linear differs from fp32 accumulation with one rounding in {off:.0%}"
                         " of its outputs (no oneDNN bf16 GEMM on this CPU?): the bf16 dumps would not be the"
                         " reference fsdp4j is held to; generate them on a CPU with AVX-512")


def write_dump(path, header_entries, tensors):
    entries, payload, offset = [], [], 0
    for name, x in tensors:
        x = x.contiguous()
        dtype = {torch.float32: "f32", torch.int32: "i32"}[x.dtype]
        raw = x.numpy().astype("<" + ("f4" if dtype == "f32" else "i4")).tobytes()
        entries.append({"name": name, "dtype": dtype, "shape": list(x.shape), "offset": offset,
                        "numBytes": len(raw)})
        payload.append(raw)
        offset += len(raw)
    header_bytes = json.dumps(dict(header_entries, tensors=entries), indent=1).encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", FORMAT_VERSION, len(header_bytes)))
        f.write(header_bytes)
        for raw in payload:
            f.write(raw)


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata=None):
    """tensors {name: tensor} in the safetensors format, as the safetensors package writes it (no
    package needed): an 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
    data_offsets [begin, end)}} (plus __metadata__) padded with spaces to a multiple of 8, then the
    tensors' raw little-endian bytes end to end in the header's order, without gaps."""
    header_entries, payload, offset = {}, [], 0
    if metadata:
        header_entries["__metadata__"] = metadata
    for name in sorted(tensors):
        x = tensors[name].contiguous()
        raw = (x.view(torch.int16) if x.dtype == torch.bfloat16 else x).numpy().tobytes()   # numpy has no bf16
        header_entries[name] = {"dtype": SAFETENSORS_DTYPES[x.dtype], "shape": list(x.shape),
                                "data_offsets": [offset, offset + len(raw)]}
        payload.append(raw)
        offset += len(raw)
    header_bytes = json.dumps(header_entries, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for raw in payload:
            f.write(raw)

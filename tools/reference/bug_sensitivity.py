#!/usr/bin/python3
"""How far plausible bugs move what GptParityTest and LlamaParityTest compare: the evidence behind
their tolerances.

For each dump's initial weights and batch (see gpt_reference.py, llama_reference.py), reruns the
float64 reference with one deliberate mistake and prints the change of each compared quantity,
measured as the test measures it: max |bugged - reference| / max |reference| per tensor (worst
tensor) for the logits, the gradients and the weights after one AdamW step, relative error for the
10 step losses. A tolerance is useful when it sits well above an fp32 implementation's error (the
headers' torchFp32Error) and well below these numbers.

Run: /usr/bin/python3 tools/reference/bug_sensitivity.py [gpt|llama]   (about 10 s per model, prints a table)
"""
import contextlib
import math
import os
import sys
from unittest import mock

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as ref  # noqa: E402
import llama_reference as llama  # noqa: E402

_gelu, _softmax, _layer_norm, _make_optimizer = F.gelu, F.softmax, F.layer_norm, ref.make_optimizer


def _gelu_cubic(x, approximate="none"):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.0446 * x ** 3)))


def _optimizer_with(**group_overrides):
    def make(model):
        opt = _make_optimizer(model)
        for g in opt.param_groups:
            g.update(group_overrides)
        return opt
    return make


def _decay_everything(model):
    return torch.optim.AdamW(model.parameters(), lr=ref.ADAMW["lr"], betas=(ref.ADAMW["beta1"], ref.ADAMW["beta2"]),
                             eps=ref.ADAMW["eps"], weight_decay=ref.ADAMW["weightDecay"], foreach=False)


def _l2_instead_of_decoupled(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.Adam([{"params": decay, "weight_decay": ref.ADAMW["weightDecay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=ref.ADAMW["lr"],
                            betas=(ref.ADAMW["beta1"], ref.ADAMW["beta2"]), eps=ref.ADAMW["eps"], foreach=False)


BUGS = {
    "GELU cubic 0.0446 for 0.044715": lambda: mock.patch.object(F, "gelu", _gelu_cubic),
    "exact GELU for tanh": lambda: mock.patch.object(F, "gelu", lambda x, approximate="none": _gelu(x)),
    "attention scale off by 0.1%": lambda: mock.patch.object(F, "softmax", lambda x, dim: _softmax(x * 1.001, dim=dim)),
    "LayerNorm eps 1e-6 for 1e-5": lambda: mock.patch.object(
        F, "layer_norm", lambda x, shape, w, b, eps: _layer_norm(x, shape, w, b, 1e-6)),
    "AdamW decay on every parameter": lambda: mock.patch.object(ref, "make_optimizer", _decay_everything),
    "Adam L2 for decoupled decay": lambda: mock.patch.object(ref, "make_optimizer", _l2_instead_of_decoupled),
    "AdamW beta2 0.999 for 0.95": lambda: mock.patch.object(ref, "make_optimizer", _optimizer_with(betas=(0.9, 0.999))),
    "AdamW eps 1e-6 for 1e-8": lambda: mock.patch.object(ref, "make_optimizer", _optimizer_with(eps=1e-6)),
}


def _rope_interleaved(x, cos, sin):
    """GPT-J/Meta's layout instead of rotate_half's: pairs (2i, 2i + 1) instead of (i, i + D/2)."""
    xf = llama.fp32(x)
    x1, x2 = xf[..., 0::2], xf[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return out.to(x.dtype)


def _rope_sign(x, cos, sin):
    return _llama_rope(x, cos, -sin)


def _tables_theta(theta):
    return lambda t, d, _theta, dtype: _llama_tables(t, d, theta, dtype)


def _gqa_modulo(self, x, cos, sin):
    """Query head h reading key/value head h mod Hkv (repeat instead of repeat_interleave)."""
    b, t, c = x.shape
    q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
    k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
    v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
    q, k = llama.rope(q, cos, sin), llama.rope(k, cos, sin)
    g = self.h // self.kv
    k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    att = (q @ k.transpose(-2, -1)).masked_fill(~self.mask[:t, :t], float("-inf"))
    att = F.softmax(llama.fp32(att) * (1.0 / math.sqrt(self.d)), dim=-1)
    return self.o_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


def _rmsnorm_eps(eps):
    def forward(self, x):
        xf = llama.fp32(x)
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * llama.fp32(self.weight)
    return forward


_llama_rope, _llama_tables = llama.rope, llama.rotary_tables

LLAMA_BUGS = {
    "RoPE pairs (2i, 2i+1) for (i, i+D/2)": lambda: mock.patch.object(llama, "rope", _rope_interleaved),
    "RoPE turned the wrong way": lambda: mock.patch.object(llama, "rope", _rope_sign),
    "RoPE theta 10000 for 500": lambda: mock.patch.object(llama, "rotary_tables", _tables_theta(10000.0)),
    "GQA head h reads kv head h mod Hkv": lambda: mock.patch.object(llama.Attention, "forward", _gqa_modulo),
    "RMSNorm eps 1e-6 for 1e-5": lambda: mock.patch.object(llama.RMSNorm, "forward", _rmsnorm_eps(1e-6)),
    "attention scale off by 0.1%": lambda: mock.patch.object(F, "softmax", lambda x, dim: _softmax(x * 1.001, dim=dim)),
    "AdamW eps 1e-6 for 1e-8": lambda: mock.patch.object(llama, "make_optimizer", _optimizer_with(eps=1e-6)),
}


def _worst(out, base, prefix, names):
    names = [prefix + n for n in names] if prefix else ["logits"]
    return max(float((out[n].double() - base[n].double()).abs().max() / base[n].double().abs().max()) for n in names)


def table(module, bugs):
    tokens, targets = module.make_batch()
    names = module.FAMILY.param_names
    for file_name, init_name in module.OUTPUTS.items():
        init = module.initial_weights(init_name)
        base = module.run(module.model_with(init, torch.float64), tokens, targets)
        print(f"{file_name} ({module.INITS[init_name]})")
        print(f"  {'bug':38s} {'logits':>9s} {'grads':>9s} {'step1':>9s} {'stepLoss':>9s}")
        for bug, patch in bugs.items():
            with contextlib.ExitStack() as stack:
                stack.enter_context(patch())
                out = module.run(module.model_with(init, torch.float64), tokens, targets)
            losses = float(((out["stepLosses"].double() - base["stepLosses"].double()).abs()
                            / base["stepLosses"].double().abs()).max())
            print(f"  {bug:38s} {_worst(out, base, None, names):9.1e} {_worst(out, base, 'grad.', names):9.1e}"
                  f" {_worst(out, base, 'step1.', names):9.1e} {losses:9.1e}")


def main():
    torch.set_num_threads(1)
    models = sys.argv[1:] or ["gpt", "llama"]
    if "gpt" in models:
        table(ref, BUGS)
    if "llama" in models:
        table(llama, LLAMA_BUGS)


if __name__ == "__main__":
    main()

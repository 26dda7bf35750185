#!/usr/bin/python3
"""How far plausible bugs move what GptParityTest compares: the evidence behind its tolerances.

For each dump's initial weights and batch (see gpt_reference.py), reruns the float64 reference
with one deliberate mistake and prints the change of each compared quantity, measured as the
test measures it: max |bugged - reference| / max |reference| per tensor (worst tensor) for the
logits, the gradients and the weights after one AdamW step, relative error for the 10 step
losses. A tolerance is useful when it sits well above an fp32 implementation's error (the
headers' torchFp32Error) and well below these numbers.

Run: /usr/bin/python3 tools/reference/bug_sensitivity.py   (about 10 seconds, prints a table)
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


def _worst(out, base, prefix):
    names = [prefix + n for n in ref.param_names(ref.CONFIG)] if prefix else ["logits"]
    return max(float((out[n].double() - base[n].double()).abs().max() / base[n].double().abs().max()) for n in names)


def main():
    torch.set_num_threads(1)
    tokens, targets = ref.make_batch()
    for file_name, init_name in ref.OUTPUTS.items():
        init = ref.initial_weights(init_name)
        base = ref.run(ref.model_with(init, torch.float64), tokens, targets)
        print(f"{file_name} ({ref.INITS[init_name]})")
        print(f"  {'bug':34s} {'logits':>9s} {'grads':>9s} {'step1':>9s} {'stepLoss':>9s}")
        for bug, patch in BUGS.items():
            with contextlib.ExitStack() as stack:
                stack.enter_context(patch())
                out = ref.run(ref.model_with(init, torch.float64), tokens, targets)
            losses = float(((out["stepLosses"].double() - base["stepLosses"].double()).abs()
                            / base["stepLosses"].double().abs()).max())
            print(f"  {bug:34s} {_worst(out, base, None):9.1e} {_worst(out, base, 'grad.'):9.1e}"
                  f" {_worst(out, base, 'step1.'):9.1e} {losses:9.1e}")


if __name__ == "__main__":
    main()

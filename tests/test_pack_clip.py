"""A pack clips each member's gradient by its own norm, bit for bit as the solo run's
``torch.nn.utils.clip_grad_norm_`` clips it: the stacked norms are reduced per member in the
solo run's (contiguous) order, so the pack's losses can equal the solo run's exactly."""

from __future__ import annotations

import torch

from lengen.pack.stack import StackedModels


class Grads:
    """What ``StackedModels.clip`` reads: the stacked gradient buffers, member axis first."""

    def __init__(self, grads: dict[str, torch.Tensor]) -> None:
        self.grads = grads


def test_each_members_clipped_gradient_is_clip_grad_norm_s_bit_for_bit(single_thread):
    generator = torch.Generator().manual_seed(0)
    # 40 parameters of mixed sizes and scales: enough that an order of addition other than the
    # solo run's changes the last bit of some member's total norm (it did on 2026-12-02)
    shapes = [(3, 7 + k % 5, 4 + k % 3) if k % 2 else (3, 11 + k) for k in range(40)]
    grads = {
        f"p{k}": torch.randn(shape, generator=generator) * (1 + k % 7) * 10
        for k, shape in enumerate(shapes)
    }
    solo = {name: [g[m].clone() for m in range(3)] for name, g in grads.items()}
    StackedModels.clip(Grads(grads), 1.0, "norm")
    for m in range(3):
        params = [torch.nn.Parameter(torch.zeros_like(solo[name][m])) for name in grads]
        for param, name in zip(params, grads, strict=True):
            param.grad = solo[name][m]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        for name, param in zip(grads, params, strict=True):
            torch.testing.assert_close(grads[name][m], param.grad, rtol=0, atol=0, msg=name)

"""The causal depthwise convolution (``lengen.model.canon.causal_depthwise_conv``, Canon's and the
linear mixers' short convolution) as a channels-last 2-d convolution (#49's step time): it
returns the caller's (B, T, C) layout without a copy, and its gradients are those of the sum it
computes (a float64 loop written here)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from lengen.model.canon import causal_depthwise_conv

pytestmark = pytest.mark.usefixtures("single_thread")

BATCH, LENGTH, CHANNELS, KERNEL = 2, 7, 5, 4


def draws(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, LENGTH, CHANNELS, generator=generator, dtype=torch.float64)
    weight = torch.randn(CHANNELS, KERNEL, generator=generator, dtype=torch.float64)
    history = torch.randn(BATCH, KERNEL - 1, CHANNELS, generator=generator, dtype=torch.float64)
    return x, weight, history


def loop(x, weight, history):
    """y_t = Σ_j w_j ⊙ u_{t+j}, u the K − 1 earlier inputs then x, element by element."""
    inputs = torch.cat([history, x], dim=1)
    rows = []
    for t in range(x.shape[1]):
        rows.append(sum(weight[:, j] * inputs[:, t + j] for j in range(weight.shape[1])))
    return torch.stack(rows, dim=1)


def test_the_output_is_the_callers_contiguous_layout():
    # conv1d's output was (B, C, T) memory seen as (B, T, C); every reader then copied it
    x, weight, history = draws()
    assert causal_depthwise_conv(x.float(), weight.float(), history.float()).is_contiguous()


def test_gradients_are_the_loops():
    x, weight, history = (t.requires_grad_() for t in draws())
    upstream = torch.randn(BATCH, LENGTH, CHANNELS, dtype=torch.float64)
    got = torch.autograd.grad(
        causal_depthwise_conv(x, weight, history), (x, weight, history), upstream
    )
    expected = torch.autograd.grad(loop(x, weight, history), (x, weight, history), upstream)
    assert_close(got, expected)

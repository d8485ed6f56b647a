"""Canon layers (Allen-Zhu, 2025, "Physics of Language Models: Part 4.1, Architecture Design
and the Magic of Canon Layers", arXiv 2512.17351): a short causal depthwise convolution with a
residual, h_t + Σ_{j<K} w_j ⊙ h_{t−K+1+j}, which mixes each token with the K − 1 before it.

Read for this: facebookresearch/PhysicsLM4 ``huggingface/canon_helper.py`` (``ShortConvolution``,
``create_canon``, ``apply_canon``) and ``huggingface/modeling_llama_canon.py`` (where A–D sit).
As the reference's defaults: kernel 4, no bias, no activation, residual; weights initialised as
``nn.Conv1d``'s (uniform in ±1/√K), which the reference keeps. The reference pads K − 1 zeros
on the left and keeps the first T outputs; here the K − 1 earlier inputs (zeros at the start)
are concatenated in front, which is the same sum and lets decoding pass them in
(``CanonState``: the last K − 1 inputs, the reference's ``conv_state``). Which points a block
has is ``model.canon`` (``lengen.model.canon_config``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.model.canon_config import CANON_KERNEL


def causal_depthwise_conv(x: Tensor, weight: Tensor, history: Tensor | None = None) -> Tensor:
    """x (B, T, C), weight (C, K), history (B, K−1, C) the inputs before x (None: zeros)
    -> (B, T, C): y_t = Σ_j weight[:, j] ⊙ x_{t−K+1+j}; nothing after t is read."""
    batch, _, channels = x.shape
    kernel = weight.shape[-1]
    if history is None:
        history = x.new_zeros(batch, kernel - 1, channels)
    padded = torch.cat((history.to(x.dtype), x), dim=1)  # (B, K−1+T, C)
    # A 2-d convolution over a 1 × (K−1+T) image whose (B, T, C) memory is already the
    # channels-last layout (B, C, 1, T) wants, so oneDNN runs its NHWC depthwise kernel with no
    # copy. conv1d read the same view as NCW: a copy in, one out, and a backward that took 6×
    # this one's time at the default size (profiled for #49: 14–38% of a step); same sum.
    image = padded.transpose(1, 2).unsqueeze(2)  # (B, C, 1, K−1+T), channels-last strides
    y = F.conv2d(image, weight[:, None, None, :].to(x.dtype), groups=channels)  # (B, C, 1, T)
    # squeeze, not [:, :, 0]: its backward is a view, where indexing's writes the gradient
    # into a fresh NCHW tensor that the convolution's backward then copies back
    return y.squeeze(2).transpose(1, 2)  # (B, T, C)


class CanonState:
    """What one Canon layer keeps while decoding: its last K − 1 inputs, (B, K−1, C)."""

    def __init__(self) -> None:
        self.history: Tensor | None = None


class Canon(nn.Module):
    """x + causal depthwise convolution of x over the sequence, kernel K, on C channels."""

    def __init__(self, channels: int, kernel: int = CANON_KERNEL) -> None:
        super().__init__()
        bound = 1 / math.sqrt(kernel)  # nn.Conv1d's default for a depthwise kernel of K taps
        self.weight = nn.Parameter(torch.empty(channels, kernel).uniform_(-bound, bound))

    def forward(self, x: Tensor, state: CanonState | None = None) -> Tensor:
        """x (B, T, C) -> (B, T, C); with ``state``, x follows the inputs it remembers, and it
        then remembers x's last K − 1 tokens too."""
        history = None if state is None else state.history
        y = causal_depthwise_conv(x, self.weight, history)  # (B, T, C)
        if state is not None:
            kept = self.weight.shape[-1] - 1
            if history is None:
                history = x.new_zeros(x.shape[0], kept, x.shape[-1])
            # copied, not sliced: a view would keep the whole prompt's (B, K−1+T, C) alive
            state.history = (
                torch.cat((history, x), dim=1)[:, -kept:].detach().clone()
            )  # (B, K−1, C)
        return x + y

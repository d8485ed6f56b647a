"""Models on grid positions (T, A): every encoding with an N-d form runs a tiny encoder forward
and backward on grids and volumes, and grid biases take the blocked dense-bias kernel."""

from __future__ import annotations

import pytest
import torch

from helpers import pe_factory, textbook_attention
from lengen.model import EncoderOnly
from lengen.model.kernels import attend, choose_kernel
from lengen.pe import ALiBi, grid_positions
from lengen.pe.config import grid_encodings

pytestmark = pytest.mark.usefixtures("single_thread")

#: the yaml variants run on grids: every grid encoding, plus the learned table's other kinds
VARIANTS = [(name, {}) for name in grid_encodings()] + [
    ("learned", {"table": "full"}),
    ("learned", {"policy": "interpolate"}),
    ("alibi", {"grid_distance": "manhattan"}),
]


def readout_grid(side: int, axes: int) -> torch.Tensor:
    """Cells of a side^A grid, row-major, then one readout slot (−1 row): (side^A + 1, A)."""
    cells = grid_positions((side,) * axes)
    return torch.cat([cells, torch.full((1, axes), -1)])


@pytest.mark.parametrize("axes", [2, 3])
@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=lambda v: str(v) if v else "")
def test_tiny_encoder_runs_forward_and_backward_on_grid_positions(name, options, axes):
    factory = pe_factory(name, train_positions=3, max_positions=4, **options)
    model = EncoderOnly(
        pe=lambda **kwargs: factory(axes=axes, **kwargs),
        vocab_size=7,
        d_model=24,
        n_layers=2,
        n_heads=2,
        d_ff=32,
    )
    for side in (3, 4):  # the training side and a larger one
        positions = readout_grid(side, axes)
        tokens = torch.randint(
            0, 7, (2, len(positions)), generator=torch.Generator().manual_seed(side)
        )
        logits = model(tokens=tokens, positions=positions)
        assert logits.shape == (2, len(positions), 7)
        assert torch.isfinite(logits).all()
        model.zero_grad()
        logits.square().mean().backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_grid_bias_takes_the_blocked_kernel_never_the_relative_or_flex_one():
    pe = ALiBi(d_model=16, n_heads=2, causal=False, axes=2)
    positions = readout_grid(3, 2)
    for option in ("auto", "flex"):
        path = choose_kernel(
            pe, option, training=False, device_type="cpu", positions=(positions, positions)
        )
        assert path == "blocked"


@pytest.mark.parametrize("max_bias_elements", [1 << 24, 2 * 2 * 3 * 10])
def test_grid_bias_attention_equals_the_textbook_softmax(max_bias_elements):
    generator = torch.Generator().manual_seed(0)
    pe = ALiBi(d_model=16, n_heads=2, causal=False, axes=2)
    positions = readout_grid(3, 2)  # (10, 2)
    q, k, v = torch.randn(3, 2, 2, 10, 8, generator=generator).unbind(0)
    out = attend(
        q, k, v, causal=False, pe=pe, q_positions=positions, k_positions=positions,
        max_bias_elements=max_bias_elements,
    )  # fmt: skip
    expected = textbook_attention(
        q, k, v, causal=False, bias=pe.attention_bias(positions, positions)
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)

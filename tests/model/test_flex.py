"""FlexAttention's causal block mask (``lengen.model.flex``) against torch's own, and its cache.
The FlexAttention path's outputs against the other kernels: test_kernels.py."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from lengen.model import flex
from lengen.model.flex import BLOCK, causal_block_mask

pytestmark = pytest.mark.usefixtures("single_thread")


def torch_causal_block_mask(length: int):
    """torch's reference: the mask function evaluated at every (query, key)."""
    return create_block_mask(lambda b, h, q, k: k <= q, None, None, length, length, "cpu")


@pytest.mark.parametrize("length", [1, 5, 128, 200, 384])
def test_causal_block_mask_hides_exactly_the_future(length):
    built = causal_block_mask(length, "cpu")
    assert torch.equal(built.to_dense(), torch_causal_block_mask(length).to_dense())
    assert built.shape[-2:] == (length, length)


@pytest.mark.parametrize("length", [1, 200, 384])
def test_causal_block_mask_applies_the_mask_on_the_diagonal_blocks(length):
    # a diagonal block marked "full" would skip the mask function there and leak the future,
    # invisible to to_dense(): check the partial / full split itself
    built = causal_block_mask(length, "cpu")
    n_blocks = -(-length // BLOCK)
    rows = torch.arange(n_blocks, dtype=torch.int32)
    assert torch.equal(built.kv_num_blocks[0, 0], torch.ones(n_blocks, dtype=torch.int32))
    assert torch.equal(built.kv_indices[0, 0, :, 0], rows)  # the partial block is the diagonal
    assert torch.equal(built.full_kv_num_blocks[0, 0], rows)  # then all blocks left of it
    for row in range(n_blocks):
        assert built.full_kv_indices[0, 0, row, :row].tolist() == list(range(row))


@pytest.mark.parametrize("length", [128, 384])
def test_causal_block_mask_matches_torch_at_whole_blocks(length):
    built = causal_block_mask(length, "cpu")
    reference = torch_causal_block_mask(length)
    for name in ("kv_num_blocks", "full_kv_num_blocks"):
        assert torch.equal(getattr(built, name), getattr(reference, name)), name


def test_a_block_mask_made_under_inference_mode_can_serve_training():
    # Lightning validates under inference_mode; the cached mask is then reused by training,
    # whose backward pass saves it
    flex._BLOCK_MASKS.clear()
    with torch.inference_mode():
        flex.causal_block_mask(200, "cpu")
    mask = flex.causal_block_mask(200, "cpu")
    assert not any(t.is_inference() for t in mask.as_tuple() if isinstance(t, torch.Tensor))

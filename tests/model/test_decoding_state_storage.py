"""What a decoding state keeps alive: the storage behind it, not only its shape. A state sliced
from the prompt's tensors (a convolution's last inputs) has the right shape and yet holds the
whole prompt's storage, so the memory of decoding grew with the prompt (found by
scripts/bench_options.py's decoding-state rows)."""

from __future__ import annotations

import functools

import pytest
import torch

from lengen.model import DecoderOnly
from lengen.model.canon import Canon, CanonState
from lengen.pe import NoPE

pytestmark = pytest.mark.usefixtures("single_thread")

#: the mixers whose state carries a short convolution's last inputs
CONVOLVING = ["gla", "deltanet", "gated_deltanet"]


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (nested tuples of tensors or None)."""
    seen: dict[int, int] = {}

    def walk(value) -> None:
        if isinstance(value, torch.Tensor):
            seen[value.untyped_storage().data_ptr()] = value.untyped_storage().nbytes()
        elif isinstance(value, (tuple, list)):
            for item in value:
                walk(item)

    walk(tensors)
    return sum(seen.values())


def state_after_prompt(name: str, length: int) -> int:
    torch.manual_seed(0)
    net = DecoderOnly(
        pe=functools.partial(NoPE), vocab_size=11, n_layers=1, mixers=[name],
        d_model=16, n_heads=2, d_ff=32,
    ).eval()  # fmt: skip
    prompt = torch.randint(0, 11, (2, length), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = net.new_cache(length + 1)
        net.decode(prompt, cache)
    return storage_bytes(cache.layers[0].self_attention.state)


@pytest.mark.parametrize("name", CONVOLVING)
def test_a_long_prompt_leaves_a_decoding_state_no_larger_than_a_short_one(name):
    assert state_after_prompt(name, 64) == state_after_prompt(name, 4)


def test_canon_remembers_its_last_inputs_without_the_prompt_behind_them():
    torch.manual_seed(0)
    canon = Canon(6, 4)
    state = CanonState()
    canon(torch.randn(2, 50, 6), state)
    kept = state.history
    assert kept.untyped_storage().nbytes() == kept.numel() * kept.element_size()

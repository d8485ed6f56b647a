"""scripts/bench_options.py's ``chunk_size`` rows (#49): each builds its chunked mixer with the
chunk size its name says, so the choice of the yamls' 64 is measured against smaller ones."""

from __future__ import annotations

import pytest

from helpers import load_script
from lengen.model.mixers.linear import LinearMixer

options = load_script("bench_options")


@pytest.mark.parametrize("mixer", ["gla", "deltanet", "gated_deltanet"])
@pytest.mark.parametrize("size", [8, 16])
def test_a_chunk_row_builds_its_mixer_at_that_chunk_size(mixer, size):
    model, _ = options.build_model(options.ROWS[f"{mixer}_chunk{size}"][0])
    layers = [m for m in model.modules() if isinstance(m, LinearMixer)]
    assert layers and {type(m).__module__.rsplit(".", 1)[-1] for m in layers} == {mixer}
    assert {m.chunk_size for m in layers} == {size}

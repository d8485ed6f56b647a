"""Gu et al.'s Sink^ε_1 at ε = 0.3 (``lengen.evaluation.diagnostics.sink_rate``): the fraction
of heads whose mean attention to the first token exceeds ε, against the paper's formula
written here from formed weights; in results.json's diagnostics per length, and in the sweep's
frame and its mean over seeds (``lengen.aggregate.diagnostics``)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from helpers import compose_train
from lengen.aggregate.diagnostics import attention_frame, attention_over_seeds
from lengen.build import build
from lengen.evaluation.attention import statistics_of_weights
from lengen.evaluation.diagnostics import SINK_EPSILON, attention_diagnostics, sink_rate

pytestmark = pytest.mark.usefixtures("single_thread")


def causal_weights(first_token_mass: list[float], length: int = 6) -> torch.Tensor:
    """(1, H, T, T) causal weights: query i > 0 puts ``m_h`` on token 0 and the rest evenly
    on keys 1 … i (query 0 sees only token 0)."""
    heads = len(first_token_mass)
    weights = torch.zeros(1, heads, length, length)
    for h, mass in enumerate(first_token_mass):
        weights[0, h, 0, 0] = 1.0
        for i in range(1, length):
            weights[0, h, i, 0] = mass
            weights[0, h, i, 1 : i + 1] = (1 - mass) / i
    return weights


def paper_sink_rate(layers: list[torch.Tensor], epsilon: float) -> float:
    """Sink^ε_k for k = 1 as Gu et al. write it: α_h^l(1) = 1/T Σ_{i=1}^{T} A_{i,1}^{l,h};
    1/L Σ_l 1/H Σ_h I(α > ε). ``layers``: per layer (1, H, T, T) weights."""
    per_layer = [((weights[0, :, :, 0].double().mean(-1)) > epsilon).double().mean() for weights
                 in layers]  # fmt: skip
    return float(torch.stack(per_layer).mean())


def test_epsilon_is_gu_et_als():
    assert SINK_EPSILON == 0.3


def test_sink_rate_is_the_papers_fraction_of_heads():
    layers = [causal_weights([0.9, 0.1, 0.5]), causal_weights([0.2, 0.3, 0.05])]
    recorded = [statistics_of_weights(w, None, causal=True) for w in layers]
    # results.json keeps 4 digits (DIGITS)
    assert_close(sink_rate(recorded), paper_sink_rate(layers, SINK_EPSILON), atol=5e-5, rtol=0)


def test_sink_rate_counts_heads_strictly_above_epsilon():
    # α = 1/T + (T − 1)/T · m: m chosen so that one head's α lies just under 0.3, one above
    length = 6
    below, above = (0.3 - 1 / length) * length / (length - 1) - 1e-3, 0.31
    recorded = [statistics_of_weights(causal_weights([below, above]), None, causal=True)]
    assert sink_rate(recorded) == 0.5


def test_sink_rate_of_nothing_recorded_is_none():
    assert sink_rate(["pe computes attention itself: no weights"]) is None


def test_each_length_of_the_diagnostics_carries_its_sink_rate():
    cfg = compose_train("data.len=6", "eval.lengths=[6,12]", "model.d_model=32")
    data, model, lengths = build(cfg)
    section = attention_diagnostics(data, model, lengths, samples=2, evaluated=8)
    for entry in section["lengths"].values():
        heads = [v for stats in entry["layers"].values() for v in stats["sink_mass"]]
        # from the 4-digit sink masses, up to ties at ε that rounding may move
        expected = sum(v > SINK_EPSILON for v in heads) / len(heads)
        assert entry["sink_rate"] == pytest.approx(expected, abs=1 / len(heads))
    assert section["sink_epsilon"] == SINK_EPSILON and set(section["lengths"]) == {"6", "12"}


def _section(rate: float) -> dict:
    layers = {"0": {"sink_mass": [0.9, 0.1]}}
    return {"lengths": {"8": {"tokens": 9, "sink_rate": rate, "layers": layers}}}


def test_the_sweep_frame_has_one_sink_rate_row_per_length():
    frame = attention_frame(_section(0.5))
    rows = frame[frame["statistic"] == "sink_rate"]
    assert rows[["length", "layer", "value"]].values.tolist() == [[8, "all", 0.5]]


def test_the_sink_rate_is_averaged_over_seeds_as_it_is():
    frames = []
    for seed, rate in enumerate([0.5, 0.0]):
        frame = attention_frame(_section(rate))
        frames.append(frame.assign(config_hash="c", pe="rope", task="copy", model="decoder",
                                   train_len=8, seed=seed))  # fmt: skip
    import pandas as pd

    table = attention_over_seeds(pd.concat(frames, ignore_index=True))
    row = table[table["statistic"] == "sink_rate"].iloc[0]
    assert (row["mean"], row["n_seeds"]) == (0.25, 2)

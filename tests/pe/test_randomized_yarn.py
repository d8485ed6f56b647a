"""pe=rope_randomized_yarn (lengen.pe.randomized_yarn): lengen's reading of Mehta et al. 2026 —
YaRN's frequencies (s, L = training positions) at every length, training positions a sorted
random subset of 0 … ⌈s·L⌉−1, evaluation 0 … T−1; YaRN re-derived here in float64 from the
authors' and Hugging Face's formulas (find_correction_dim, linear_ramp_mask)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from helpers import compose_train, run_train
from lengen.pe.config.base import EncodingContext
from lengen.pe.config.randomized_yarn import RandomizedYaRNConfig
from lengen.pe.randomized_yarn import RandomizedYaRN

SIZES = {"d_model": 32, "n_heads": 2, "causal": True, "train_positions": 16, "max_positions": 64}


def encoding(**options) -> RandomizedYaRN:
    return RandomizedYaRN(**SIZES, **options)


def yarn64(dim: int, base: float, factor: float, original: int) -> torch.Tensor:
    """YaRN's θ'_i in float64: γ_i = 1 − clamp((i − low)/(high − low)), low = ⌊i(32)⌋,
    high = ⌈i(1)⌉, i(ρ) = d·ln(L/(2πρ))/(2 ln base); θ' = (1 − γ)·θ/s + γ·θ."""

    def correction(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction(32.0)), 0)
    high = min(math.ceil(correction(1.0)), dim - 1)
    high = high + 0.001 if low == high else high
    out = []
    for i in range(dim // 2):
        theta = base ** (-2 * i / dim)
        keep = 1 - min(max((i - low) / (high - low), 0.0), 1.0)
        out.append((1 - keep) * theta / factor + keep * theta)
    return torch.tensor(out, dtype=torch.float64)


def test_frequencies_are_yarns_with_the_training_positions_as_l():
    pe = encoding(scaling_factor=4.0)
    expected = yarn64(16, 10000.0, 4.0, SIZES["train_positions"])
    torch.testing.assert_close(pe.inverse_frequencies(torch.arange(3)).double(), expected)


def test_the_logits_take_yarns_temperature():
    assert math.isclose(
        encoding(scaling_factor=4.0).logit_temperature(), (0.1 * math.log(4) + 1) ** 2
    )


def test_training_positions_are_a_sorted_subset_of_the_extended_range():
    pe = encoding(scaling_factor=4.0).train()
    torch.manual_seed(0)
    positions = pe.positions(16)
    assert positions.dtype == torch.int64 and len(set(positions.tolist())) == 16
    assert positions.tolist() == sorted(positions.tolist())
    assert int(positions.min()) >= 0 and int(positions.max()) < 4 * SIZES["train_positions"]


def test_the_default_range_is_the_factor_times_the_training_positions():
    assert encoding(scaling_factor=2.5).draw_range == math.ceil(2.5 * SIZES["train_positions"])


def test_the_same_seed_draws_the_same_positions():
    pe = encoding().train()
    torch.manual_seed(5)
    first = pe.positions(10)
    torch.manual_seed(5)
    torch.testing.assert_close(pe.positions(10), first, rtol=0, atol=0)


def test_evaluation_uses_the_plain_positions():
    pe = encoding().eval()
    torch.testing.assert_close(pe.positions(40), torch.arange(40), rtol=0, atol=0)


@pytest.mark.parametrize(
    "options, context, message",
    [
        ({"randomized": True, "max_position": 64}, {}, r"^pe\.randomized=true draws integer"),
        ({"draw_range": 8}, {}, r"^pe\.draw_range=8 is shorter than the 16 positions"),
        ({"scaling": "ntk"}, {}, r"^pe\.scaling must be"),
        ({}, {"axes": 2}, r"^pe: RandomizedYaRN has no form for positions on 2 axes"),
    ],
    ids=["randomized", "short-range", "other-scaling", "grid"],
)
def test_what_the_method_does_not_take_is_refused_without_torch(options, context, message):
    with pytest.raises(ValueError, match=message):
        config = RandomizedYaRNConfig.from_keys(options, owner="RandomizedYaRN")
        config.check(EncodingContext(**{**SIZES, **context}), "RandomizedYaRN")


def test_a_short_run_trains_and_evaluates_through_hydra_keys(tmp_path):
    done = run_train(
        "debug=fast", "pe=rope_randomized_yarn", "pe.scaling_factor=2", "data.len=6",
        "eval.factors=[1,2]", "eval.diagnostics=false", f"hydra.run.dir={tmp_path}",
        one_thread=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    info = json.loads((tmp_path / "results.json").read_text())["pe_info"]
    assert (info["scaling"], info["scaling_factor"]) == ("yarn", 2.0)


def test_a_pack_refuses_it_naming_the_encoding():
    from lengen.packable import pack_refusal

    refusal = pack_refusal(compose_train("pe=rope_randomized_yarn"))
    assert refusal.startswith("pe=rope_randomized_yarn cannot train in a pack")

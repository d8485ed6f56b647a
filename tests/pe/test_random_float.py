"""pe=rope_rfs (lengen.pe.random_float): Random Float Sampling on RoPE, lengen's reading of
Shimizu et al. 2026 — training positions are T sorted uniform draws on [0, R), evaluation
0 … T−1; re-derived here in float64 from that description."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import compose_train, run_train
from lengen.build import build
from lengen.pe.config.base import EncodingContext
from lengen.pe.config.random_float import RandomFloatRoPEConfig
from lengen.pe.random_float import RandomFloatRoPE

SIZES = {"d_model": 16, "n_heads": 2, "causal": True, "train_positions": 8, "max_positions": 40}


def encoding(**options) -> RandomFloatRoPE:
    return RandomFloatRoPE(**SIZES, **options)


def rotated64(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (..., T, d) rotated pairwise (2i, 2i+1) by p_t · base^(−2i/d), written out in float64."""
    x, positions = x.double(), positions.double()
    d = x.shape[-1]
    theta = torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    angle = positions[:, None] * theta  # (T, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * angle.cos() - odd * angle.sin()
    out[..., 1::2] = even * angle.sin() + odd * angle.cos()
    return out


def test_training_positions_are_sorted_draws_inside_the_range():
    pe = encoding(float_range=30).train()
    torch.manual_seed(0)
    positions = pe.positions(8)
    assert positions.dtype == torch.float32 and positions.shape == (8,)
    assert bool((positions[1:] >= positions[:-1]).all())
    assert float(positions.min()) >= 0 and float(positions.max()) < 30


def test_training_positions_are_real_numbers_not_indices():
    pe = encoding(float_range=30).train()
    torch.manual_seed(0)
    positions = pe.positions(8).double()
    assert bool((positions != positions.round()).all())


def test_training_positions_are_the_uniform_draws_of_the_seeded_generator():
    pe = encoding(float_range=30).train()
    torch.manual_seed(3)
    drawn = pe.positions(6)
    torch.manual_seed(3)
    expected = sorted(30 * value for value in torch.rand(6, dtype=torch.float64).tolist())
    torch.testing.assert_close(
        drawn.double(), torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-5
    )


def test_the_rotation_turns_by_the_drawn_real_positions():
    pe = encoding(float_range=30).train()
    torch.manual_seed(1)
    positions = pe.positions(5)
    q, k = torch.randn(2, 1, 2, 5, 8, dtype=torch.float64)
    q_rotated, _ = pe.rotate(q, k, positions, positions)
    torch.testing.assert_close(q_rotated, rotated64(q, positions), rtol=1e-5, atol=1e-5)


def test_the_same_seed_draws_the_same_positions():
    pe = encoding().train()
    torch.manual_seed(7)
    first = pe.positions(8)
    torch.manual_seed(7)
    torch.testing.assert_close(pe.positions(8), first, rtol=0, atol=0)


def test_evaluation_uses_the_plain_positions():
    pe = encoding(float_range=30).eval()
    torch.testing.assert_close(pe.positions(12), torch.arange(12), rtol=0, atol=0)


def test_float_eval_evaluates_on_one_fixed_draw_per_length():
    pe = encoding(float_range=30, float_eval=True).eval()
    first = pe.positions(12)
    assert not torch.equal(first, torch.arange(12).float())
    torch.testing.assert_close(pe.positions(12), first, rtol=0, atol=0)


def test_the_default_range_is_the_longest_evaluation_sequence():
    assert encoding().float_range == SIZES["max_positions"]


def test_the_model_trains_on_the_drawn_positions():
    _, model, _ = build(compose_train("pe=rope_rfs", "data.len=6", "pe.float_range=50"))
    seen = []
    pe = model.stack.pe
    original = pe.rotate
    pe.rotate = lambda q, k, qp, kp: seen.append(qp) or original(q, k, qp, kp)
    model.train()
    model(torch.randint(0, 5, (2, 9)))
    assert seen and seen[0].is_floating_point() and float(seen[0].max()) < 50
    assert not torch.equal(seen[0], torch.arange(9).float())


@pytest.mark.parametrize(
    "options, context, message",
    [
        ({"randomized": True, "max_position": 64}, {}, r"^pe\.randomized=true draws integer"),
        ({"float_range": 4}, {}, r"^pe\.float_range=4 is shorter than the 8 positions"),
        ({}, {"task_positions": True}, r"^pe=rope_rfs draws its training positions, but the task"),
        ({}, {"axes": 2}, r"^pe: RandomFloatRoPE has no form for positions on 2 axes"),
        ({"extension": "rerope", "rerope_window": 4}, {}, r"^pe\.extension=rerope re-maps"),
    ],
    ids=["randomized", "short-range", "task-positions", "grid", "extension"],
)
def test_other_sources_of_positions_are_refused_without_torch(options, context, message):
    with pytest.raises(ValueError, match=message):
        config = RandomFloatRoPEConfig.from_keys(options, owner="RandomFloatRoPE")
        config.check(EncodingContext(**{**SIZES, **context}), "RandomFloatRoPE")


def test_a_short_run_trains_and_evaluates_through_hydra_keys(tmp_path):
    done = run_train(
        "debug=fast", "pe=rope_rfs", "pe.float_range=64", "data.len=6", "eval.factors=[1,2]",
        "eval.diagnostics=false", f"hydra.run.dir={tmp_path}", one_thread=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    info = __import__("json").loads((tmp_path / "results.json").read_text())["pe_info"]
    assert math.isclose(info["float_range"], 64)


def test_a_pack_refuses_it_naming_the_encoding():
    from lengen.packable import pack_refusal

    assert pack_refusal(compose_train("pe=rope_rfs")).startswith("pe=rope_rfs cannot train in a")

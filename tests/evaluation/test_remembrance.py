"""Effective Remembrance (``lengen.evaluation.remembrance``, Buitrago Ruiz & Gu 2025): the
function against the closed form of a hand-built recurrence with a known decay, its bounds and
refusals; the evaluation's diagnostic (``eval.effrem``) changes no row, leaves the random state
as it was, and lands in the report and a figure; off by default."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from helpers import assert_png, compose_train
from lengen.build import build
from lengen.evaluation import evaluate
from lengen.evaluation.remembrance import (
    curve_starts,
    effective_remembrance,
    remembrance_diagnostic,
)

pytestmark = pytest.mark.usefixtures("single_thread")

COST_KEYS = ("seconds", "peak_mem_mb")


class DecayingSum(nn.Module):
    """h_t = a·h_{t−1} + u[x_t] from h₋₁ = 0, logits (h_t, 0): next-token q = (σ(h_t), 1 − σ(h_t))."""

    def __init__(self, decay: float, values: torch.Tensor) -> None:
        super().__init__()
        self.decay, self.values = decay, values

    def forward(self, tokens):  # (B, n) -> (B, n, 2)
        state = torch.zeros(tokens.shape[0], dtype=torch.float64)
        logits = []
        for t in range(tokens.shape[1]):
            state = self.decay * state + self.values[tokens[:, t]]
            logits.append(torch.stack([state, torch.zeros_like(state)], dim=-1))
        return torch.stack(logits, dim=1)


def closed_form(decay, values, tokens, t):
    """TV of two Bernoullis = |σ(h_full) − σ(h_suffix)|, h = Σ_j a^{T−1−j} u[x_j] over the kept j."""
    length = tokens.shape[1]
    weights = decay ** torch.arange(length - 1, -1, -1, dtype=torch.float64)  # a^{T−1−j}
    terms = weights * values[tokens]  # (B, T)
    return (torch.sigmoid(terms.sum(1)) - torch.sigmoid(terms[:, t:].sum(1))).abs()


def test_effrem_of_a_decaying_recurrence_is_its_closed_form():
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(5, generator=generator, dtype=torch.float64)
    tokens = torch.randint(0, 5, (3, 12), generator=generator)
    decay = 0.8
    starts = [0, 1, 3, 6, 11]
    got = effective_remembrance(DecayingSum(decay, values), tokens, starts)
    expected = torch.stack([closed_form(decay, values, tokens, t) for t in starts], dim=1)
    assert_close(got, expected)


def test_effrem_of_a_constant_input_is_the_geometric_closed_form():
    # u = c at every token: h_full = c(1 − a^T)/(1 − a), h_suffix = c(1 − a^{T−t})/(1 − a)
    decay, c, length = 0.9, 0.7, 10
    tokens = torch.zeros(1, length, dtype=torch.long)
    starts = list(range(length))
    got = effective_remembrance(DecayingSum(decay, torch.tensor([c], dtype=torch.float64)),
                                tokens, starts)[0]  # fmt: skip
    sums = [c * (1 - decay ** (length - t)) / (1 - decay) for t in starts]
    expected = torch.tensor([abs(torch.sigmoid(torch.tensor(sums[0])) -
                                 torch.sigmoid(torch.tensor(s))) for s in sums],
                            dtype=torch.float64)  # fmt: skip
    assert_close(got, expected)


def test_a_model_that_forgets_all_but_the_last_token_remembers_nothing():
    values = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    tokens = torch.randint(0, 3, (2, 9), generator=torch.Generator().manual_seed(1))
    got = effective_remembrance(DecayingSum(0.0, values), tokens, list(range(9)))
    assert_close(got, torch.zeros_like(got))


def test_effrem_is_a_distance_in_zero_to_one_and_zero_at_the_start():
    model = DecayingSum(1.0, torch.tensor([4.0, -4.0], dtype=torch.float64))
    tokens = torch.randint(0, 2, (4, 8), generator=torch.Generator().manual_seed(2))
    got = effective_remembrance(model, tokens, list(range(8)))
    assert torch.all(got[:, 0] == 0) and torch.all((got >= 0) & (got <= 1))


@pytest.mark.parametrize("starts", [[8], [-1], [2.5]])
def test_starts_outside_the_context_are_refused_naming_the_range(starts):
    tokens = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(ValueError, match=r"starts must be integers in \[0, 8\)"):
        effective_remembrance(DecayingSum(0.5, torch.ones(1, dtype=torch.float64)), tokens, starts)


def test_curve_starts_cover_the_context_from_zero():
    assert curve_starts(10, points=4) == [0, 3, 6, 9]
    assert curve_starts(5) == [0, 1, 2, 3, 4]


# -- the evaluation's diagnostic ------------------------------------------------------------------
def built(*overrides: str):
    cfg = compose_train("data.len=6", "eval.lengths=[6,12]", "model.d_model=32",
                        "model.mixer=gla", "pe=nope", *overrides)  # fmt: skip
    data, model, lengths = build(cfg)
    return cfg, data, model, lengths


def scored(effrem: bool, tmp_path):
    cfg, data, model, lengths = built(f"eval.effrem={str(effrem).lower()}")
    model.load_state_dict(built()[2].state_dict())  # the same weights both times
    report: dict = {}
    rows = evaluate(data, model, lengths, settings=cfg.eval, output_dir=tmp_path,
                    progress=False, report=report)  # fmt: skip
    return [{k: v for k, v in row.items() if k not in COST_KEYS} for row in rows], report


def test_rows_are_identical_with_and_without_effrem(tmp_path):
    assert scored(True, tmp_path / "on")[0] == scored(False, tmp_path / "off")[0]


def test_effrem_is_off_by_default(tmp_path):
    assert "effective_remembrance" not in scored(False, tmp_path)[1]
    assert compose_train().eval.effrem is False


def test_effrem_lands_in_the_report_and_a_figure(tmp_path):
    _, report = scored(True, tmp_path)
    section = report["effective_remembrance"]
    assert sorted(section["lengths"]) == ["12", "6"] and section["distance"] == "total_variation"
    for curve in section["lengths"].values():
        assert len(curve["t"]) == len(curve["effrem"]) and curve["effrem"][0] == 0.0
    assert_png(tmp_path / "effective_remembrance.png")


def test_a_tasks_context_ends_where_its_first_answer_token_is_predicted():
    _, data, model, lengths = built()
    section = remembrance_diagnostic(data, model, lengths, samples=2, evaluated=8)
    inputs = data.held_out_inputs(6, 8, data.eval_seed)[:2]
    targets = next(data.batches_of(inputs, 2))["targets"]
    first_answer = int((targets[0] >= 0).nonzero()[0])
    assert section["lengths"]["6"]["tokens"] == first_answer + 1


def test_effrem_leaves_the_random_state_and_the_mode_as_it_found_them():
    _, data, model, lengths = built()
    model.train()
    before = torch.get_rng_state()
    remembrance_diagnostic(data, model, lengths, samples=2, evaluated=8)
    assert torch.equal(torch.get_rng_state(), before) and model.training


def test_an_encoder_is_skipped_in_one_line():
    _, data, model, lengths = built("model=encoder", "model.mixer=attention")
    section = remembrance_diagnostic(data, model, lengths, samples=2, evaluated=8)
    assert section["lengths"] == {} and section["skipped"] == [
        "EffRem needs a decoder on sequences (tasks or text)"
    ]

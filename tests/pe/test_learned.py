"""pe=learned (``lengen.pe.learned``): the table's policies past training (``extend``,
``error``, ``interpolate``, as timm's ``resample_abs_pos_embed``), axial and full tables on grids,
and the trained part of the table never depending on evaluation settings (parameters,
initialisation, old checkpoints, a resumed run).
"""

from __future__ import annotations

import math
import os
import signal

import pytest
import torch
import torch.nn.functional as F

from helpers import compose_train, grid_cells
from lengen.build import build
from lengen.checks import Preempted
from lengen.pe import Learned
from lengen.train import run

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")


# -- policies --------------------------------------------------------------------------------
def test_learned_extend_sizes_table_to_max_positions():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40, policy="extend")
    assert pe.rows == 40
    assert pe.describe() == {
        "policy": "extend",
        "table_size": 40,
        "trained_rows": 10,
        "trained_positions": 10,
    }


def test_learned_default_policy_is_extend():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40)
    assert pe.describe()["policy"] == "extend"
    assert pe.rows == 40


def test_learned_error_policy_refuses_longer_evaluation():
    with pytest.raises(ValueError, match=r"pe\.policy"):
        Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40, policy="error")


def test_learned_error_policy_accepts_evaluation_within_training():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=10, policy="error")
    assert pe.describe() == {
        "policy": "error",
        "table_size": 10,
        "trained_rows": 10,
        "trained_positions": 10,
    }


def test_learned_unknown_policy_raises():
    with pytest.raises(ValueError, match=r"pe\.policy"):
        Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40, policy="clamp")


def test_learned_embed_adds_scaled_table_rows():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(11))
    positions = torch.tensor([0, 3, 9, 20, 39])
    rows = torch.cat([pe.table.weight.detach(), pe.extension])  # trained rows, then the others
    expected = x + math.sqrt(16) * rows[positions]
    torch.testing.assert_close(pe.embed(x, positions), expected)


def test_learned_embed_past_table_raises():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40)
    with pytest.raises(ValueError):
        pe.embed(torch.zeros(1, 41, 16), torch.arange(41))


def test_learned_interpolate_at_the_trained_length_is_the_table():
    pe = Learned(d_model=8, n_heads=2, policy="interpolate", train_positions=6, max_positions=12)
    x = torch.zeros(1, 6, 8)
    expected = pe.scale * pe.table.weight
    torch.testing.assert_close(pe.embed(x, torch.arange(6))[0], expected)


def test_learned_interpolate_at_twice_the_length_is_linear_interpolation():
    pe = Learned(d_model=8, n_heads=2, policy="interpolate", train_positions=6, max_positions=12)
    table = pe.table.weight.detach()  # (6, 8)
    resized = F.interpolate(table.T[None], size=12, mode="linear", align_corners=False)[0].T
    actual = pe.embed(torch.zeros(1, 12, 8), torch.arange(12))[0].detach()
    torch.testing.assert_close(actual, pe.scale * resized)


def test_learned_interpolate_refuses_randomized_positions():
    with pytest.raises(ValueError, match=r"^pe\.policy=interpolate .*allowed: extend, error$"):
        Learned(d_model=8, n_heads=2, policy="interpolate", randomized=True, max_position=20)


# -- grids: axial and full tables ------------------------------------------------------------
def test_learned_axial_grid_interpolate_identity_and_twice():
    pe = Learned(d_model=8, n_heads=2, axes=2, policy="interpolate", train_positions=4)
    rows, columns = (embedding.weight.detach() for embedding in pe.table)  # (4, 4) each
    at_trained = pe.embed(torch.zeros(1, 16, 8), grid_cells((4, 4)))[0].detach()
    expected = torch.cat([rows.repeat_interleave(4, 0), columns.repeat(4, 1)], dim=-1)
    torch.testing.assert_close(at_trained, pe.scale * expected)

    def resize(table):
        return F.interpolate(table.T[None], size=8, mode="linear", align_corners=False)[0].T

    twice = pe.embed(torch.zeros(1, 64, 8), grid_cells((8, 8)))[0].detach()
    big_rows, big_columns = resize(rows), resize(columns)
    expected = torch.cat([big_rows.repeat_interleave(8, 0), big_columns.repeat(8, 1)], dim=-1)
    torch.testing.assert_close(twice, pe.scale * expected)


def test_learned_full_grid_interpolate_is_bicubic_at_twice_and_identity_at_trained():
    pe = Learned(
        d_model=8, n_heads=2, axes=2, table="full", policy="interpolate", train_positions=4
    )
    table = pe.table.weight.detach().view(4, 4, 8)  # row-major cells
    at_trained = pe.embed(torch.zeros(1, 16, 8), grid_cells((4, 4)))[0].detach()
    torch.testing.assert_close(at_trained, pe.scale * table.reshape(16, 8))
    image = table.permute(2, 0, 1)[None]  # (1, D, 4, 4), timm's layout
    resized = F.interpolate(image, size=(8, 8), mode="bicubic", align_corners=False)
    expected = resized[0].permute(1, 2, 0).reshape(64, 8)
    twice = pe.embed(torch.zeros(1, 64, 8), grid_cells((8, 8)))[0].detach()
    torch.testing.assert_close(twice, pe.scale * expected)


def test_learned_grid_extend_keeps_untrained_rows_and_error_refuses():
    pe = Learned(d_model=8, n_heads=2, axes=2, train_positions=4, max_positions=8)
    assert (pe.trained_rows, pe.rows) == (4, 8)
    assert sum(p.numel() for p in pe.parameters()) == 2 * 4 * 4  # 2 axes × 4 rows × 4 columns
    with pytest.raises(ValueError, match=r"^pe\.policy=error: .* per axis"):
        Learned(d_model=8, n_heads=2, axes=2, policy="error", train_positions=4, max_positions=8)


def test_learned_grid_past_the_table_is_refused():
    pe = Learned(d_model=8, n_heads=2, axes=2, train_positions=4, max_positions=4)
    with pytest.raises(ValueError, match=r"^pe=learned: grid coordinate 5 is past the table"):
        pe.embed(torch.zeros(1, 36, 8), grid_cells((6, 6)))


# -- the trained rows never depend on evaluation settings ------------------------------------
def parameters(*overrides: str) -> dict[str, torch.Size]:
    _, model, _ = build(compose_train("pe=learned", *overrides))
    return {name: p.shape for name, p in model.named_parameters()}


def test_parameters_are_the_same_whatever_the_eval_lengths():
    assert parameters("eval.factors=[1]") == parameters("eval.factors=[1,2,4,8,16]")


def test_untrained_rows_still_cover_the_eval_lengths():
    _, model, _ = build(compose_train("pe=learned", "eval.factors=[1,8]"))
    pe = model.stack.pe
    assert pe.table.num_embeddings == pe.train_positions
    assert pe.rows == pe.max_positions


def test_initialisation_does_not_depend_on_the_split():
    # the same seed gives the same rows as one table of every row did before the split
    from helpers import pe_factory

    torch.manual_seed(0)
    pe = pe_factory("learned", train_positions=8, max_positions=32)(d_model=16, n_heads=2)
    torch.manual_seed(0)
    full = torch.nn.Embedding(32, 16)
    torch.nn.init.normal_(full.weight, std=16**-0.5)
    torch.testing.assert_close(torch.cat([pe.table.weight, pe.extension]), full.weight)


def test_a_checkpoint_holding_every_row_loads():
    # runs written before the split saved the untrained rows as parameters
    _, model, _ = build(compose_train("pe=learned", "eval.factors=[1,8]"))
    pe = model.stack.pe
    old = torch.randn(pe.rows, pe.d_model)
    pe.load_state_dict({"table.weight": old})
    torch.testing.assert_close(torch.cat([pe.table.weight.detach(), pe.extension]), old)


@pytest.mark.parametrize("factors", ["[1]", "[1,2,4,8,16]"])
def test_an_interrupted_run_resumes_with_other_eval_lengths(tmp_path, monkeypatch, factors):
    import lengen.lit

    settings = ["pe=learned", "debug=fast", "trainer.max_steps=6", "logger=none"]
    real = lengen.lit.LitModel.training_step

    def signalling(self, batch, batch_idx):
        if self.global_step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, batch, batch_idx)

    monkeypatch.setattr(lengen.lit.LitModel, "training_step", signalling)
    with pytest.raises(Preempted):
        run(compose_train(*settings, "eval.factors=[1,2]"), run_dir=tmp_path)
    monkeypatch.setattr(lengen.lit.LitModel, "training_step", real)
    results = run(
        compose_train(*settings, f"eval.factors={factors}", "resume=true"), run_dir=tmp_path
    )
    assert results["train_steps"] == 6

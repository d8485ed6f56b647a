"""pe=learned: the trained part of the table never depends on evaluation settings."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from helpers import compose_train
from lengen.build import build
from lengen.checks import Preempted
from lengen.train import run

pytestmark = pytest.mark.usefixtures("single_thread")


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

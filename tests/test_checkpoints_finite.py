"""lengen.checkpoints.load_weights: a checkpoint whose weights hold NaN or inf is refused, one
line naming the run, for eval.py, plot.py attention and init_from alike (issue #51 item 7:
CK01, CK01b: all-NaN weights evaluated to nan rows and blank maps, exit 0, with no word)."""

from __future__ import annotations

import math

import pytest
import torch

from lengen.checkpoints import NonFiniteCheckpoint, load_weights, non_finite_weights


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_state_with_a_non_finite_weight_is_named(value):
    state = {"a.weight": torch.zeros(2), "b.weight": torch.tensor([1.0, value])}
    problem = non_finite_weights(state)
    assert problem.startswith(
        "the checkpoint's weights hold NaN or inf (1 of 2 tensors, the first b.weight)"
    )


def test_integer_buffers_and_finite_weights_pass():
    assert non_finite_weights({"a": torch.ones(2), "steps": torch.tensor([3])}) is None


def test_load_weights_refuses_before_loading():
    model = torch.nn.Linear(2, 2)
    before = model.weight.detach().clone()
    checkpoint = {
        "state_dict": {"model.weight": torch.full((2, 2), math.nan), "model.bias": torch.zeros(2)}
    }
    with pytest.raises(NonFiniteCheckpoint, match=r"^init_from: the checkpoint's weights hold NaN"):
        load_weights(model, checkpoint, "init_from")
    assert torch.equal(model.weight, before)

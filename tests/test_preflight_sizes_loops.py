"""The memory estimate of a looped model (model.loops, docs/models.md "Looped depth"): a
training step keeps every loop's activations for backward, so K loops cost K times the
unlooped model's activations (the weights are tied: the parameters are the unlooped model's,
within the estimate's factor)."""

from __future__ import annotations

from helpers import compose_train
from lengen.preflight.sizes import model_sizes


def test_a_looped_step_keeps_every_loops_activations():
    plain = model_sizes(compose_train(), 1)
    looped = model_sizes(compose_train("model.loops=3"), 1)
    assert looped.training["data.len"] == 3 * plain.training["data.len"]

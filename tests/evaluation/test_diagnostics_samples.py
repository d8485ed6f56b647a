"""lengen.evaluation.diagnostics: results.json's ``attention_diagnostics.samples`` is the number
of instances the statistics looked at, never more than were evaluated (issue #51 item 7: G04,
``eval.diagnostics_samples=100000`` with 8 evaluated instances recorded 100000)."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen.build import build
from lengen.evaluation.diagnostics import attention_diagnostics

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def built():
    cfg = compose_train("data.len=6", "eval.lengths=[6,12]", "model.d_model=32")
    data, model, lengths = build(cfg)
    return data, model, lengths


def test_more_samples_than_evaluated_record_the_evaluated(built):
    data, model, lengths = built
    section = attention_diagnostics(data, model, lengths, samples=100000, evaluated=8)
    assert section["samples"] == 8

"""model.loop_rule=confidence: each evaluated length's loop count by Fan et al.'s adaptive
stopping (lengen.evaluation.loop_choice; docs/models.md "Looped depth").

The curve is checked against the reference's formula (looped-tf ``src/test_func.py``,
``test_model_adaptive``: cross-entropy of the answer positions' logits against their own
argmax, averaged over the batch's answer tokens) applied in float64 to test_looped's
written-out loop.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

from helpers import compose_train
from lengen.data.task_data import IGNORE
from lengen.errors import ConfigError
from lengen.evaluation.loop_choice import choose_loops, confidence_curve
from lengen.model.config import DecoderOnlyConfig
from lengen.model.looped import looped_depth, loops_forced
from lengen.preflight import check_components, validate
from model.test_looped import reference_logits, small

pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")


def reference_curve(net, tokens: torch.Tensor, targets: torch.Tensor, k_max: int) -> list:
    """c(K) = mean over answer tokens of CrossEntropy(logits, argmax logits), K = 1 … k_max,
    from the float64 loop written out (no lengen evaluation code)."""
    answers = targets != IGNORE  # (B, T): the task's answer mask
    curve = []
    for loops in range(1, k_max + 1):
        logits = reference_logits(net, tokens, loops)[answers]  # (A, V) float64
        own = logits.argmax(-1)
        curve.append(float(-(logits.log_softmax(-1)[torch.arange(len(own)), own]).mean()))
    return curve


# -- the curve and the choice ---------------------------------------------------------------------
def test_the_confidence_curve_equals_the_reference_formula_in_float64():
    net = small(seed=3, loops=2, loop_rule="confidence")
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 7, (3, 9), generator=generator)
    targets = torch.full_like(tokens, IGNORE)
    targets[:, 5:] = tokens[:, 5:]  # the answer: the last 4 positions …
    targets[0, 6] = IGNORE  # … one of them unscored (a tagged task's mask)
    # the set in two batches, as evaluation splits it: summed before dividing
    batches = [({"tokens": tokens[:2]}, targets[:2]), ({"tokens": tokens[2:]}, targets[2:])]
    with torch.no_grad():
        curve = confidence_curve(net, looped_depth(net), batches, 4)
    expected = reference_curve(net, tokens, targets, 4)
    assert_close(torch.tensor(curve, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64), rtol=1e-4,
                 atol=1e-5)  # fmt: skip


def test_the_choice_is_the_count_of_the_lowest_confidence_loss():
    assert choose_loops([0.5, 0.2, 0.3, 0.25]) == 2


def test_a_tie_goes_to_the_smallest_count():
    assert choose_loops([0.4, 0.1, 0.3, 0.1]) == 2


def test_a_forced_count_holds_inside_its_block_only():
    net = small(loops=2, loop_rule="confidence")
    depth = looped_depth(net)
    with loops_forced(depth, 7):
        inside = depth.loops_at(13)
    assert (inside, depth.loops_at(13)) == (7, 5)  # then the linear ceil(2 · 13 / 6) again


def test_confidence_trains_at_the_linear_count():
    typed = DecoderOnlyConfig.from_keys({"loops": 2, "loop_rule": "confidence"})
    assert typed.loop_count(13, 6) == math.ceil(2 * 13 / 6)


# -- rows -------------------------------------------------------------------------------------------
def built(*overrides):
    from lengen.build import build

    data, net, _ = build(compose_train("model.loops=2", *overrides))
    return data, net


def test_a_row_is_scored_at_the_chosen_count():
    from lengen.evaluation.tasks import score_lengths

    data, net = built("model.loop_rule=confidence", "model.loop_extra=3")
    length = data.train_len * 2
    row = score_lengths(net, data, [length], samples=8, progress=False)[0]
    depth = looped_depth(net)
    depth.rule = "fixed"  # the same weights scored at the chosen count, with no choice made
    with loops_forced(depth, row["loops"]):
        forced = score_lengths(net, data, [length], samples=8, progress=False)[0]
    assert (row["loss"], row["exact_match"]) == (forced["loss"], forced["exact_match"])


def test_a_row_records_the_chosen_count_and_its_curve():
    from lengen.evaluation.tasks import score_lengths

    data, net = built("model.loop_rule=confidence", "model.loop_extra=3")
    length = data.train_len * 2
    row = score_lengths(net, data, [length], samples=8, progress=False)[0]
    linear = looped_depth(net).loop_count(data.sequence_length(length))
    assert len(row["loop_confidence"]) == linear + 3
    assert row["loops"] == choose_loops(row["loop_confidence"])


# -- end to end: train.py and eval.py ---------------------------------------------------------------
# (eval.py by confidence on a fixed-count run: tests/model/test_looped.py, over the looped run it
# trains for its own eval.py tests, so that one training run serves both)
def test_eval_py_re_evaluates_a_linear_loop_run_by_confidence(tmp_path):
    from lengen.reeval import evaluate_run
    from lengen.train import run

    run(compose_train("model.loops=2", "model.loop_rule=linear", "logger=none",
                      "trainer.max_steps=2"), run_dir=tmp_path)  # fmt: skip
    rows = evaluate_run([f"run={tmp_path}", "model.loop_rule=confidence", "model.loop_extra=0",
                         "eval.factors=[1,2]", "tag=confidence"])["eval"]  # fmt: skip
    assert all(row["loops"] == choose_loops(row["loop_confidence"]) for row in rows)


def test_a_run_trains_and_evaluates_under_the_confidence_rule(tmp_path):
    from lengen.train import run

    # 1× and 2× the training length: each length's curve is scored the same way, and greedy
    # decoding through up to K + 1 loops per token costs most at the longest lengths
    cfg = compose_train("model.loops=2", "model.loop_rule=confidence", "model.loop_extra=1",
                        "eval.decoding=greedy", "eval.factors=[1,2]", "logger=none")  # fmt: skip
    rows = run(cfg, run_dir=tmp_path)["eval"]
    assert all(row["loops"] == choose_loops(row["loop_confidence"]) for row in rows)


# -- refusals ---------------------------------------------------------------------------------------
def refused_line(check, *overrides) -> str:
    with pytest.raises(ConfigError) as refused:
        check(compose_train(*overrides))
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_confidence_on_an_encoder_decoder_is_refused_in_one_line():
    message = refused_line(validate, "model=encoder_decoder", "model.loop_rule=confidence")
    assert message.startswith("model.loop_rule=confidence chooses one loop count")


def test_confidence_on_text_is_refused_in_one_line():
    message = refused_line(check_components, "data=text", "model.loop_rule=confidence")
    assert message.startswith("model.loop_rule=confidence scores its confidence on a task's")


def test_confidence_on_a_grid_is_refused_in_one_line():
    message = refused_line(check_components, "data=grid_locate", "model=encoder",
                           "pe=sinusoidal", "model.loop_rule=confidence")  # fmt: skip
    assert message.startswith("model.loop_rule=confidence starts from the linear count")


def test_a_negative_loop_extra_is_refused_in_one_line():
    message = refused_line(validate, "model.loop_extra=-1")
    assert message.startswith("model.loop_extra must be")


def test_confidence_on_an_unlooped_checkpoint_is_refused_in_one_line(tmp_path):
    from lengen.reeval import evaluate_run
    from lengen.train import run

    run(compose_train("logger=none", "trainer.max_steps=1"), run_dir=tmp_path)
    with pytest.raises(ConfigError) as refused:
        evaluate_run([f"run={tmp_path}", "model.loop_rule=confidence", "tag=confidence"])
    message = str(refused.value)
    assert "holds a different model" in message and "\n" not in message


def test_the_confidence_refusals_need_no_torch():
    code = (
        "import sys\n"
        "from lengen.model.config import DecoderOnlyConfig\n"
        "typed = DecoderOnlyConfig.from_keys({'loop_rule': 'confidence'})\n"
        "try:\n"
        "    typed.check_loop_choice('text', 1)\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[-1] == "False" and lines[0].startswith("model.loop_rule=confidence scores")

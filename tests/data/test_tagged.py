"""The tagged layout (answer t at input token t: ``layout.format_tagged``) and the tasks that
use it: S5/A5 permutation composition, flip-flop, MQAR. Their slow references are in
tests/data/test_tasks.py (``REFERENCES``); here: the layout, causality, scoring of unscored
positions, the tasks' distributions and options."""

from __future__ import annotations

import functools
import json
import math

import pytest
import torch

from helpers import TINY, compose_train, load_task, sharpen, task_data
from lengen.build import build
from lengen.checks import ConfigError
from lengen.data.layout import BOS, N_SPECIAL, format_tagged, tagged_answer_start
from lengen.data.source import IGNORE
from lengen.data.tasks import MQAR, FlipFlop, PermutationComposition
from lengen.data.tasks.recall import fill_avoiding, power_law_gaps
from lengen.data.tasks.state import compose, group_elements, permutation_parity
from lengen.evaluation.by_position import teacher_forced_correct
from lengen.evaluation.metrics import batch_stats
from lengen.evaluation.tasks import constant_baseline, score_lengths
from lengen.reeval import parse_arguments
from lengen.rundir import RunDirectory

TAGGED = ("s5", "a5", "flip_flop", "mqar")


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny tensors everywhere in this file."""


def example() -> tuple[torch.Tensor, torch.Tensor]:
    """inputs (2, 4) and answers (2, 4) with unscored positions (−1)."""
    inputs = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
    answers = torch.tensor([[-1, 5, -1, 6], [7, -1, -1, -1]])
    return inputs, answers


# -- the layout ---------------------------------------------------------------------------------
def test_decoder_layout_is_bos_then_the_inputs_without_shift():
    inputs, answers = example()
    batch = format_tagged(inputs, answers, "decoder")
    assert batch["inputs"]["tokens"].tolist() == [[BOS, 4, 5, 6, 7], [BOS, 7, 6, 5, 4]]
    assert batch["targets"].tolist() == [
        [IGNORE, IGNORE, 9, IGNORE, 10],  # y_t at the column of x_t
        [IGNORE, 11, IGNORE, IGNORE, IGNORE],
    ]


def test_encoder_layout_reads_answers_at_the_tokens():
    inputs, answers = example()
    batch = format_tagged(inputs, answers, "encoder")
    assert torch.equal(batch["inputs"]["tokens"], inputs + N_SPECIAL)
    assert batch["targets"][0].tolist() == [IGNORE, 9, IGNORE, 10]


def test_encoder_decoder_with_unscored_positions_is_refused():
    with pytest.raises(ValueError, match=r"^model=encoder_decoder: .*allowed: model=decoder"):
        format_tagged(*example(), "encoder_decoder")


def test_encoder_decoder_generates_a_fully_scored_answer_after_bos():
    inputs = torch.tensor([[0, 1, 2]])
    batch = format_tagged(inputs, inputs + 1, "encoder_decoder")
    assert batch["inputs"]["tgt"].tolist() == [[BOS, 5, 6]]
    assert batch["targets"].tolist() == [[5, 6, 7]]


@pytest.mark.parametrize("kind", ["decoder", "encoder", "encoder_decoder"])
def test_answer_position_p_is_target_column_start_plus_p(kind):
    inputs = torch.tensor([[0, 1, 2]])
    answers = torch.tensor([[4, 5, 6]])
    targets = format_tagged(inputs, answers, kind)["targets"]
    start = tagged_answer_start(kind)
    assert targets[0, start:].tolist() == (answers[0] + N_SPECIAL).tolist()


# -- causality: the output at t depends on nothing after t --------------------------------------
@functools.cache
def tiny(task: str, kind: str = "decoder"):
    """(data, sharpened model) of a tiny run of this task, trained up to length 8."""
    length = 8
    data, model, _ = build(
        compose_train(f"data={task}", f"model={kind}", f"data.len={length}",
                      f"data.min_len={min(length, load_task(task).min_length)}",
                      f"eval.lengths=[{length}]", "logger=none", *TINY)
    )  # fmt: skip
    return data, sharpen(model)


@pytest.mark.parametrize("task", TAGGED)
def test_decoder_output_at_t_depends_on_nothing_after_t(task):
    data, model = tiny(task)
    tokens = data.batches_of(data.held_out_inputs(8, 4, seed=0), 4).__next__()["inputs"]["tokens"]
    t = 4  # column 4 holds x_4 (BOS at 0)
    changed = tokens.clone()
    changed[:, t + 1 :] = torch.randint(N_SPECIAL, data.vocab_size, changed[:, t + 1 :].shape)
    with torch.no_grad():
        before, after = model(tokens=tokens), model(tokens=changed)
    torch.testing.assert_close(before[:, : t + 1], after[:, : t + 1])
    assert not torch.allclose(before[:, t + 1 :], after[:, t + 1 :])  # the later ones do change


def test_flip_flop_answer_is_not_taken_from_the_bit_that_holds_it():
    # the read bit (the token after r) is the answer: flipping it must not move the answer,
    # which is tagged at the r and computed from the writes before it
    task = FlipFlop()
    inputs = task.sample_inputs(32, 64, torch.Generator().manual_seed(0))
    reads = (inputs[:, :-1] == task.READ).nonzero()  # (k, 2): row, column of an r
    flipped = inputs.clone()
    flipped[reads[:, 0], reads[:, 1] + 1] = 2 * task.ZERO + 1 - inputs[reads[:, 0], reads[:, 1] + 1]
    assert torch.equal(task.solve(flipped), task.solve(inputs))


@pytest.mark.parametrize("name", ["s5", "a5"])
def test_running_product_of_a_prefix_is_the_prefix_of_the_running_product(name):
    task = load_task(name)
    inputs = task.sample_inputs(20, 16, torch.Generator().manual_seed(0))
    for t in (1, 7, 13):
        assert torch.equal(task.solve(inputs[:, :t]), task.solve(inputs)[:, :t])


# -- scoring: only scored positions count --------------------------------------------------------
def logits_predicting(tokens: torch.Tensor, vocab: int = 16) -> torch.Tensor:
    """Logits (B, T, vocab) whose argmax is ``tokens`` (B, T)."""
    return torch.nn.functional.one_hot(tokens.clamp(min=0), vocab).float()


def test_exact_match_asks_only_for_the_scored_positions():
    batch = format_tagged(*example(), "decoder")
    targets = batch["targets"]
    predicted = torch.where(targets == IGNORE, 3, targets)  # wrong wherever nothing is scored
    stats = batch_stats(logits_predicting(predicted), targets)
    assert (stats["tokens"], stats["correct_tokens"], stats["exact"]) == (3, 3, 2)


def test_accuracy_by_position_keeps_every_token_position_with_its_scored_count():
    batch = format_tagged(*example(), "decoder")
    targets = batch["targets"]
    correct, scored = teacher_forced_correct(logits_predicting(targets), targets, start=1)
    assert scored.sum(0).tolist() == [1, 1, 0, 1]  # m = n columns; position 2 never scored
    assert torch.equal(correct, scored)


def test_constant_baseline_leaves_unscored_positions_out():
    answers = torch.tensor([[-1, 1, 2], [-1, 1, 3], [-1, 0, -1]])
    # position 1: mode 1, right 2 of 3; position 2: 1 of 2; instances all right: row 0
    assert constant_baseline(answers) == pytest.approx((3 / 5, 1 / 3))


def test_greedy_equals_teacher_forcing_on_a_tagged_decoder():
    data, model = tiny("flip_flop")
    rows = {
        protocol: score_lengths(
            model, data, [8, 12], samples=16, protocol=protocol, progress=False
        )  # fmt: skip
        for protocol in ("teacher_forced", "greedy")
    }
    for forced, greedy in zip(rows["teacher_forced"], rows["greedy"], strict=True):
        assert greedy["protocol"] == "greedy"
        for key in ("accuracy", "exact_match", "loss"):
            assert greedy[key] == pytest.approx(forced[key]), key


def test_row_accuracy_is_over_the_reads_of_flip_flop():
    data, model = tiny("flip_flop")
    (row,) = score_lengths(model, data, [12], samples=16, progress=False)
    inputs = data.held_out_inputs(12, 16, data.eval_seed)
    answers = data.task.solve(inputs)  # (N, 12), −1 off the reads
    with torch.no_grad():
        predicted = model(**data.format(inputs, answers)["inputs"])[:, 1:].argmax(-1)
    reads = answers >= 0
    right = (predicted == answers + N_SPECIAL) & reads
    assert row["accuracy"] == pytest.approx(float(right.sum() / reads.sum()))
    assert row["exact_match"] == pytest.approx(float((right | ~reads).all(1).double().mean()))
    assert row["chance_accuracy"] == 0.5 and math.isfinite(row["loss"])


# -- tasks: model kinds, options, distributions ------------------------------------------------
@pytest.mark.parametrize(("task", "kind"), [("flip_flop", "encoder"), ("mqar", "encoder_decoder")])
def test_model_kinds_a_task_cannot_run_are_refused_in_one_line(task, kind):
    cfg = compose_train(f"data={task}", f"model={kind}", "logger=none", *TINY)
    with pytest.raises(ConfigError, match=rf"^model={kind}: task {task} .*; allowed: model="):
        build(cfg)


@pytest.mark.parametrize("name", ["s5", "a5"])
def test_permutation_tasks_run_on_every_model_kind(name):
    assert load_task(name).model_kinds is None


def test_group_tables_are_latin_squares_with_an_identity():
    for name, order in (("s5", 120), ("a5", 60)):
        task = load_task(name)
        table = task.table
        assert table.shape == (order, order)
        identity = task.vocab.index("01234")
        assert table[identity].tolist() == list(range(order))
        assert all(sorted(row) == list(range(order)) for row in table.tolist())


def test_a5_is_the_even_permutations_and_closed():
    elements = group_elements("a5")
    assert len(elements) == 60 and all(permutation_parity(p) == 0 for p in elements)
    assert {compose(a, b) for a in elements for b in elements} == set(elements)


def test_composition_applies_the_left_element_first():
    swap01, cycle = (1, 0, 2, 3, 4), (1, 2, 3, 4, 0)  # 0↔1; i -> i+1
    assert compose(swap01, cycle) == (2, 1, 3, 4, 0)  # 0 -> 1 -> 2


def test_flip_flop_starts_with_a_write_and_ends_with_a_read():
    task = FlipFlop()
    inputs = task.sample_inputs(16, 32, torch.Generator().manual_seed(0))
    assert (inputs[:, 0] == task.WRITE).all() and (inputs[:, -2] == task.READ).all()
    assert ((inputs[:, 1::2] == task.ZERO) | (inputs[:, 1::2] == task.ONE)).all()


@pytest.mark.parametrize("p_ignore", [0.98, 0.8, 0.1])
def test_flip_flop_instruction_rates_follow_p_ignore(p_ignore):
    task = FlipFlop(p_ignore=p_ignore)
    ops = task.sample_inputs(202, 400, torch.Generator().manual_seed(0))[:, 2:-2:2]  # free ones
    shares = [float((ops == op).double().mean()) for op in (task.IGNORE_OP, task.WRITE, task.READ)]
    expected = [p_ignore, (1 - p_ignore) / 2, (1 - p_ignore) / 2]
    assert shares == pytest.approx(expected, abs=0.01)


def test_flip_flop_odd_lengths_are_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"^eval\.lengths: task flip_flop has instances of even"):
        task_data("flip_flop").check_eval_lengths([64, 129])


def test_flip_flop_bad_p_ignore_is_named():
    with pytest.raises(ValueError, match=r"^data\.task\.p_ignore must be a number in \[0"):
        FlipFlop(p_ignore=1.0)


def test_eval_py_takes_another_flip_flop_distribution():
    # the paper's sparse and dense tails are evaluated on a run trained on p_ignore = 0.8
    _, _, overrides = parse_arguments(["run=somewhere", "data.task.p_ignore=0.98"])
    assert overrides == ["data.task.p_ignore=0.98"]


def test_mqar_keys_are_distinct_and_each_is_asked_once():
    task = MQAR()
    inputs = task.sample_inputs(64, 32, torch.Generator().manual_seed(0))
    pairs = task.pairs(64)
    keys = inputs[:, 0 : 2 * pairs : 2]
    assert all(len(set(row)) == pairs for row in keys.tolist())
    asked = (inputs[:, 2 * pairs :, None] == keys[:, None, :]).sum(1)  # (B, pairs)
    assert (asked == 1).all()


def test_mqar_queries_sit_at_even_offsets_after_the_pairs():
    task = MQAR()
    inputs = task.sample_inputs(64, 32, torch.Generator().manual_seed(1))
    pairs = task.pairs(64)
    columns = (task.solve(inputs) >= 0).nonzero()[:, 1]
    assert ((columns - 2 * pairs) % 2 == 0).all() and (columns >= 2 * pairs).all()


def test_mqar_blank_fill_without_random_non_queries():
    task = MQAR(random_non_queries=False)
    inputs = task.sample_inputs(32, 8, torch.Generator().manual_seed(0))
    region = inputs[:, 2 * task.pairs(32) :]
    assert set(region.unique().tolist()) - {0} <= set(range(1, 128))  # blanks and the keys


def test_power_law_gaps_first_draw_follows_zoologys_probabilities():
    space, power_a = 6, 0.3
    draws = power_law_gaps(space, 1, power_a, 40000, torch.Generator().manual_seed(0))[:, 0]
    p = torch.tensor([power_a * g ** (power_a - 1) for g in range(1, space + 1)])
    p = p / p.sum()  # zoology/data/multiquery_ar.py
    shares = torch.bincount(draws, minlength=space).double() / len(draws)
    torch.testing.assert_close(shares, p.double(), atol=0.01, rtol=0)


def test_power_law_gaps_are_distinct():
    gaps = power_law_gaps(24, 8, 0.01, 64, torch.Generator().manual_seed(0))
    assert all(len(set(row)) == 8 for row in gaps.tolist())


def test_random_fill_avoids_the_rows_keys_and_reaches_every_other_symbol():
    keys = torch.tensor([[1, 5, 6], [0, 9, 2]])
    fill = fill_avoiding(keys, 10, (2, 4000), torch.Generator().manual_seed(0))
    for row, excluded in zip(fill.tolist(), keys.tolist(), strict=True):
        assert set(row) == set(range(10)) - set(excluded)


def test_mqar_lengths_beyond_the_keys_are_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"^eval\.lengths: length 80 holds 10 key-value pairs"):
        MQAR(vocab_size=16).check_length(80, "eval.lengths")


def test_mqar_bad_kv_fraction_is_named():
    with pytest.raises(ValueError, match=r"^data\.task\.kv_fraction must be a number in \(0"):
        MQAR(kv_fraction=0.6)


def test_permutation_group_other_than_s5_a5_is_named():
    with pytest.raises(ValueError, match=r"^data\.task\.group must be one of s5, a5"):
        PermutationComposition(group="s4")


# -- the data card ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", TAGGED)
def test_data_card_marks_unscored_example_positions_none(name, tmp_path):
    data = task_data(name, model_kind="decoder")
    RunDirectory(tmp_path).write_data_card(data, [data.train_len])
    card = json.loads((tmp_path / "data_card.json").read_text())
    assert card["tagged"] is True and card["scored"] == data.task.scored
    answer = card["example"]["answer"]
    assert len(answer) == len(card["example"]["input"])
    assert set(answer) - {None} <= set(card["answer_symbols"])

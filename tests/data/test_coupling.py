"""Task-supplied positions of the addition tasks (``data.task.positions``): position coupling
and Abacus, against re-derivations from the papers' definitions and the reference code, in
plain Python on instances written out as strings.

* Position coupling (Cho et al. 2024; ``HanseulJo/position-coupling``
  ``src/data/addition.py`` ``AdditionDatasetWithCoupledPositions`` with
  ``src/tokenization/tokenization.py`` ``tokenize_for_decoder``): end = start + max_len + 1;
  operand digits at range(end − len, end), the token after each operand (``+``, ``=``) at end;
  the answer at range(end − len(answer), end); BOS at 0.
* Abacus (McLeish et al. 2024; ``mcleish7/arithmetic`` ``abacus.py`` ``Abacus.helper``): along
  each run of digit tokens 1, 2, 3, …, 0 elsewhere, on numbers written least significant first.
"""

from __future__ import annotations

import json

import pytest
import torch

from helpers import compose_train, run_train
from lengen.data.layout import format_batch
from lengen.data.tasks import Addition, AdditionReversed

pytestmark = pytest.mark.usefixtures("single_thread")

#: every width combination: equal operands (odd n), a shorter second operand (even n), n = 1, 2
LENGTHS = (1, 2, 3, 4, 5, 6, 9, 12)


def instance(task: Addition, length: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """One instance as symbol names -> (inputs, answer)."""
    generator = torch.Generator().manual_seed(seed)
    inputs = task.sample_inputs(length, 1, generator)
    answer = task.solve(inputs)
    return [task.vocab[s] for s in inputs[0]], [task.vocab[s] for s in answer[0]]


def positions_of(task: Addition, length: int, model_kind: str = "decoder") -> list[int]:
    generator = torch.Generator().manual_seed(0)
    inputs = task.sample_inputs(length, 2, generator)
    batch = task.format(inputs, task.solve(inputs), model_kind)
    return batch["inputs"]["positions"].tolist()


# -- re-derivations --------------------------------------------------------------------------
def reference_coupled(inputs: list[str], answer: list[str], reversed_: bool) -> list[int]:
    """The reference's decoder position IDs (start 1), fed as lengen feeds a decoder: BOS,
    a, +, b, =, the answer but its last token."""
    plus = inputs.index("+")
    a, b = inputs[:plus], inputs[plus + 1 :]
    start = 1
    max_len = max(len(a), len(b))
    end = start + max_len + 1
    a_pos = list(range(end - len(a), end))  # most significant first
    b_pos = list(range(end - len(b), end))
    answer_pos = list(range(end - len(answer), end))
    if reversed_:  # lengen writes every number least significant first: positions follow
        a_pos, b_pos, answer_pos = a_pos[::-1], b_pos[::-1], answer_pos[::-1]
    sequence = [0, *a_pos, end, *b_pos, end, *answer_pos]
    return sequence[:-1]


def reference_abacus_runs(tokens: list[str]) -> list[int]:
    """``Abacus.helper``: 1, 2, … along each run of digits, 0 for other tokens."""
    positions, run = [], 0
    for token in tokens:
        run = run + 1 if token.isdigit() else 0
        positions.append(run)
    return positions


def paper_abacus(inputs: list[str], answer: list[str], reversed_: bool) -> list[int]:
    """The paper's definition: a digit's position is 1 + its significance, 0 for others."""

    def number(digits: list[str]) -> list[int]:
        significance = range(len(digits)) if reversed_ else range(len(digits) - 1, -1, -1)
        return [1 + s for s in significance]

    plus = inputs.index("+")
    sequence = [0, *number(inputs[:plus]), 0, *number(inputs[plus + 1 :]), 0, *number(answer)]
    return sequence[:-1]


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("task_class", [Addition, AdditionReversed])
def test_coupled_positions_equal_the_reference(task_class, length):
    task = task_class(positions="coupled")
    inputs, answer = instance(task, length)
    expected = reference_coupled(inputs, answer, task.reversed)
    assert positions_of(task, length) == expected


@pytest.mark.parametrize("length", LENGTHS)
def test_abacus_positions_equal_the_reference_on_reversed_numbers(length):
    task = AdditionReversed(positions="abacus")
    inputs, answer = instance(task, length)
    tokens = ["BOS", *inputs, "=", *answer][:-1]
    assert positions_of(task, length) == reference_abacus_runs(tokens)


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("task_class", [Addition, AdditionReversed])
def test_abacus_positions_equal_the_papers_definition(task_class, length):
    task = task_class(positions="abacus")
    inputs, answer = instance(task, length)
    assert positions_of(task, length) == paper_abacus(inputs, answer, task.reversed)


# -- small examples written out by hand ------------------------------------------------------
HAND = {
    # 1 2 + 3 4 = 0 4 6: BOS, a, +, b, SEP, answer but its last digit
    ("addition", "coupled", 5): [0, 2, 3, 4, 2, 3, 4, 1, 2],
    # 1 2 3 + 4 5 = 0 1 6 8: the shorter operand's digits align with the longer's last ones
    ("addition", "coupled", 6): [0, 2, 3, 4, 5, 3, 4, 5, 1, 2, 3],
    # 2 1 + 4 3 = 6 4 0, least significant first
    ("addition_reversed", "coupled", 5): [0, 3, 2, 4, 3, 2, 4, 3, 2],
    ("addition_reversed", "abacus", 5): [0, 1, 2, 0, 1, 2, 0, 1, 2],
    ("addition", "abacus", 5): [0, 2, 1, 0, 2, 1, 0, 3, 2],
}
CLASSES = {"addition": Addition, "addition_reversed": AdditionReversed}


@pytest.mark.parametrize(("name", "scheme", "length"), list(HAND))
def test_positions_of_a_small_example(name, scheme, length):
    task = CLASSES[name](positions=scheme)
    assert positions_of(task, length) == HAND[(name, scheme, length)]


def test_encoder_positions_put_the_answer_at_its_slots():
    # 1 2 + 3 4 SEP SLOT SLOT SLOT: the slots carry the answer's positions, all three
    assert positions_of(Addition(positions="coupled"), 5, "encoder") == [2, 3, 4, 2, 3, 4, 1, 2, 3]


# -- properties ------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [5, 8, 13])
@pytest.mark.parametrize("task_class", [Addition, AdditionReversed])
def test_digits_of_equal_significance_share_a_coupled_position(task_class, length):
    task = task_class(positions="coupled")
    positions = positions_of(task, length, "encoder")  # every answer digit is in the sequence
    w1, w2 = task.widths(length)
    m = task.answer_length(length)
    first, second = positions[:w1], positions[w1 + 1 : w1 + 1 + w2]
    answer = positions[length + 1 :]
    if not task.reversed:  # index by significance
        first, second, answer = first[::-1], second[::-1], answer[::-1]
    assert len(answer) == m
    for significance in range(m):
        shared = {answer[significance]}
        if significance < w1:
            shared.add(first[significance])
        if significance < w2:
            shared.add(second[significance])
        assert len(shared) == 1


@pytest.mark.parametrize("scheme", ["coupled", "abacus"])
@pytest.mark.parametrize("model_kind", ["decoder", "encoder"])
@pytest.mark.parametrize("length", LENGTHS)
def test_extent_is_the_largest_position_plus_one(scheme, model_kind, length):
    task = AdditionReversed(positions=scheme)
    width, tokens = task.extent(length, model_kind)
    positions = positions_of(task, length, model_kind)
    assert width == max(positions) + 1
    assert tokens == len(positions)


@pytest.mark.parametrize("model_kind", ["decoder", "encoder", "encoder_decoder"])
def test_index_batches_are_todays_batches(model_kind):
    task = Addition()
    generator = torch.Generator().manual_seed(0)
    inputs = task.sample_inputs(7, 4, generator)
    answers = task.solve(inputs)
    batch = task.format(inputs, answers, model_kind)
    expected = format_batch(inputs, answers, model_kind)
    assert batch["inputs"].keys() == expected["inputs"].keys()  # no positions
    for key, value in expected["inputs"].items():
        assert torch.equal(batch["inputs"][key], value)
    assert torch.equal(batch["targets"], expected["targets"])


def test_positions_are_shared_by_the_batch():
    task = Addition(positions="coupled")
    generator = torch.Generator().manual_seed(0)
    inputs = task.sample_inputs(7, 4, generator)
    positions = task.format(inputs, task.solve(inputs), "decoder")["inputs"]["positions"]
    assert positions.shape == (7 + 4 + 1,)  # (T,): one row for the batch


def test_an_unknown_scheme_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="data.task.positions") as caught:
        Addition(positions="relative")
    assert "\n" not in str(caught.value)


def test_encoder_decoder_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="data.task.positions=coupled") as caught:
        Addition(positions="coupled").extent(5, "encoder_decoder")
    assert "\n" not in str(caught.value)


# -- from the command line -------------------------------------------------------------------
RUNS = {
    "coupled-learned-decoder": ("data.task.positions=coupled", "pe=learned", "pe.start_offset=8"),
    "coupled-rope-encoder": ("data.task.positions=coupled", "pe=rope", "model=encoder"),
    "abacus-learned-decoder": ("data.task.positions=abacus", "pe=learned", "pe.start_offset=99"),
    "abacus-fire-decoder": ("data.task.positions=abacus", "pe=abacus", "pe.base=fire"),
    "abacus-alibi-encoder": (
        "data.task.positions=abacus",
        "pe=abacus",
        "pe.base=alibi",
        "pe.start_offset=99",
        "model=encoder",
    ),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_a_short_run_trains_and_evaluates(name, tmp_path, single_thread):
    # in-process (a subprocess costs a torch import each); the command line: the test below
    from lengen.train import run

    cfg = compose_train("data=addition_reversed", *RUNS[name], "eval.diagnostics=false")
    run(cfg, run_dir=tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["task"] == "addition_reversed"
    assert all(row["exact_match"] is not None for row in results["eval"])


def test_a_short_run_from_the_command_line(tmp_path):
    done = run_train(
        "data=addition_reversed",
        *RUNS["coupled-learned-decoder"],
        "debug=fast",
        "eval.diagnostics=false",
        "model.n_layers=1",
        "model.d_model=16",
        "eval.plot_dpi=20",  # the run's command line is tested, not its figures
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "results.json").read_text())["task"] == "addition_reversed"


def test_a_refusal_from_the_command_line_is_one_line_and_exit_2(tmp_path):
    done = run_train(
        "data=addition_reversed",
        "data.task.positions=coupled",
        "pe=nope",
        "debug=fast",
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 2
    assert "data.task.positions" in done.stderr
    assert "Traceback" not in done.stderr

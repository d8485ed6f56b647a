"""Tasks and their formatting: determinism, lengths, disjointness, layouts per model kind."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lengen.config import CONFIG_DIR
from lengen.data.task_data import (
    BOS,
    IGNORE,
    MODEL_KINDS,
    N_SPECIAL,
    SEP,
    SLOT,
    TaskData,
    format_batch,
    held_out,
    max_position,
    sequence_length,
)
from lengen.data.tasks import Copy, Reverse


def make(kind="decoder", task=None, **kwargs):
    return TaskData(task=task or Copy(), len=kwargs.pop("len", 8), model_kind=kind, **kwargs)


@pytest.mark.parametrize("task", [Copy(), Reverse()], ids=["copy", "reverse"])
def test_solver_matches_python_reference(task):
    inputs = torch.randint(0, 16, (32, 11), generator=torch.Generator().manual_seed(0))
    expected = [row if task.name == "copy" else row[::-1] for row in inputs.tolist()]
    assert task.solve(inputs).tolist() == expected


def test_train_batch_is_pure_function_of_seed_and_step():
    a, b = make(seed=3), make(seed=3)
    for step in (0, 1, 57):
        torch.testing.assert_close(a.train_batch(step), b.train_batch(step))


def test_different_seeds_give_different_batches():
    first = make(seed=0).train_batch(5)["inputs"]["tokens"]
    second = make(seed=1).train_batch(5)["inputs"]["tokens"]
    assert first.shape != second.shape or not torch.equal(first, second)


def test_training_lengths_cover_min_to_len():
    data = make(len=6, min_len=2)
    lengths = {data.train_length(step) for step in range(300)}
    assert lengths == set(range(2, 7))


def test_training_never_contains_held_out_instances():
    data = make(len=12, batch_size=256)
    for step in range(40):
        length = data.train_length(step)
        tokens = data.train_batch(step)["inputs"]["tokens"]
        inputs = tokens[:, 1 : 1 + length] - N_SPECIAL
        assert not held_out(inputs).any()


def test_held_out_fraction_is_about_one_in_sixteen():
    inputs = torch.randint(0, 16, (20000, 10), generator=torch.Generator().manual_seed(1))
    assert abs(held_out(inputs).float().mean().item() - 1 / 16) < 0.01


@pytest.mark.parametrize("length", [3, 16, 100])
def test_eval_instances_have_the_exact_length_and_count(length):
    data = make(len=8)
    inputs = data.held_out_inputs(length, 50, seed=1234)
    assert inputs.shape == (50, length)
    assert held_out(inputs).all()


def test_a_length_with_fewer_held_out_strings_gives_all_of_them():
    # length 1 of the default alphabet: one string of the 16 is held out; distinct instances
    data = make(len=8)
    inputs = data.held_out_inputs(1, 50, seed=1234)
    every = torch.arange(data.task.n_symbols)[:, None]  # (V, 1): every string of length 1
    assert sorted(inputs.flatten().tolist()) == every[held_out(every)].flatten().tolist()


def test_eval_instances_identical_across_kinds_and_training_seeds():
    reference = make("decoder", seed=0).held_out_inputs(20, 64, seed=1234)
    for kind in MODEL_KINDS:
        for seed in (0, 7):
            torch.testing.assert_close(
                make(kind, seed=seed).held_out_inputs(20, 64, 1234), reference
            )


def test_eval_batches_sum_to_samples():
    batches = list(make().eval_batches(24, samples=100, batch_size=32))
    assert [b["targets"].shape[0] for b in batches] == [32, 32, 32, 4]


def test_decoder_layout_scores_only_the_answer():
    inputs, answers = torch.tensor([[5, 6, 7]]), torch.tensor([[7, 6, 5]])
    batch = format_batch(inputs, answers, "decoder")
    s = N_SPECIAL
    assert batch["inputs"]["tokens"].tolist() == [[BOS, 5 + s, 6 + s, 7 + s, SEP, 7 + s, 6 + s]]
    assert batch["targets"].tolist() == [[IGNORE] * 4 + [7 + s, 6 + s, 5 + s]]


def test_encoder_layout_reads_answer_slots():
    batch = format_batch(torch.tensor([[5, 6]]), torch.tensor([[6, 5]]), "encoder")
    s = N_SPECIAL
    assert batch["inputs"]["tokens"].tolist() == [[5 + s, 6 + s, SEP, SLOT, SLOT]]
    assert batch["targets"].tolist() == [[IGNORE, IGNORE, IGNORE, 6 + s, 5 + s]]


def test_encoder_decoder_layout_shifts_the_target():
    batch = format_batch(torch.tensor([[5, 6]]), torch.tensor([[6, 5]]), "encoder_decoder")
    s = N_SPECIAL
    assert batch["inputs"]["src"].tolist() == [[5 + s, 6 + s]]
    assert batch["inputs"]["tgt"].tolist() == [[BOS, 6 + s]]
    assert batch["targets"].tolist() == [[6 + s, 5 + s]]


@pytest.mark.parametrize(
    ("kind", "expected"), [("decoder", 257), ("encoder", 257), ("encoder_decoder", 128)]
)
def test_max_position_per_kind(kind, expected):
    assert make(kind).max_position(128) == expected


def task_yamls() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.joinpath("data").glob("*.yaml") if p.stem != "text")


@pytest.mark.parametrize("name", task_yamls())
def test_extent_is_what_format_lays_out(name):
    """Sizes computed without a batch (``Task.extent``, no torch) equal the formatted batch's,
    for every task, model kind and a few lengths."""
    task = instantiate(OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml").task)
    for kind in task.model_kinds or MODEL_KINDS:
        for length in (task.min_length, task.min_length + task.length_step, 4 * task.min_length):
            inputs = torch.zeros(2, task.input_length(length), dtype=torch.long)
            answers = torch.zeros(2, task.answer_length(length), dtype=torch.long)
            batch = task.format(inputs, answers, kind)
            expected = (max_position(batch), sequence_length(batch))
            assert task.extent(length, kind) == expected, (kind, length)


def test_bad_lengths_are_named():
    with pytest.raises(ValueError, match=r"^data\.len"):
        make(len=0)
    with pytest.raises(ValueError, match=r"^data\.min_len"):
        make(len=4, min_len=5)

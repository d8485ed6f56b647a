"""RULER's needle tasks, variable tracking and indirect indexing: the properties the glob-driven
tests (tests/data/test_tasks.py: reference solvers, lengths, determinism, every model kind)
do not see — where needles sit, distractors, chains, sources and offsets, depth, refusals."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from lengen.data.tasks import IndirectIndexing, MultiKeyNeedle, MultiValueNeedle, VariableTracking
from lengen.data.tasks.ruler import N_FILLERS, distinct_values


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny tensors everywhere in this file."""


def rows(task, length: int, batch_size: int = 256, seed: int = 0) -> list[list[str]]:
    inputs = task.sample_inputs(length, batch_size, torch.Generator().manual_seed(seed))
    return [[task.vocab[i] for i in row] for row in inputs.tolist()]


def keys_at(symbols: list[str]) -> list[int]:
    return [i for i, s in enumerate(symbols) if s.startswith("k")]


# -- needles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", [MultiKeyNeedle(), MultiValueNeedle(n_needles=3, digits=3)])
def test_needles_are_whole_and_the_rest_is_positional_filler(task):
    for symbols in rows(task, 40):
        starts = keys_at(symbols[:-1])
        assert len(starts) == task.n_needles
        covered = {i for at in starts for i in range(at, at + 1 + task.digits)}
        assert len(covered) == task.n_needles * (1 + task.digits)  # no overlap, none cut off
        assert all(
            symbols[i].isdigit() for at in starts for i in range(at + 1, at + 1 + task.digits)
        )
        filler = [i for i in range(len(symbols) - 1) if i not in covered]
        assert all(symbols[i] == f"f{i % N_FILLERS}" for i in filler)


def test_multikey_distractor_keys_differ_from_the_queried_key():
    task = MultiKeyNeedle(n_needles=6, n_keys=6)  # every key used: repeats would be likely
    for symbols in rows(task, 40):
        keys = [symbols[i] for i in keys_at(symbols[:-1])]
        assert len(set(keys)) == 6
        assert keys.count(symbols[-1]) == 1


def test_multikey_queries_every_needle_slot():
    task = MultiKeyNeedle()
    slots = Counter()
    for symbols in rows(task, 32, batch_size=800):
        keys = [symbols[i] for i in keys_at(symbols[:-1])]
        slots[keys.index(symbols[-1])] += 1
    assert sorted(slots) == [0, 1, 2, 3] and min(slots.values()) > 150  # ~200 each


def test_multivalue_needles_share_the_queried_key():
    task = MultiValueNeedle()
    for symbols in rows(task, 32):
        assert {symbols[i] for i in keys_at(symbols[:-1])} == {symbols[-1]}


def test_multikey_depth_spans_the_haystack_uniformly():
    task = MultiKeyNeedle()
    inputs = task.sample_inputs(48, 2000, torch.Generator().manual_seed(3))
    depth = task.depth(inputs)
    assert depth.min() == 0 and depth.max() == 1
    assert (depth < 0.2).float().mean() > 0.1 and (depth > 0.8).float().mean() > 0.1


def test_multikey_depth_is_the_queried_needles_relative_start():
    task = MultiKeyNeedle()
    inputs = task.sample_inputs(32, 64, torch.Generator().manual_seed(4))
    for row, depth in zip(inputs.tolist(), task.depth(inputs).tolist(), strict=True):
        assert depth == row[:-1].index(row[-1]) / (31 - 1 - task.digits)


def test_multivalue_depth_is_the_first_needles_relative_start():
    task = MultiValueNeedle()
    inputs = task.sample_inputs(32, 64, torch.Generator().manual_seed(5))
    latest = 31 - task.n_needles * (1 + task.digits)
    for row, depth in zip(inputs.tolist(), task.depth(inputs).tolist(), strict=True):
        assert depth == row.index(row[-1]) / latest


def test_multivalue_depth_reaches_both_ends_where_all_needles_can_sit_there():
    # the first of 4 needles is the earliest of 4 uniform places: depth 1 only when all four
    # sit at the end, so a haystack with one free symbol shows both ends
    task = MultiValueNeedle()
    depth = task.depth(task.sample_inputs(14, 200, torch.Generator().manual_seed(9)))
    assert set(depth.tolist()) == {0.0, 1.0}


# -- variable tracking -----------------------------------------------------------------------


def statements(symbols: list[str], digits: int) -> list[tuple[str, list[str]]]:
    """(assigned variable, what it reads: a variable or the value's symbols), in input order."""
    body = symbols[:-digits]
    found = []
    for i, symbol in enumerate(body):
        if symbol == "=":
            width = 1 if body[i + 1].startswith("x") else digits
            found.append((body[i - 1], body[i + 1 : i + 1 + width]))
    return found


def test_every_variable_is_assigned_once_and_read_after_its_assignment():
    task = VariableTracking(chains=3, hops=3)
    for symbols in rows(task, 60):
        found = statements(symbols, task.digits)
        assigned = [target for target, _ in found]
        assert len(assigned) == len(set(assigned)) == 3 * 4
        for k, (_, read) in enumerate(found):
            if read[0].startswith("x"):  # a copy reads a variable assigned before it
                assert read[0] in assigned[:k]


def test_chains_are_hops_long_and_only_the_queried_one_holds_the_value():
    task = VariableTracking(chains=3, hops=2, n_values=2, digits=2)  # 4 values for 3 chains
    for symbols in rows(task, 40):
        found = statements(symbols, task.digits)
        values = [read for _, read in found if not read[0].startswith("x")]
        assert len(values) == 3 and len({tuple(v) for v in values}) == 3  # distinct values
        assert values.count(symbols[-task.digits :]) == 1
        copies = [read[0] for _, read in found if read[0].startswith("x")]
        assert sorted(Counter(copies).values()) == [1] * 6  # each link read once: chains


@pytest.mark.parametrize(
    ("count", "n_values", "digits"), [(10, 10, 1), (3, 2, 11)], ids=["whole-space", "redrawn"]
)
def test_chain_values_are_distinct_even_when_they_fill_the_value_space(count, n_values, digits):
    values = distinct_values(500, count, n_values, digits, torch.Generator().manual_seed(10))
    assert values.shape == (500, count, digits) and values.max() < n_values
    assert all(len({tuple(v) for v in row}) == count for row in values.tolist())


def test_variable_tracking_answer_starts_at_the_value_and_follows_the_copies():
    task = VariableTracking(chains=2, hops=4, n_vars=10)
    inputs = task.sample_inputs(48, 128, torch.Generator().manual_seed(6))
    for row, answer in zip(inputs.tolist(), task.solve(inputs).tolist(), strict=True):
        symbols = [task.vocab[i] for i in row]
        reads = dict(statements(symbols, task.digits))
        names = [task.vocab[i] for i in answer]
        assert reads[names[0]] == symbols[-task.digits :]
        assert all(reads[b] == [a] for a, b in zip(names, names[1:], strict=False))


def test_variable_tracking_depth_is_the_value_statements_relative_start():
    task = VariableTracking()
    inputs = task.sample_inputs(40, 64, torch.Generator().manual_seed(7))
    latest = 40 - task.digits - task.chain_width
    for row, depth in zip(inputs.tolist(), task.depth(inputs).tolist(), strict=True):
        symbols = [task.vocab[i] for i in row]
        body, query = symbols[: -task.digits], symbols[-task.digits :]
        start = next(i - 1 for i, s in enumerate(body) if s == "=" and body[i + 1 : i + 3] == query)
        assert depth == start / latest


# -- indirect indexing -----------------------------------------------------------------------


def test_the_source_occurs_once_and_the_target_lies_in_the_list():
    task = IndirectIndexing(n_symbols=3, max_offset=5)  # 3 symbols: repeats everywhere else
    for symbols in rows(task, 9):
        items, source, offset = symbols[:-2], symbols[-2], int(symbols[-1])
        assert items.count(source) == 1
        assert 1 <= abs(offset) <= 5 and 0 <= items.index(source) + offset < len(items)


def test_every_offset_occurs_where_the_list_allows_it():
    task = IndirectIndexing(max_offset=4)
    long = Counter(int(s[-1]) for s in rows(task, 20, batch_size=800))
    assert sorted(long) == [-4, -3, -2, -1, 1, 2, 3, 4]
    short = Counter(int(s[-1]) for s in rows(task, 4, batch_size=200))  # a list of 2
    assert sorted(short) == [-1, 1]


def test_indirect_indexing_depth_is_the_targets_relative_position():
    task = IndirectIndexing()
    inputs = task.sample_inputs(12, 2000, torch.Generator().manual_seed(8))
    depth = task.depth(inputs)
    for row, value in zip(inputs[:64].tolist(), depth[:64].tolist(), strict=True):
        symbols = [task.vocab[i] for i in row]
        items = symbols[:-2]
        assert value == (items.index(symbols[-2]) + int(symbols[-1])) / 9
    assert depth.min() == 0 and depth.max() == 1


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: MultiKeyNeedle(n_needles=5, n_keys=4),
            r"^data\.task\.n_keys must be >= 5 \(a distinct key per needle\), got 4$",
        ),
        (
            lambda: VariableTracking(chains=2, hops=4, n_vars=9),
            r"^data\.task\.n_vars must be >= 10 \(distinct variables",
        ),
        (
            lambda: VariableTracking(chains=3, n_values=2, digits=1),
            r"^data\.task\.digits: 3 chains need distinct values; n_values \*\* digits = 2 < 3$",
        ),
        (lambda: IndirectIndexing(n_symbols=1), r"^data\.task\.n_symbols must be an integer >= 2"),
        (lambda: MultiValueNeedle(hops=2), r"^data\.task\.hops: .* takes no such key; allowed:"),
    ],
)
def test_options_that_cannot_make_an_instance_are_refused_naming_the_key(build, message):
    with pytest.raises(ValueError, match=message):
        build()

"""The task suite: every generator against an independent slow reference, exact lengths,
determinism, curricula, the data card of every task for every model kind, and short end-to-end
runs (accuracy by depth: tests/evaluation/test_by_depth.py).

Glob-driven: every configs/data/*.yaml whose target is TaskData is covered with no edit here,
provided its task has a reference below or in tests/data/references/<name>.py (a missing one
fails loudly). Grid and volume tasks
(``task.axes`` > 1, length = side) have theirs in tests/data/test_grids.py; they run on
``model=encoder`` only, and the other model kinds are checked to refuse them."""

from __future__ import annotations

import copy
import functools
import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from helpers import CONFIG_DIR, compose_train, load_task, task_data, yaml_choices
from lengen.build import build
from lengen.checks import ConfigError
from lengen.data.curriculum import (
    longest_allowed,
    reverse_exponential_probabilities,
)
from lengen.data.task_data import N_SPECIAL, TaskData, held_out
from lengen.data.tasks import Task
from lengen.evaluation.tasks import score_lengths
from lengen.rundir import RunDirectory
from lengen.train import run

TASK_DATA = "lengen.data.datamodule.TaskData"
TASKS = sorted(
    p.stem for p in (CONFIG_DIR / "data").glob("*.yaml") if OmegaConf.load(p)._target_ == TASK_DATA
)
KINDS = yaml_choices("model")


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny tensors everywhere in this file."""


# -- independent references: Python lists, ints, sorted(), eval, stack machines -------------


def ref_binary(op):
    def solve(symbols, task, n):
        at = symbols.index(task.vocab[task.op])
        a = int("".join(symbols[:at])[::-1] or "0", 2)
        b = int("".join(symbols[at + 1 :])[::-1] or "0", 2)
        bits = list(format(op(a, b), "b")[::-1])
        width = task.answer_length(n)
        return (bits + ["END"] * width)[:width]

    return solve


def ref_addition(symbols, task, n):
    at = symbols.index("+")
    first, second = symbols[:at], symbols[at + 1 :]
    if task.reversed:
        first, second = first[::-1], second[::-1]
    total = int("".join(first) or "0", task.base) + int("".join(second) or "0", task.base)
    digits = []
    for _ in range(task.answer_length(n)):
        total, digit = divmod(total, task.base)
        digits.append(str(digit) if digit < 10 else chr(ord("a") + digit - 10))
    return digits if task.reversed else digits[::-1]


def ref_expression(symbols, task, n):
    text = "".join(s for s in symbols if s != "_")
    return [str(eval(text, {"__builtins__": {}}) % task.modulus)]  # Python's own parser


def ref_stack(symbols, task, n):
    stack = []
    for symbol in symbols:
        if symbol == "POP":
            if stack:
                stack.pop()
        else:
            stack.append(symbol[-1])  # "0", "1", "PUSH0", "PUSH1"
    return (stack[::-1] + ["END"] * (n + 1))[: n + 1]


def ref_missing(symbols, task, n):
    at, half = symbols.index("?"), n // 2
    return [symbols[at - half] if at >= half else symbols[at + half]]


def ref_cycle(symbols, task, n):
    state = 0
    for move in symbols:
        state = (state + {"left": -1, "stay": 0, "right": 1}[move]) % task.cycle_length
    return [f"state{state}"]


def ref_even_pairs(symbols, task, n):
    pairs = sum(1 for i in range(n - 1) if symbols[i] + symbols[i + 1] in ("01", "10"))
    return [str(pairs % 2)]


def ref_recall(symbols, task, n):
    table = {}
    for i in range(0, 2 * ((n - 1) // 2), 2):
        table[symbols[i]] = symbols[i + 1]
    return [table[symbols[-1]]]


def ref_passkey(symbols, task, n):
    at = symbols.index("#")
    return symbols[at + 1 : at + 1 + task.digits]


def ref_needles(symbols):
    """RULER's needles ``key v1 … vD``: (key, value symbols) in input order; keys start "k"."""
    body = symbols[:-1]
    return [(s, i) for i, s in enumerate(body) if s.startswith("k")]


def ref_multikey(symbols, task, n):
    values = {key: symbols[i + 1 : i + 1 + task.digits] for key, i in ref_needles(symbols)}
    return values[symbols[-1]]


def ref_multivalue(symbols, task, n):
    ends = [(i + 1, i + 1 + task.digits) for key, i in ref_needles(symbols) if key == symbols[-1]]
    return [s for start, end in ends for s in symbols[start:end]]


def ref_variable_tracking(symbols, task, n):
    """Run the assignments in order (a dict of values); list who holds the queried value."""
    body, query = symbols[: n - task.digits], symbols[n - task.digits :]
    value, order = {}, []
    for i, symbol in enumerate(body):
        if symbol != "=":
            continue
        target, read = body[i - 1], body[i + 1]
        value[target] = value[read] if read in value else body[i + 1 : i + 1 + task.digits]
        order.append(target)
    return [name for name in order if value[name] == query]


def ref_indirect(symbols, task, n):
    items, source, offset = symbols[:-2], symbols[-2], int(symbols[-1])
    return [items[items.index(source) + offset]]


# tagged tasks (answer t at input token t): None where a position is not scored


def ref_permutations(symbols, task, n):
    state, out = tuple(range(5)), []
    for name in symbols:  # one-line notation: name[i] is the image of i
        state = tuple(int(name[state[i]]) for i in range(5))  # state first, then the element
        out.append("".join(map(str, state)))
    return out


def ref_flip_flop(symbols, task, n):
    memory, out = None, []
    for op, bit in zip(symbols[0::2], symbols[1::2], strict=True):
        memory = bit if op == "w" else memory
        out += [memory if op == "r" else None, None]  # read: tagged at the r
    return out


def ref_mqar(symbols, task, n):
    pairs = int(task.cfg.kv_fraction * n / 2)
    bound = dict(zip(symbols[0 : 2 * pairs : 2], symbols[1 : 2 * pairs : 2], strict=True))
    return [None] * (2 * pairs) + [bound.get(symbol) for symbol in symbols[2 * pairs :]]


REFERENCES = {
    "copy": lambda s, t, n: list(s),
    "reverse": lambda s, t, n: s[::-1],
    "duplicate": lambda s, t, n: s + s,
    "sort": lambda s, t, n: sorted(s, key=int),
    "bucket_sort": lambda s, t, n: sorted(s, key=int),
    "odds_first": lambda s, t, n: [s[i] for i in range(0, n, 2)] + [s[i] for i in range(1, n, 2)],
    "missing_duplicate": ref_missing,
    "addition": ref_addition,
    "addition_reversed": ref_addition,
    "binary_addition": ref_binary(lambda a, b: a + b),
    "binary_multiplication": ref_binary(lambda a, b: a * b),
    "modular_arithmetic": ref_expression,
    "modular_arithmetic_brackets": ref_expression,
    "compute_sqrt": lambda s, t, n: list(
        format(math.isqrt(int("".join(s), 2)), "b").zfill(-(-n // 2))
    ),
    "counting": lambda s, t, n: list(str(s.count("b")).zfill(len(str(n)))),
    "parity": lambda s, t, n: [str(s.count("1") % 2)],
    "even_pairs": ref_even_pairs,
    "cycle_navigation": ref_cycle,
    "stack_manipulation": ref_stack,
    "associative_recall": ref_recall,
    "passkey": ref_passkey,
    "s5": ref_permutations,
    "a5": ref_permutations,
    "flip_flop": ref_flip_flop,
    "mqar": ref_mqar,
    "niah_multikey": ref_multikey,
    "niah_multivalue": ref_multivalue,
    "variable_tracking": ref_variable_tracking,
    "indirect_indexing": ref_indirect,
}


def added_references(folder: Path = Path(__file__).parent / "references") -> dict:
    """References of tasks added since, one file each, so a new task brings its own with no
    edit here: ``tests/data/references/<name>.py`` defines ``reference(symbols, task, n)``
    (docs/tasks.md "Adding a task")."""
    import importlib.util

    found = {}
    for path in sorted(folder.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"task_reference_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found[path.stem] = module.reference
    return found


REFERENCES.update(added_references())


def lengths_for(task) -> list[int]:
    """Shortest instances, small odd and even lengths, and 71 (past compute_sqrt's 60-bit
    int64 shortcut, into its digit-by-digit loop); grids: small sides in whole patches."""
    if task.axes > 1:
        step = task.length_step
        sides = {task.min_length, task.min_length + step, 3 * step, 5 * step, 8 * step}
        return sorted(side for side in sides if side >= task.min_length)
    lengths = {task.min_length, task.min_length + 1, 5, 8, 13, 32, 71} - set(range(task.min_length))
    return sorted(n for n in lengths if n % task.length_step == 0)  # flip_flop: even


def allowed_kind(name: str) -> str:
    """The model kind the task's tests build it for: decoder, or the first its task allows."""
    kinds = load_task(name).model_kinds
    return "decoder" if kinds is None else kinds[0]


def data_of(name: str, **overrides) -> TaskData:
    """``task_data`` for a model kind the task runs on (grid tasks: encoder)."""
    return task_data(name, **{"model_kind": allowed_kind(name), **overrides})


def test_every_task_has_an_independent_reference():
    """Sequence tasks' references are here, grid tasks' in tests/data/test_grids.py."""
    assert sorted(REFERENCES) == [name for name in TASKS if load_task(name).axes == 1]


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_solver_matches_independent_reference(name):
    task = load_task(name)
    reference = REFERENCES[name]
    generator = torch.Generator().manual_seed(0)
    for length in lengths_for(task):
        inputs = task.sample_inputs(length, 48, generator)
        answers = task.solve(inputs)
        for row, answer in zip(inputs.tolist(), answers.tolist(), strict=True):
            symbols = [task.vocab[i] for i in row]
            names = [task.vocab[i] if i >= 0 else None for i in answer]  # tagged: −1 unscored
            assert names == reference(symbols, task, length), symbols


@pytest.mark.parametrize("name", TASKS)
def test_lengths_and_symbols_are_as_declared(name):
    task = load_task(name)
    generator = torch.Generator().manual_seed(1)
    for length in lengths_for(task):
        inputs = task.sample_inputs(length, 16, generator)
        answers = task.solve(inputs)
        assert inputs.shape == (16, task.input_length(length))
        assert answers.shape == (16, task.answer_length(length))
        assert inputs.min() >= 0 and inputs.max() < task.n_symbols
        scored = answers[answers >= 0] if task.tagged else answers  # tagged: −1 unscored
        assert set(scored.unique().tolist()) <= set(task.answer_symbols)


@pytest.mark.parametrize("name", TASKS)
def test_chance_accuracy_is_one_over_the_answer_alphabet(name):
    task = load_task(name)
    assert task.chance_accuracy == pytest.approx(1 / len(set(task.answer_symbols)))
    assert 0 < task.chance_accuracy <= 0.5


@pytest.mark.parametrize("name", TASKS)
def test_training_batches_are_deterministic_and_seeded(name):
    first, again, other = data_of(name, seed=3), data_of(name, seed=3), data_of(name, seed=4)
    torch.testing.assert_close(first.train_batch(7), again.train_batch(7))
    a, b = first.train_batch(7)["inputs"]["tokens"], other.train_batch(7)["inputs"]["tokens"]
    assert a.shape != b.shape or not torch.equal(a, b)


@pytest.mark.parametrize("name", TASKS)
def test_training_inputs_have_the_requested_length_and_are_not_held_out(name):
    data = data_of(name, curriculum="fixed")
    tokens = data.train_batch(0)["inputs"]["tokens"]
    width = data.task.input_length(data.train_len)
    if data.model_kind == "decoder":  # BOS x SEP y
        inputs = tokens[:, 1 : 1 + width] - N_SPECIAL
        answer = 0 if data.task.tagged else data.task.answer_length(data.train_len)  # BOS x
        assert tokens.shape[1] == width + 1 + answer
    else:  # grid tasks on the encoder: the cells first (then the readout slot, if any)
        inputs = tokens[:, :width] - N_SPECIAL
    assert tokens.shape[1] == data.sequence_length(data.train_len)
    assert not held_out(inputs).any()


@pytest.mark.parametrize("name", TASKS)
def test_evaluation_inputs_have_the_exact_length_and_are_held_out(name):
    data = data_of(name)
    for length in (data.train_len, 2 * data.train_len):
        inputs = data.held_out_inputs(length, 32, seed=1234)
        assert inputs.shape == (32, data.task.input_length(length))
        assert held_out(inputs).all()


def test_length_below_a_tasks_shortest_instance_is_named():
    with pytest.raises(ValueError, match=r"^data\.min_len must be >= 6 for task passkey"):
        TaskData(task=load_task("passkey"), len=16, min_len=3)
    with pytest.raises(ValueError, match=r"^eval\.lengths: task passkey has no instance"):
        task_data("passkey").held_out_inputs(4, 8, seed=0)


class OneString(Task):
    """A task with a single string per length: the first one (lexicographically) over 16
    symbols that is, or is not, held out."""

    name = "one_string"

    def __init__(self, length: int, reserved: bool):
        self.vocab = [str(i) for i in range(16)]
        self.answer_symbols = list(range(16))
        strings = torch.cartesian_prod(*[torch.arange(16)] * length).reshape(-1, length)
        self.string = strings[held_out(strings) == reserved][0]

    def sample_inputs(self, length, batch_size, generator):
        return self.string.repeat(batch_size, 1)

    def solve(self, inputs):
        return inputs.clone()


def test_no_held_out_string_at_a_length_names_the_key():
    data = TaskData(task=OneString(2, reserved=False), len=2, min_len=2, val_samples=8)
    with pytest.raises(ValueError, match=r"^data\.len: cannot draw 8 held-out instances"):
        data.val_batches()


def test_lengths_whose_strings_are_all_held_out_are_refused_by_check_sampling():
    data = TaskData(task=OneString(2, reserved=True), len=2, min_len=2)  # no draw yet: no torch
    with pytest.raises(ValueError, match=r"^data\.min_len=2: no training instance of length 2"):
        data.check_sampling()


# -- curricula ------------------------------------------------------------------------------


def lengths_drawn(curriculum: str, steps: int = 400, **kwargs) -> list[int]:
    data = task_data("copy", len=12, min_len=3, curriculum=curriculum, **kwargs)
    return [data.train_length(step) for step in range(steps)]


@pytest.mark.parametrize(
    "curriculum", ["uniform", "fixed", "regular_increase", "reverse_exponential"]
)
def test_curriculum_lengths_stay_in_range_and_are_deterministic(curriculum):
    drawn = lengths_drawn(curriculum, max_steps=400)
    assert min(drawn) >= 3 and max(drawn) <= 12
    assert drawn == lengths_drawn(curriculum, max_steps=400)


def test_uniform_curriculum_is_the_historical_draw():
    # the draw every run made before curricula existed (keeps old runs' data identical)
    from lengen.data.source import mix_seed

    expected = [
        int(torch.randint(3, 13, (1,), generator=torch.Generator().manual_seed(mix_seed(0, s, 0))))
        for s in range(50)
    ]
    assert lengths_drawn("uniform", steps=50) == expected


def test_fixed_curriculum_always_trains_at_len():
    assert set(lengths_drawn("fixed")) == {12}


def test_regular_increase_maximum_grows_linearly_to_len():
    maxima = [longest_allowed(step, 3, 12, 400) for step in range(400)]
    assert maxima[0] == 3 and maxima[-1] == 12
    assert all(b - a in (0, 1) for a, b in zip(maxima, maxima[1:], strict=False))
    assert maxima.count(3) == maxima.count(12) == 40  # 10 levels, 40 steps each
    drawn = lengths_drawn("regular_increase", max_steps=400)
    assert all(length <= top for length, top in zip(drawn, maxima, strict=True))
    assert max(drawn[:40]) == 3 and max(drawn[-40:]) == 12


def test_regular_increase_needs_max_steps():
    with pytest.raises(ValueError, match=r"^data\.curriculum=regular_increase needs"):
        task_data("copy", curriculum="regular_increase")


def test_reverse_exponential_favours_short_lengths_by_tau():
    probabilities = reverse_exponential_probabilities(3, 12, 0.5)
    torch.testing.assert_close(
        probabilities[1:] / probabilities[:-1], torch.full((9,), 0.5, dtype=torch.float64)
    )
    drawn = lengths_drawn("reverse_exponential", steps=2000, curriculum_tau=0.5)
    share_of_shortest = drawn.count(3) / len(drawn)
    assert abs(share_of_shortest - float(probabilities[0])) < 0.05  # ≈ 0.5


def test_bad_curriculum_is_named():
    with pytest.raises(ValueError, match=r"^data\.curriculum must be one of uniform, fixed"):
        task_data("copy", curriculum="exponential")
    with pytest.raises(ValueError, match=r"^data\.curriculum_tau"):
        task_data("copy", curriculum="reverse_exponential", curriculum_tau=1.5)


# -- data card and passkey depth ------------------------------------------------------------


def test_data_card_describes_lengths_vocabulary_and_seeds():
    data = task_data("binary_addition", seed=5, eval_seed=77)
    card = data.card([16, 32])
    assert card["train_lengths"] == {"min": 1, "max": 16}
    assert card["eval_lengths"] == [16, 32]
    assert card["answer_length"]["32"] == 33
    assert card["symbols"] == {"4": "0", "5": "1", "6": "+", "7": "END"}
    assert card["vocab_size"] == data.vocab_size == 8
    assert card["chance_accuracy"] == pytest.approx(1 / 3)
    assert (card["seed"], card["eval_seed"], card["curriculum"]["name"]) == (5, 77, "uniform")
    json.dumps(card)  # serialisable


def test_passkey_depth_is_the_keys_relative_position():
    task = load_task("passkey")
    inputs = task.sample_inputs(16, 256, torch.Generator().manual_seed(0))
    position = (inputs == task.marker).long().argmax(1)
    torch.testing.assert_close(task.depth(inputs), position.double() / (16 - task.digits - 1))
    assert task.depth(inputs).min() == 0 and task.depth(inputs).max() == 1


# -- end to end -----------------------------------------------------------------------------

TINY = ("model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "logger=none")


@functools.cache
def _base_cfg(kind: str):
    return compose_train(f"model={kind}", *TINY)


def tiny_cfg(task: str, kind: str):
    """A tiny run of this task (composing once per model kind: Hydra's compose costs ~0.3 s);
    grid tasks at small sides (twice the shortest, and twice that)."""
    cfg = copy.deepcopy(_base_cfg(kind))
    data = OmegaConf.load(CONFIG_DIR / "data" / f"{task}.yaml")
    generator = load_task(task)
    if generator.axes > 1:
        short = 2 * generator.min_length
        lengths = [short, 2 * short]
    else:
        short = max(generator.min_length + 2, 8)
        lengths = [short, short + 4]
    data.merge_with({"len": short, "batch_size": 8, "val_samples": 8})
    with open_dict(cfg):
        cfg.data = data
    cfg.eval.lengths = lengths
    if generator.axes == 3:  # rope (the default pe) splits each head's pairs between 3 axes
        cfg.model.d_model = 48
    return cfg


def refused(task: str, kind: str) -> bool:
    """Grid tasks refuse the model kinds they cannot run on, in one line naming ``model``."""
    allowed = load_task(task).model_kinds
    if allowed is None or kind in allowed:
        return False
    with pytest.raises(ConfigError, match=rf"^model={kind}: task {task} .*allowed: model="):
        build(tiny_cfg(task, kind))
    return True


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task", TASKS)
def test_data_card_names_the_task_kind_lengths_and_chance(task, kind, tmp_path):
    # the card run() writes, from the data source and lengths build() makes, without training
    if refused(task, kind):
        return
    data, _, lengths = build(tiny_cfg(task, kind))
    RunDirectory(tmp_path).write_data_card(data, lengths)
    card = json.loads((tmp_path / "data_card.json").read_text())
    assert card["task"] == task
    assert card["model_kind"] == kind
    assert card["eval_lengths"] == lengths
    assert card["chance_accuracy"] == data.task.chance_accuracy  # what the result rows carry


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task", TASKS)
def test_every_task_is_scored_by_every_model_kind(task, kind):
    # the evaluation a run ends with, on the untrained model: every task's instances fit
    # every model kind's layout (that can run it: grid tasks refuse all but the encoder)
    if refused(task, kind):
        return
    data, model, lengths = build(tiny_cfg(task, kind))
    with torch.no_grad():
        rows = score_lengths(model, data, lengths, samples=8, progress=False)
    assert [row["length"] for row in rows] == lengths
    for row in rows:
        assert 1 <= row["n_examples"] <= 8 and math.isfinite(row["loss"])  # distinct instances
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["exact_match"] <= 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_run_end_to_end_writes_the_data_card(kind, tmp_path):
    # one task trained per model kind (passkey: the one whose run also writes accuracy by
    # depth); the card of every task × kind is checked above without training
    task = "passkey"
    cfg = tiny_cfg(task, kind)
    cfg.eval.plot_dpi = 30  # the figures are drawn (one is checked to exist), at any size
    results = run(cfg, run_dir=tmp_path)
    card = json.loads((tmp_path / "data_card.json").read_text())
    assert card["task"] == results["task"] == task
    assert card["eval_lengths"] == [row["length"] for row in results["eval"]]
    assert [row["chance_accuracy"] for row in results["eval"]] == [card["chance_accuracy"]] * 2
    report = json.loads((tmp_path / "accuracy_by_depth.json").read_text())
    assert report["bins"] == 5 and report["task"] == "passkey"
    assert sorted({row["length"] for row in report["rows"]}) == card["eval_lengths"]
    for length in card["eval_lengths"]:
        counts = [r["n_examples"] for r in report["rows"] if r["length"] == length]
        assert len(counts) == 5 and sum(counts) == results["eval"][0]["n_examples"]
    assert (tmp_path / "accuracy_by_depth.png").stat().st_size > 0


def test_yaml_name_is_the_file_name():
    for task in TASKS:
        assert OmegaConf.load(Path(CONFIG_DIR) / "data" / f"{task}.yaml").name == task

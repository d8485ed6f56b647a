"""Task evaluation (``lengen.evaluation.tasks``): the greedy protocol and the cost of a row.

* Greedy evaluation equals a slow reference (no cache, the full pass recomputed for every
  generated token) token for token, and its rows carry the protocol and the chance level.
* An oracle that solves the task scores exact match 1 under greedy decoding (the prompt and the
  answer are aligned right), and ``eval.decoding=greedy`` runs end to end for every model kind.
* Every row records its cost, and an out-of-memory error halves the batch instead of ending
  the run.

Models are tiny (d_model 16, 2 layers) with weights redrawn at unit gain.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import Tensor, nn

from helpers import TINY, compose_train, tiny_model
from lengen.build import build
from lengen.data.task_data import BOS, PAD, SEP, TaskData
from lengen.data.tasks import Copy
from lengen.evaluation.tasks import greedy_generate
from lengen.evaluation.tasks import score_lengths as evaluate
from lengen.train import run

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")

#: train on lengths ≤ 4, decode at 10: past training
TRAIN_LEN, LENGTH = 4, 10


# -- greedy evaluation against a slow reference ------------------------------------------------
def reference_greedy(model: nn.Module, batch: dict, length: int) -> Tensor:
    """No cache: the full forward pass over the whole (PAD-filled) sequence for every token."""
    answer_length = batch["targets"].shape[1] - (
        length + 1 if model.kind != "encoder_decoder" else 0
    )
    if model.kind == "encoder":
        return model(**batch["inputs"])[:, length + 1 :].argmax(-1)
    if model.kind == "decoder":
        sequence = batch["inputs"]["tokens"].clone()  # BOS x SEP y[:-1]
        first = length + 1  # SEP predicts y1
        sequence[:, first + 1 :] = PAD
        forward = model
    else:
        src = batch["inputs"]["src"]
        sequence = torch.full_like(batch["inputs"]["tgt"], PAD)
        sequence[:, 0] = BOS
        first = 0

        def forward(tgt):
            return model(src, tgt)

    generated = []
    for index in range(answer_length):
        token = forward(sequence)[:, first + index].argmax(-1)
        generated.append(token)
        if first + index + 1 < sequence.shape[1]:
            sequence[:, first + index + 1] = token
    return torch.stack(generated, dim=1)


def copy_data(kind: str, n_symbols: int = 6) -> TaskData:
    return TaskData(task=Copy(n_symbols=n_symbols), len=TRAIN_LEN, model_kind=kind, batch_size=4)


@pytest.mark.parametrize("kind", ["decoder", "encoder", "encoder_decoder"])
@pytest.mark.parametrize("pe", ["rope", "alibi"])
def test_greedy_generation_equals_slow_reference(kind, pe):
    model = tiny_model(pe, kind)
    batch = next(copy_data(kind).eval_batches(LENGTH, 6, 6))
    with torch.no_grad():
        expected = reference_greedy(model, batch, LENGTH)
        got = greedy_generate(model, batch["inputs"], batch["targets"])
    assert got.shape == (6, LENGTH)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_greedy_rows_score_the_reference_generation(kind):
    model, data = tiny_model("rope", kind), copy_data(kind)
    (row,) = evaluate(model, data, [LENGTH], samples=8, protocol="greedy", progress=False)
    batch = next(data.eval_batches(LENGTH, 8, 8))
    answers = batch["targets"][:, -LENGTH:]
    with torch.no_grad():
        correct = reference_greedy(model, batch, LENGTH) == answers
    assert row["accuracy"] == pytest.approx(correct.float().mean().item())
    assert row["exact_match"] == pytest.approx(correct.all(-1).float().mean().item())


def test_greedy_rows_record_protocol_and_chance():
    model, data = tiny_model("rope", "decoder"), copy_data("decoder", n_symbols=5)
    rows = evaluate(model, data, [LENGTH, 3], samples=4, protocol="greedy", progress=False)
    assert [row["length"] for row in rows] == [3, LENGTH]
    assert {row["protocol"] for row in rows} == {"greedy"}
    assert [row["chance_accuracy"] for row in rows] == [pytest.approx(1 / 5)] * 2


def test_greedy_loss_is_the_teacher_forced_loss():
    model, data = tiny_model("rope", "decoder"), copy_data("decoder")
    rows = {
        protocol: evaluate(model, data, [LENGTH], samples=4, protocol=protocol, progress=False)[0]
        for protocol in ("teacher_forced", "greedy")
    }
    assert rows["greedy"]["loss"] == pytest.approx(rows["teacher_forced"]["loss"])


def test_encoder_greedy_rows_equal_teacher_forced_ones():
    model, data = tiny_model("rope", "encoder"), copy_data("encoder")
    rows = [
        evaluate(model, data, [LENGTH], samples=4, protocol=protocol, progress=False)[0]
        for protocol in ("teacher_forced", "greedy")
    ]
    for key in ("loss", "accuracy", "exact_match"):
        assert rows[0][key] == pytest.approx(rows[1][key])


def forward_calls(model: nn.Module) -> list:
    """A list that grows by one at every forward pass of ``model``."""
    calls: list = []
    model.register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize(
    ("kind", "task"), [("encoder", "copy"), ("decoder", "a5"), ("decoder", "flip_flop")]
)
def test_one_pass_answers_reuse_the_teacher_forced_pass(kind, task):
    # an encoder and tagged tasks answer in one pass: greedy must not run it a second time
    cfg = compose_train("pe=rope", f"model={kind}", f"data={task}", "data.len=8", *TINY)
    data, model, _ = build(cfg)
    calls = forward_calls(model)
    evaluate(model, data, [8], samples=4, protocol="greedy", progress=False)
    assert len(calls) == 1  # 4 samples: one batch


# -- an oracle checks that prompt and answer are aligned ---------------------------------------
class CopyOracle(nn.Module):
    """Solves copy from the prompt alone: logits of the answer token at every answer position.

    ``decode`` keeps the fed tokens (its cache is the list of them) and reruns ``forward``.
    """

    def __init__(self, kind: str, vocab: int) -> None:
        super().__init__()
        self.kind, self.vocab = kind, vocab
        self.anchor = nn.Parameter(torch.zeros(()))  # evaluate reads the device from it

    def forward(self, tokens: Tensor | None = None, src: Tensor | None = None, tgt=None):
        if self.kind == "encoder_decoder":  # target index j predicts y_(j+1) = x_(j+1)
            return nn.functional.one_hot(src[:, : tgt.shape[1]], self.vocab).float()
        # decoder: SEP at index n+1 predicts x1 (index 1), index n+1+j predicts x_(j+1)
        sep = int((tokens[0] == SEP).nonzero()[0])
        source = torch.zeros_like(tokens)
        answer_positions = torch.arange(sep, tokens.shape[1])
        source[:, answer_positions] = tokens[:, answer_positions - sep + 1]
        return nn.functional.one_hot(source, self.vocab).float()

    def new_cache(self, total_length: int, src: Tensor | None = None) -> dict:
        return {"fed": [], "src": src}

    def decode(self, tokens: Tensor, cache: dict) -> Tensor:
        cache["fed"].append(tokens)
        fed = torch.cat(cache["fed"], dim=1)
        logits = self(fed) if cache["src"] is None else self(src=cache["src"], tgt=fed)
        return logits[:, -tokens.shape[1] :]


@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_greedy_oracle_scores_exact_match_one(kind):
    data = copy_data(kind)
    (row,) = evaluate(
        CopyOracle(kind, data.vocab_size),
        data,
        [LENGTH],
        samples=8,
        protocol="greedy",
        progress=False,
    )
    assert row["exact_match"] == 1.0 and row["accuracy"] == 1.0


# -- end to end --------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["decoder", "encoder", "encoder_decoder"])
def test_run_with_greedy_decoding_writes_greedy_rows(model, tmp_path):
    cfg = compose_train(
        "eval.decoding=greedy", f"model={model}", "data.len=4", "eval.lengths=[4,8]", *TINY
    )
    results = run(cfg, run_dir=tmp_path)
    written = json.loads((tmp_path / "results.json").read_text())
    assert [row["protocol"] for row in written["eval"]] == ["greedy", "greedy"]
    assert written["eval"] == results["eval"]
    assert all(0.0 <= row["exact_match"] <= row["accuracy"] + 1e-9 for row in written["eval"])


# -- the cost of a row ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def task_model():
    cfg = compose_train("data.len=4", "model.d_model=32", "model.n_layers=1")
    data, model, _ = build(cfg)
    return data, model


class OutOfMemoryAbove(torch.nn.Module):
    """Wraps a model; raises the CPU allocator's error for batches larger than ``limit``."""

    def __init__(self, model, limit):
        super().__init__()
        self.model, self.limit, self.batch_sizes = model, limit, []

    def forward(self, **inputs):
        size = next(iter(inputs.values())).shape[0]
        self.batch_sizes.append(size)
        if size > self.limit:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")
        return self.model(**inputs)


def test_task_rows_record_seconds_memory_and_batch_size(task_model, single_thread):
    data, model = task_model
    rows = evaluate(model, data, [4, 8], samples=16, max_tokens_per_batch=64, progress=False)
    for row in rows:
        assert row["seconds"] > 0 and row["peak_mem_mb"] >= 0
    # the budget of 64 tokens: 64 // 9 positions = 7 at length 4, 64 // 17 = 3 at length 8
    assert [row["batch_size"] for row in rows] == [7, 3]


def test_out_of_memory_halves_the_batch_and_scores_the_same(task_model, single_thread):
    data, model = task_model
    expected = evaluate(model, data, [8], samples=16, max_tokens_per_batch=10**6, progress=False)
    small = OutOfMemoryAbove(model, limit=5)
    rows = evaluate(small, data, [8], samples=16, max_tokens_per_batch=10**6, progress=False)
    assert small.batch_sizes[:3] == [16, 8, 4]  # 16 and 8 fail, 4 runs
    assert rows[0]["batch_size"] == 4
    for key in ("loss", "accuracy", "exact_match", "n_examples"):
        assert rows[0][key] == pytest.approx(expected[0][key], rel=1e-5)


def test_other_errors_are_not_retried(task_model, single_thread):
    data, model = task_model

    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.calls = 0

        def forward(self, **inputs):
            self.calls += 1
            raise RuntimeError("shape mismatch")

    broken = Broken()
    with pytest.raises(RuntimeError, match="shape mismatch"):
        evaluate(broken, data, [8], samples=16, progress=False)
    assert broken.calls == 1

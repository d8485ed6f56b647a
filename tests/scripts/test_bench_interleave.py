"""scripts/bench_interleave.py (bench.py --interleave): one lengen step and one plain step on
the same batch, each step's pair of times kept; its bookkeeping, not its timing (#46)."""

from __future__ import annotations

import importlib.util
import itertools
import json

import pytest
import torch

from helpers import CONFIG_DIR

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = dict(vocab=16, d_model=16, n_layers=1, n_heads=2, d_ff=32, seq=8, batch=2)


@pytest.fixture(scope="module")
def bench():
    path = CONFIG_DIR.parent / "scripts/bench.py"
    spec = importlib.util.spec_from_file_location("bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # puts scripts/ on sys.path: bench_interleave imports
    return module


@pytest.fixture(scope="module")
def interleave(bench):
    import bench_interleave

    return bench_interleave


def paired_run(bench, interleave, warmup: int, steps: int, clock=None):
    """A tiny lengen run with an Interleaver whose plain step records the batches it gets."""
    seen = []
    paired = interleave.Interleaver(
        lambda inputs, targets: seen.append((inputs.clone(), targets.clone())),
        warmup,
        clock or itertools.count().__next__,
    )
    bench.fit_lengen("rope", warmup + steps, [paired], sizes=TINY)
    return paired, seen


def test_each_plain_step_gets_the_batch_of_its_lengen_step(bench, interleave):
    _, seen = paired_run(bench, interleave, 0, 2)
    batches = bench.RandomTokens(TINY).train_batches()
    for (inputs, targets), batch in zip(seen, batches, strict=False):
        torch.testing.assert_close(inputs, batch["inputs"]["tokens"], rtol=0, atol=0)
        torch.testing.assert_close(targets, batch["targets"], rtol=0, atol=0)
    assert len(seen) == 2


def test_lengens_time_is_its_window_less_the_plain_steps_in_it(bench, interleave):
    # a clock that ticks once a reading: step 0's plain step runs after lengen's (ticks 1-2),
    # step 1's before it (ticks 3-4), so step 0's window (0 -> 5) less both plain steps is 3
    paired, _ = paired_run(bench, interleave, 0, 2)
    assert paired.lengen == [3, 1] and paired.plain_times == [1, 1]


def test_warm_up_steps_run_both_but_are_not_kept(bench, interleave):
    paired, seen = paired_run(bench, interleave, 1, 2)
    assert (len(seen), len(paired.lengen), len(paired.plain_times)) == (3, 2, 2)


def test_the_summary_is_the_median_and_quartiles_of_the_per_step_ratios(interleave):
    # ratios plain / lengen: 0.5, 1, 1, 2, 4
    row = interleave.summary([2, 1, 1, 1, 1], [1, 1, 1, 2, 4])
    assert (row["pairs"], row["ratio_median"]) == (5, 1.0)
    assert (row["ratio_q1"], row["ratio_q3"]) == (0.75, 3.0)
    assert row["ratio_iqr"] == 2.25


def test_interleave_writes_the_paired_row_and_its_target_line(bench, tmp_path):
    out = tmp_path / "bench.json"
    arguments = ["--interleave", "--no-eval", "--pes", "rope", "--impls", "lengen,plain"]
    bench.main([*arguments, "--steps", "2", "--warmup", "1", "--json", str(out)])
    written = json.loads(out.read_text())
    assert written["interleaved"]["rope"]["pairs"] == 2
    assert sorted(written["train_tokens_per_s"]) == ["lengen/rope", "plain/rope"]
    plain_lines = [line for line in written["targets"] if "/ plain" in line]
    assert len(plain_lines) == 1 and "interleaved" in plain_lines[0]


def test_interleave_without_the_plain_loop_is_refused(bench):
    with pytest.raises(SystemExit, match="--interleave pairs lengen with plain"):
        bench.main(["--interleave", "--no-eval", "--impls", "lengen"])

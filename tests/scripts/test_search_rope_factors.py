"""scripts/search_rope_factors.py: the LongRoPE-style search's moves keep factors monotone and
new, the search never ends worse than where it started, factors reach the model as θ/λ
(uniform factors are PI), and a search on a debug=fast RoPE run writes its report."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers import compose_train, load_script, tiny_model
from lengen.train import run

search = load_script("search_rope_factors")
pytestmark = pytest.mark.usefixtures("single_thread")


def test_ntk_factors_are_the_ntk_frequency_ratios():
    from lengen.pe.rope_frequencies import rope_inverse_frequencies

    plain = rope_inverse_frequencies(16, 10000.0).double()
    ntk = rope_inverse_frequencies(16, 10000.0, scaling="ntk", factor=4.0).double()
    torch.testing.assert_close(
        torch.from_numpy(search.ntk_factors(8, 4.0)), plain / ntk, rtol=1e-6, atol=0
    )


def test_mutations_stay_monotone_within_bounds_and_new():
    rng = np.random.default_rng(0)
    start = search.ntk_factors(8, 4.0)
    seen = [start]
    for _ in range(30):
        child = search.mutate(start, rng, max_factor=4.0, step=0.25, seen=seen)
        assert search.is_monotone(child) and child.min() >= 1.0 and child.max() <= 4.0
        assert not any(np.allclose(child, other) for other in seen)
        seen.append(child)


def test_crossover_takes_each_factor_from_a_parent():
    rng = np.random.default_rng(1)
    first, second = np.array([1.0, 1.0, 2.0, 2.0]), np.array([1.0, 1.5, 2.0, 3.0])
    child = search.crossover(first, second, rng, seen=[first, second], tries=200)
    assert child is not None and search.is_monotone(child)
    assert all(value in (a, b) for value, a, b in zip(child, first, second, strict=True))


def test_the_search_ends_no_worse_than_its_start():
    target = np.linspace(1.0, 3.0, 6)

    def distance(factors):
        return float(((factors - target) ** 2).sum())

    start = search.ntk_factors(6, 4.0)
    best, loss, history = search.evolve(
        distance, start, generations=5, population=6, parents=3, mutations=4, crossovers=2,
        max_factor=4.0, step=0.25, seed=0,
    )  # fmt: skip
    assert loss <= distance(start) and loss == distance(best)
    assert len(history) == 6 + 5 * (4 + 2)


def test_uniform_factors_are_position_interpolation():
    plain = tiny_model("rope", "decoder")
    pi = tiny_model("rope", "decoder", "pe.scaling=pi", "pe.scaling_factor=3.0")
    pi.load_state_dict(plain.state_dict())
    encodings = search.rope_modules(plain)
    search.set_factors(encodings, np.full(len(encodings[0]._inv_freq["cpu"]), 3.0))
    tokens = torch.randint(0, plain.embedding.num_embeddings, (2, 15))
    with torch.no_grad():
        torch.testing.assert_close(plain(tokens), pi(tokens))


@pytest.fixture(scope="module")
def rope_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rope-run")
    cfg = compose_train("pe=rope", "data.len=6", "eval.factors=[1]", "eval.diagnostics=false",
                        "eval.plot_dpi=30")  # fmt: skip
    run(cfg, run_dir=run_dir)
    return run_dir


def test_a_search_on_a_run_writes_its_report(rope_run, tmp_path):
    out = tmp_path / "factors.json"
    report = search.main([
        "--run", str(rope_run), "--length", "12", "--out", str(out), "--generations", "1",
        "--population", "3", "--parents", "2", "--mutations", "1", "--crossovers", "1",
        "--samples", "8",
    ])  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert report["max_factor"] == 2.0 and len(report["history"]) == 3 + 2
    assert report["loss"] <= report["baselines"]["ntk"] + 1e-9  # NTK is where it starts


def test_an_existing_output_is_refused_and_kept(rope_run, tmp_path):
    out = tmp_path / "factors.json"
    out.write_text("mine")
    with pytest.raises(search.Refusal, match=r"^--out=.*exists"):
        search.main(["--run", str(rope_run), "--length", "12", "--out", str(out)])
    assert out.read_text() == "mine"

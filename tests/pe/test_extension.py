"""Properties every arm of ``pe.extension`` (Self-Extend, ReRoPE, Leaky ReRoPE, dual chunk
attention; lengen.pe.extension) keeps in a model: with a window covering the sequence it is
plain RoPE; the output at t ignores the tokens after t; cached decoding equals the full pass;
it is refused where it is not defined; and eval.py re-evaluates a trained RoPE run with it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import yaml

from helpers import ROOT, compose_train, tiny_model
from lengen.checks import ConfigError
from lengen.reeval import evaluate_run
from lengen.train import run

pytestmark = pytest.mark.usefixtures("single_thread")

#: each arm with windows well inside the decoded length (10 + 11 tokens)
ARMS = {
    "self_extend": ("pe.extension=self_extend", "pe.self_extend_group=2",
                    "pe.self_extend_window=3"),
    "rerope": ("pe.extension=rerope", "pe.rerope_window=3"),
    "leaky_rerope": ("pe.extension=rerope", "pe.rerope_window=3", "pe.rerope_leak=2.0"),
    "dual_chunk": ("pe.extension=dual_chunk", "pe.dca_chunk_size=5", "pe.dca_local_window=1"),
}  # fmt: skip
#: the same arms with windows covering every sequence of the tests (≤ 21 tokens)
COVERING = {
    "self_extend": ("pe.extension=self_extend", "pe.self_extend_group=4",
                    "pe.self_extend_window=64"),
    "rerope": ("pe.extension=rerope", "pe.rerope_window=64"),
    "leaky_rerope": ("pe.extension=rerope", "pe.rerope_window=64", "pe.rerope_leak=2.0"),
    "dual_chunk": ("pe.extension=dual_chunk", "pe.dca_chunk_size=70", "pe.dca_local_window=4"),
}  # fmt: skip


def tokens(batch: int, length: int, vocab: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arm", COVERING)
def test_a_window_covering_the_sequence_is_plain_rope(arm):
    plain = tiny_model("rope", "decoder")
    extended = tiny_model("rope", "decoder", *COVERING[arm])
    extended.load_state_dict(plain.state_dict())  # the arms add no parameters
    batch = tokens(3, 21, plain.embedding.num_embeddings)
    with torch.no_grad():
        assert torch.equal(extended(batch), plain(batch))  # bit for bit: the plain path


@pytest.mark.parametrize("arm", COVERING)
def test_a_covering_window_is_plain_rope_with_half_layout_and_partial_rotary(arm):
    options = ("pe.layout=half", "pe.fraction=0.5")
    plain = tiny_model("rope", "decoder", *options)
    extended = tiny_model("rope", "decoder", *options, *COVERING[arm])
    extended.load_state_dict(plain.state_dict())
    batch = tokens(2, 21, plain.embedding.num_embeddings)
    with torch.no_grad():
        assert torch.equal(extended(batch), plain(batch))


@pytest.mark.parametrize("arm", ARMS)
def test_the_arm_changes_the_logits_past_its_window(arm):
    plain = tiny_model("rope", "decoder")
    extended = tiny_model("rope", "decoder", *ARMS[arm])
    extended.load_state_dict(plain.state_dict())
    batch = tokens(3, 21, plain.embedding.num_embeddings)
    with torch.no_grad():
        assert not torch.allclose(extended(batch), plain(batch), atol=1e-3)


@pytest.mark.parametrize("arm", ARMS)
def test_output_at_t_ignores_later_tokens(arm):
    model = tiny_model("rope", "decoder", *ARMS[arm])
    batch = tokens(2, 21, model.embedding.num_embeddings)
    changed = batch.clone()
    changed[:, 12:] = tokens(2, 9, model.embedding.num_embeddings, seed=7)
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :12], model(batch)[:, :12])


@pytest.mark.parametrize("arm", ARMS)
def test_cached_decoding_equals_the_full_pass(arm):
    model = tiny_model("rope", "decoder", *ARMS[arm])
    batch = tokens(3, 21, model.embedding.num_embeddings)
    with torch.no_grad():
        full = model(batch)
        cache, pieces, start, width = model.new_cache(batch.shape[1]), [], 0, 12
        while start < batch.shape[1]:  # 12 tokens, then 1, 2, 1, … at a time
            pieces.append(model.decode(batch[:, start : start + width], cache))
            start, width = start + width, 1 if width != 1 else 2
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arm", COVERING)
def test_cached_decoding_within_the_window_equals_the_full_pass(arm):
    model = tiny_model("rope", "decoder", *COVERING[arm])  # the plain path, fewer queries
    batch = tokens(2, 15, model.embedding.num_embeddings)
    with torch.no_grad():
        full = model(batch)
        cache = model.new_cache(batch.shape[1])
        pieces = [model.decode(batch[:, :9], cache)]
        pieces += [model.decode(batch[:, t : t + 1], cache) for t in range(9, 15)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("model=encoder",), r"^pe\.extension=rerope: .* a bidirectional stack .*model=decoder"),
        (("pe.scaling=yarn", "pe.scaling_factor=2"), r"^pe\.extension=rerope: .*pe\.scaling=none"),
        (("pe.randomized=true", "pe.max_position=64"), r"allowed: pe\.randomized=false"),
        (("pe.window=4",), r"allowed: pe\.window=null"),
        (("pe.dca_chunk_size=8",), r"^pe\.dca_chunk_size=8 is an option of pe\.extension=dual"),
    ],
)
def test_undefined_combinations_are_refused_in_one_line(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_model("rope", "decoder", "pe.extension=rerope", "pe.rerope_window=3", *overrides)


def test_an_arm_key_without_its_arm_is_refused():
    with pytest.raises(ValueError, match=r"^pe\.rerope_window=3 is an option of pe\.extension="):
        tiny_model("rope", "decoder", "pe.rerope_window=3")


# -- eval.py ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rope_run(tmp_path_factory):
    """A debug=fast RoPE run (copy, trained on lengths ≤ 6)."""
    run_dir = tmp_path_factory.mktemp("rope-run")
    cfg = compose_train("pe=rope", "data.len=6", "eval.factors=[1]", "eval.diagnostics=false",
                        "eval.plot_dpi=30")  # fmt: skip
    run(cfg, run_dir=run_dir)
    return run_dir


@pytest.mark.parametrize("arm", ARMS)
def test_eval_writes_rows_and_records_the_arm(rope_run, arm):
    overrides = [*ARMS[arm], "eval.lengths=[6,24]", "eval.diagnostics=false"]
    evaluate_run([f"run={rope_run}", *overrides, f"tag={arm}"])
    written = json.loads((rope_run / f"results.{arm}.json").read_text())
    assert [row["length"] for row in written["eval"]] == [6, 24]
    assert written["overrides"] == overrides
    assert written["pe_info"]["extension"] == ARMS[arm][0].partition("=")[2]


@pytest.mark.parametrize("arm", COVERING)
def test_eval_inside_the_window_reproduces_the_runs_rows(rope_run, arm):
    overrides = [*COVERING[arm], "eval.diagnostics=false"]
    rows = evaluate_run([f"run={rope_run}", *overrides, f"tag=inside-{arm}"])["eval"]
    original = json.loads((rope_run / "results.json").read_text())["eval"]
    keys = ("length", "loss", "accuracy", "exact_match")
    assert [[row[k] for k in keys] for row in rows] == [[row[k] for k in keys] for row in original]


def test_eval_refuses_an_arm_on_a_non_rope_run_before_torch(rope_run, tmp_path):
    # a run directory of another encoding: the RoPE run's config with ALiBi's pe node
    config = yaml.safe_load((rope_run / "config.yaml").read_text())
    config["pe"] = yaml.safe_load(yaml.safe_dump(dict(compose_train("pe=alibi").pe)))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    code = (
        "import sys\nfrom lengen.checks import ConfigError\nfrom lengen.reeval import evaluate_run\n"
        f"try:\n    evaluate_run(['run={tmp_path}', 'pe.extension=rerope', 'pe.rerope_window=3'])\n"
        "except ConfigError as error:\n    print(error)\n    print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    first, torch_loaded = out.stdout.strip().splitlines()
    assert first.startswith("pe.extension is not an option of this run's encoding (pe=alibi)")
    assert "pe=rope" in first and torch_loaded == "False"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # nothing written


def test_eval_cli_exits_2_for_an_arm_without_its_window(rope_run):
    out = subprocess.run(
        [sys.executable, str(ROOT / "eval.py"), f"run={rope_run}", "pe.extension=rerope"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: pe.rerope_window must be set for pe.extension=rerope; allowed: an integer >= 1 "
        "(e.g. pe.rerope_window=8: relative positions >= 8 all read as 8)"
    ]


def test_a_config_error_is_what_eval_raises(rope_run):
    with pytest.raises(ConfigError, match=r"pe\.self_extend_group must be set"):
        evaluate_run([f"run={rope_run}", "pe.extension=self_extend"])

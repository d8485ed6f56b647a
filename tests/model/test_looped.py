"""Looped depth (``model.loops``, ``model.loop_rule``; ``lengen.model.looped``, docs/models.md
"Looped depth"): one loop is the unlooped model; a looped model equals the loop written out here
in float64 from its parameters; weights are tied; causality at a fixed count; gradients reach
the step embedding; the linear rule's count; cached decoding under a length-global count; the
refusals; every encoding composes.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from helpers import compose_train, yaml_choices
from lengen.errors import ConfigError
from lengen.model import DecoderOnly
from lengen.model.config import DecoderOnlyConfig
from lengen.pe import NoPE
from lengen.preflight import validate

pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")

SIZES = dict(d_model=8, n_heads=2, d_ff=16, n_layers=2)
#: the training sequence's tokens the small models are told (pe's train_positions)
TRAIN_TOKENS = 6


def small(seed: int = 0, pe=NoPE, **options) -> DecoderOnly:
    torch.manual_seed(seed)
    factory = functools.partial(pe, train_positions=TRAIN_TOKENS)
    return DecoderOnly(pe=factory, vocab_size=7, **SIZES, **options)


# -- an independent re-derivation: the loop written out -----------------------------------------
def step_features(loop: int, dim: int) -> torch.Tensor:
    """Interleaved sinusoids of the loop index: column 2j sin(i / 10000^(2j/dim)), 2j+1 cos."""
    features = torch.zeros(dim, dtype=torch.float64)
    for j in range(dim // 2):
        angle = loop / 10000 ** (2 * j / dim)
        features[2 * j], features[2 * j + 1] = math.sin(angle), math.cos(angle)
    return features


def reference_logits(net: DecoderOnly, tokens: torch.Tensor, loops: int) -> torch.Tensor:
    """h_0 = 0, h_{i+1} = blocks(h_i + e + s_i); logits = head(norm(h_K)), for a NoPE decoder,
    each block's attention written per head with its causal mask."""
    p = {name: value.detach().double() for name, value in net.named_parameters()}
    d, heads = SIZES["d_model"], SIZES["n_heads"]
    hd, length = d // heads, tokens.shape[1]
    e = p["embedding.weight"][tokens] * math.sqrt(d)  # (B, T, D)

    def norm(x, name):
        return F.layer_norm(x, (d,), p[f"{name}.weight"], p[f"{name}.bias"])

    def linear(x, name):
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    mask = torch.ones(length, length, dtype=torch.bool).tril()
    hidden = torch.zeros_like(e)
    for loop in range(loops):
        s = step_features(loop, d)
        s = linear(F.silu(linear(s, "stack.depth.step.mlp.0")), "stack.depth.step.mlp.2")
        hidden = hidden + e + s
        for index in range(SIZES["n_layers"]):
            block = f"stack.blocks.{index}"
            a = norm(hidden, f"{block}.norm_attn")
            q = linear(a, f"{block}.attn.query")  # (B, T, D)
            kv = linear(a, f"{block}.attn.key_value")  # (B, T, 2D): keys, then values
            k, v = kv[..., :d], kv[..., d:]
            y = torch.zeros_like(q)
            for h in range(heads):
                cols = slice(h * hd, (h + 1) * hd)
                scores = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(hd)  # (B, T, T)
                weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
                y[..., cols] = weights @ v[..., cols]
            hidden = hidden + linear(y, f"{block}.attn.out")
            m = norm(hidden, f"{block}.norm_mlp")
            hidden = hidden + linear(F.gelu(linear(m, f"{block}.mlp.0")), f"{block}.mlp.2")
    return norm(hidden, "stack.norm") @ p["head.weight"].T  # (B, T, V)


def test_a_looped_model_equals_the_loop_written_out():
    net = small(loops=3).double().eval()
    tokens = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(1))
    assert_close(net(tokens), reference_logits(net, tokens, loops=3))


def test_the_linear_rule_runs_the_written_out_loop_its_count_of_times():
    net = small(loops=2, loop_rule="linear").double().eval()
    tokens = torch.randint(0, 7, (1, 9), generator=torch.Generator().manual_seed(2))
    # ceil(2 · 9 / 6) = 3 loops
    assert_close(net(tokens), reference_logits(net, tokens, loops=3))


# -- one loop is the model as it was --------------------------------------------------------------
def test_one_loop_is_the_unlooped_model_exactly():
    tokens = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(3))
    plain, once = small(), small(loops=1)
    assert plain.state_dict().keys() == once.state_dict().keys()
    assert torch.equal(plain(tokens), once(tokens))


def test_one_loop_adds_no_parameter():
    with_default = sum(p.numel() for p in small().parameters())
    assert sum(p.numel() for p in small(loops=1).parameters()) == with_default


# -- weights are tied -----------------------------------------------------------------------------
def test_the_parameter_count_does_not_depend_on_the_loop_count():
    counts = {loops: sum(p.numel() for p in small(loops=loops).parameters()) for loops in (2, 5)}
    assert counts[2] == counts[5]


# -- causality and gradients ----------------------------------------------------------------------
def test_a_looped_decoder_is_causal_at_a_fixed_loop_count():
    net = small(loops=3).eval()
    tokens = torch.randint(0, 7, (1, 8), generator=torch.Generator().manual_seed(4))
    changed = tokens.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 7
    assert_close(net(tokens)[:, :5], net(changed)[:, :5])


def test_gradients_reach_every_parameter_of_a_looped_model():
    net = small(loops=3)
    tokens = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(5))
    net(tokens).square().mean().backward()
    missing = [n for n, p in net.named_parameters() if p.grad is None or not p.grad.any()]
    assert missing == []


# -- the rule that picks the loop count -----------------------------------------------------------
@pytest.mark.parametrize(
    ("rule", "tokens", "loops"),
    [("fixed", 6, 2), ("fixed", 60, 2), ("linear", 6, 2), ("linear", 3, 1), ("linear", 12, 4),
     ("linear", 13, 5), ("linear", 1, 1)],
)  # fmt: skip
def test_the_rule_picks_ceil_of_k_times_the_length_ratio(rule, tokens, loops):
    config = DecoderOnlyConfig.from_keys({"loops": 2, "loop_rule": rule})
    assert config.loop_count(tokens, TRAIN_TOKENS) == loops


@pytest.mark.parametrize(("length", "passes"), [(6, 2), (12, 4), (13, 5)])
def test_a_linear_model_runs_its_blocks_the_counted_number_of_times(length, passes):
    net = small(loops=2, loop_rule="linear").eval()
    calls = []
    net.stack.blocks[0].register_forward_pre_hook(lambda *_: calls.append(1))
    net(torch.zeros(1, length, dtype=torch.long))
    assert len(calls) == passes


# -- cached decoding: the count of the whole sequence ----------------------------------------------
@pytest.mark.parametrize("rule", ["fixed", "linear"])
def test_cached_decoding_equals_the_full_pass_of_a_looped_model(rule):
    net = small(loops=2, loop_rule=rule).eval()
    tokens = torch.randint(0, 7, (2, 14), generator=torch.Generator().manual_seed(6))
    cache = net.new_cache(tokens.shape[1])
    steps = [net.decode(tokens[:, :4], cache)]
    steps += [net.decode(tokens[:, t : t + 1], cache) for t in range(4, 14)]
    assert_close(torch.cat(steps, dim=1), net(tokens))


def test_cached_decoding_of_a_looped_hybrid_keeps_a_state_per_loop():
    net = small(loops=2, loop_rule="linear", mixers=["gla", "attention"]).eval()
    tokens = torch.randint(0, 7, (2, 10), generator=torch.Generator().manual_seed(8))
    cache = net.new_cache(tokens.shape[1])
    steps = [net.decode(tokens[:, :3], cache)]
    steps += [net.decode(tokens[:, t : t + 1], cache) for t in range(3, 10)]
    assert_close(torch.cat(steps, dim=1), net(tokens))


def test_cached_decoding_of_a_looped_encoder_decoder_equals_its_full_pass():
    from lengen.model import EncoderDecoder

    torch.manual_seed(0)
    factory = functools.partial(NoPE, train_positions=TRAIN_TOKENS)
    net = EncoderDecoder(pe=factory, vocab_size=7, **SIZES, loops=2, loop_rule="linear").eval()
    generator = torch.Generator().manual_seed(9)
    src, tgt = (
        torch.randint(0, 7, (2, 9), generator=generator),
        torch.randint(0, 7, (2, 8), generator=generator),
    )
    cache = net.new_cache(tgt.shape[1], src)
    steps = [net.decode(tgt[:, :2], cache)] + [
        net.decode(tgt[:, t : t + 1], cache) for t in range(2, 8)
    ]
    assert_close(torch.cat(steps, dim=1), net(src, tgt))


def test_under_the_linear_rule_the_count_is_length_global():
    # what docs/models.md says: the output at t depends on the total length (more loops)
    net = small(loops=2, loop_rule="linear").eval()
    tokens = torch.randint(0, 7, (1, 14), generator=torch.Generator().manual_seed(7))
    assert not torch.allclose(net(tokens[:, :6])[:, :6], net(tokens)[:, :6])


def test_a_cache_keeps_one_layer_per_loop_and_block():
    net = small(loops=2, loop_rule="linear").eval()
    assert len(net.new_cache(13).layers) == 5 * SIZES["n_layers"]  # ceil(2 · 13 / 6) = 5


# -- options: typed, refused in one line -------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [(["model.loops=0"], "model.loops must be a positive integer, got 0"),
     (["model.loops=1.5"], "model.loops must be a positive integer"),
     (["model.loop_rule=halting"], "model.loop_rule must be one of fixed, linear, confidence; got 'halting'")],
)  # fmt: skip
def test_bad_loop_options_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as refused:
        validate(compose_train(*overrides))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_loop_refusals_need_no_torch():
    code = (
        "import sys\n"
        "from lengen.model.config import DecoderOnlyConfig\n"
        "try:\n"
        "    DecoderOnlyConfig.from_keys({'loops': 0})\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[-1] == "False" and lines[0].startswith("model.loops must be a positive integer")


def test_the_linear_rule_without_a_training_length_is_refused_in_one_line():
    with pytest.raises(ValueError) as refused:
        DecoderOnly(pe=NoPE, vocab_size=7, **SIZES, loops=2, loop_rule="linear")
    message = str(refused.value)
    assert message.startswith("model.loop_rule=linear") and "\n" not in message


# -- composition with every encoding, through the config ------------------------------------------
@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_a_looped_model_builds_and_runs_with_every_encoding(pe):
    from lengen.build import build

    cfg = compose_train(f"pe={pe}", "model.loops=2", "model.loop_rule=linear")
    data, net, _ = build(cfg)
    logits = net(**data.train_batch(0)["inputs"])
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("pe", ["rope", "alibi", "sinusoidal", "fox"])
def test_cached_decoding_of_a_looped_model_past_the_training_length(pe):
    from lengen.build import build

    cfg = compose_train(f"pe={pe}", "model.loops=2", "model.loop_rule=linear")
    data, net, _ = build(cfg)
    net.eval()
    tokens = data.train_batch(0)["inputs"]["tokens"][:2]
    tokens = torch.cat([tokens, tokens], dim=1)  # twice the training sequence: twice the loops
    cache = net.new_cache(tokens.shape[1])
    steps = [net.decode(tokens[:, :3], cache)]
    steps += [net.decode(tokens[:, t : t + 1], cache) for t in range(3, tokens.shape[1])]
    assert_close(torch.cat(steps, dim=1), net(tokens), atol=1e-4, rtol=1e-4)


def test_a_looped_model_trains_and_evaluates_through_hydra_keys(tmp_path):
    from lengen.train import run

    # 1× and 2× the training length: the count grows past 2 (greedy decoding of a loop that
    # deepens with the length costs most at 8×, and the rule is the same at every length)
    cfg = compose_train(
        "model.loops=2",
        "model.loop_rule=linear",
        "eval.decoding=greedy",
        "eval.factors=[1,2]",
        "logger=none",
    )
    results = run(cfg, run_dir=tmp_path)
    assert {row["protocol"] for row in results["eval"]} == {"greedy"}
    # each row records the loops it was scored with: K(T) at its sequence (max_position here)
    train_tokens = next(r for r in results["eval"] if r["length"] == results["train_len"])
    expected = [
        math.ceil(2 * r["max_position"] / train_tokens["max_position"]) for r in results["eval"]
    ]
    assert [row["loops"] for row in results["eval"]] == expected and max(expected) > 2


def test_attention_diagnostics_of_a_looped_model_are_its_last_loops(fixed_run):
    import json

    section = json.loads((fixed_run / "results.json").read_text())["attention_diagnostics"]
    assert section["lengths"] and set(next(iter(section["lengths"].values()))["layers"]) == {
        "0",
        "1",
    }
    assert any(note.startswith("looped depth") for note in section["skipped"])


# -- results rows ---------------------------------------------------------------------------------
def test_a_row_of_a_looped_model_records_its_loop_count():
    from lengen.model.looped import loop_facts

    assert loop_facts(small(loops=2, loop_rule="linear"), 13) == {"loops": 5}


def test_a_row_of_an_unlooped_model_stays_as_it_was():
    from lengen.model.looped import loop_facts

    assert loop_facts(small(), 13) == {}


# -- eval.py: a looped run re-evaluated with a count that grows -----------------------------------
@pytest.fixture(scope="module")
def fixed_run(tmp_path_factory):
    from lengen.train import run

    run_dir = tmp_path_factory.mktemp("looped_run")
    run(compose_train("model.loops=2", "logger=none"), run_dir=run_dir)
    return run_dir


def test_eval_py_re_evaluates_a_fixed_loop_run_under_the_linear_rule(fixed_run):
    from lengen.reeval import evaluate_run

    results = evaluate_run([f"run={fixed_run}", "model.loop_rule=linear", "tag=linear"])
    rows = results["eval"]
    train_tokens = next(r["max_position"] for r in rows if r["length"] == results["train_len"])
    assert [row["loops"] for row in rows] == [
        math.ceil(2 * row["max_position"] / train_tokens) for row in rows
    ]


def test_eval_py_re_evaluates_a_fixed_loop_run_by_confidence(fixed_run):
    # model.loop_rule=confidence (tests/model/test_loop_confidence.py), on this file's run
    from lengen.evaluation.loop_choice import choose_loops
    from lengen.reeval import evaluate_run

    results = evaluate_run([f"run={fixed_run}", "model.loop_rule=confidence",
                            "model.loop_extra=2", "eval.decoding=greedy", "eval.factors=[1,2]",
                            "tag=confidence"])  # fmt: skip
    rows = results["eval"]
    train_tokens = next(r["max_position"] for r in rows if r["length"] == results["train_len"])
    sizes = [math.ceil(2 * row["max_position"] / train_tokens) + 2 for row in rows]
    assert [len(row["loop_confidence"]) for row in rows] == sizes
    assert [row["loops"] for row in rows] == [choose_loops(r["loop_confidence"]) for r in rows]
    assert (fixed_run / "results.confidence.json").exists()


def test_eval_py_refuses_to_drop_the_loop_of_a_looped_checkpoint_in_one_line(fixed_run):
    from lengen.reeval import evaluate_run

    with pytest.raises(ConfigError) as refused:
        evaluate_run([f"run={fixed_run}", "model.loops=1", "tag=unlooped"])
    message = str(refused.value)
    assert "holds a different model" in message and "\n" not in message


def test_the_linear_rule_on_a_grid_is_refused_in_one_line():
    from lengen.build import build

    cfg = compose_train("data=grid_locate", "model=encoder", "pe=sinusoidal", "model.loops=2",
                        "model.loop_rule=linear")  # fmt: skip
    with pytest.raises(ConfigError) as refused:
        build(cfg)
    message = str(refused.value)
    assert message.startswith("model.loop_rule=linear") and "\n" not in message


def test_a_fixed_loop_count_serves_a_grid():
    from lengen.build import build

    data, net, _ = build(compose_train("data=grid_locate", "model=encoder", "model.loops=2"))
    assert torch.isfinite(net(**data.train_batch(0)["inputs"])).all()


def test_attention_maps_of_a_looped_model_are_one_per_layer(fixed_run, tmp_path):
    from lengen.attention_maps import analyse_run

    report = analyse_run(fixed_run, 32, out_dir=tmp_path, samples=2, formats=("png",))
    assert report["layers"] == ["0", "1"] and len(report["mean_attention_distance"]) == 2

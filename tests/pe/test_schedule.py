"""Schedules (``lengen.pe.schedule``): which encoding each layer gets, that each layer attends
with it, what results and labels call it, and the refusals (one line, before torch)."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_train, fresh_python, sharpen, tiny_model
from lengen.config import run_label
from lengen.model import DecoderOnly, EncoderDecoder
from lengen.pe import ALiBi, NoPE, RoPE
from lengen.pe.config import check_encoding
from lengen.pe.kerple import KERPLE
from lengen.pe.schedule import Schedule

pytestmark = pytest.mark.usefixtures("single_thread")

SIZES = dict(d_model=16, n_heads=2)


def schedule(layers, n_layers=6, **options) -> Schedule:
    return Schedule(layers=layers, n_layers=n_layers, **SIZES, **options)


def test_a_pattern_repeats_over_the_layers():
    pe = schedule(["rope", "rope", "rope", "nope"])
    kinds = [type(pe.for_layer(i)) for i in range(6)]
    assert kinds == [RoPE, RoPE, RoPE, NoPE, RoPE, RoPE]


def test_each_layer_gets_its_entrys_options():
    pe = schedule([{"pe": "rope", "window": 8}, {"pe": "nope", "attn_temperature_tuning": True}],
                  n_layers=4)  # fmt: skip
    assert [pe.for_layer(i).cfg.window for i in range(4)] == [8, None, 8, None]
    assert [pe.for_layer(i).cfg.attn_temperature_tuning for i in range(4)] == [False, True] * 2


def test_the_schedules_shared_options_reach_every_layer():
    pe = schedule(["rope", "nope"], n_layers=2, log_length_scale=True, train_positions=8)
    assert all(pe.for_layer(i).cfg.log_length_scale for i in range(2))


def test_per_layer_parameters_are_those_of_the_stacks_layer():
    pe = schedule(["rope", "nope"], n_layers=4, ssmax=True)
    assert [pe.for_layer(i).layer for i in range(4)] == [0, 1, 2, 3]


def test_a_schedule_of_one_encoding_is_that_encoding():
    torch.manual_seed(0)
    one = DecoderOnly(pe=RoPE, vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=32)
    torch.manual_seed(0)
    scheduled = DecoderOnly(pe=lambda **context: Schedule(layers=["rope"], **context),
                            vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=32)  # fmt: skip
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(scheduled(tokens), one(tokens), rtol=0, atol=0)


def test_each_layer_attends_with_its_own_encoding():
    # [rope, nope] differs from [nope, rope]: the layer order reaches the logits
    logits = []
    for layers in ("[rope,nope]", "[nope,rope]"):
        model = tiny_model("rnope", "decoder", f"pe.layers={layers}")
        tokens = torch.randint(0, model.embedding.num_embeddings, (2, 9),
                               generator=torch.Generator().manual_seed(1))  # fmt: skip
        logits.append(model(tokens))
    assert not torch.allclose(*logits)


def test_the_decoder_of_an_encoder_decoder_cycles_over_its_own_depth():
    model = EncoderDecoder(pe=lambda **context: Schedule(layers=["rope", "nope"], **context),
                           vocab_size=11, d_model=16, n_layers=4, n_decoder_layers=3,
                           n_heads=2, d_ff=32)  # fmt: skip
    assert model.encoder.pe.layer_labels() == ["rope", "nope", "rope", "nope"]
    assert model.decoder.pe.layer_labels() == ["rope", "nope", "rope"]


def test_randomized_distances_are_drawn_once_for_every_layer():
    pe = Schedule(layers=["alibi", "kerple"], n_layers=2, randomized=True, max_position=64, **SIZES)
    pe.positions(10)
    first, second = pe.for_layer(0), pe.for_layer(1)
    assert isinstance(first, ALiBi) and isinstance(second, KERPLE)
    assert second._distances is first._distances is not None


def test_cached_decoding_rotates_each_layer_as_its_encoding_needs():
    # xPos centres its scales on the whole pass (keys re-rotated each step), RoPE does not
    model = tiny_model("rnope", "decoder", "pe.layers=[{pe: xpos, scale_base: 4.0},rope]")
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 13),
                           generator=torch.Generator().manual_seed(1))  # fmt: skip
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(13)
        assert [layer.self_attention.store_rotated for layer in cache.layers] == [False, True]
        cached = torch.cat([model.decode(tokens[:, :5], cache)]
                           + [model.decode(tokens[:, t : t + 1], cache) for t in range(5, 13)], 1)  # fmt: skip
    torch.testing.assert_close(cached, full, rtol=1e-4, atol=1e-5)


def test_prefix_logits_hold_with_every_layer_kind():
    model = sharpen(tiny_model("irope", "decoder", "model.n_layers=4", "pe.layers.3.floor_scale=2"))
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 21),
                           generator=torch.Generator().manual_seed(5))  # fmt: skip
    with torch.no_grad():
        torch.testing.assert_close(model(tokens[:, :13]), model(tokens)[:, :13],
                                   rtol=1e-4, atol=1e-5)  # fmt: skip


# -- names ---------------------------------------------------------------------------------------
def test_results_list_each_layers_encoding():
    pe = schedule([{"pe": "rope", "window": 8}, "nope"], n_layers=3)
    assert pe.describe()["schedule"] == ["rope(window=8)", "nope", "rope(window=8)"]


def test_the_run_label_names_the_schedule():
    label = run_label(compose_train("pe=rnope_swa", "+pe.layers.3.attn_scale=0.2"), "greedy")
    assert "pe=rnope_swa [3×rope(window=8), nope(attn_scale=0.2)]" in label


def test_a_shallow_stack_says_which_entries_it_uses():
    with pytest.warns(UserWarning, match="uses the first 2 of its 4 entries: rope, rope"):
        schedule(["rope", "rope", "rope", "nope"], n_layers=2)


# -- refusals, before torch ----------------------------------------------------------------------
REFUSALS = {
    "an_embedding": (["rope", "sinusoidal"], {}, r"^pe.layers.1.pe=sinusoidal adds to the token"),
    "positions_per_layer": ([{"pe": "rope", "randomized": True}], {},
                            r"^pe.layers.0.randomized: positions are drawn once per stack"),
    "a_disagreeing_window": ([{"pe": "rope", "window": 8}], {"window": 4},
                             r"^pe.window=4 and pe.layers.0.window=8 disagree"),
    "an_unknown_name": (["ropee"], {}, r"^pe.layers.0.pe must be one of .*rope"),
    "a_bad_layer_option": ([{"pe": "rope", "base": 0.5}], {}, r"^pe.layers.0.base must be > 1"),
    "mixed_randomization": (["alibi", "rope"], {"randomized": True, "max_position": 64},
                            r"^pe.randomized=true: a schedule draws one set of positions"),
    "a_nested_schedule": (["rnope"], {}, r"^pe.layers.0.pe=rnope: .*not be a schedule"),
    "an_empty_list": ([], {}, r"^pe.layers must be a non-empty list"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(REFUSALS))
def test_bad_schedules_are_refused_in_one_line(name):
    layers, options, message = REFUSALS[name]
    node = {"_target_": "lengen.pe.schedule.Schedule", "layers": layers, **options}
    with pytest.raises(ValueError, match=message) as error:
        check_encoding(node, n_layers=4, max_positions=32, **SIZES)
    assert "\n" not in str(error.value)


def test_a_layer_for_causal_attention_only_is_refused_in_an_encoder():
    node = {"_target_": "lengen.pe.schedule.Schedule", "layers": ["xpos", "nope"]}
    with pytest.raises(ValueError, match=r"^pe: XPos is defined for causal attention only"):
        check_encoding(node, causal=False, n_layers=2, **SIZES)


def test_schedule_refusals_come_before_torch_is_imported():
    code = (
        "import sys\nfrom lengen.pe.config import check_encoding\n"
        "try:\n    check_encoding({'_target_': 'lengen.pe.schedule.Schedule', "
        "'layers': ['learned']}, d_model=16, n_heads=2)\n"
        "except ValueError as error:\n    print(str(error)[:17], 'torch' in sys.modules)\n"
    )
    assert fresh_python(code) == "pe.layers.0.pe=le False"

"""Block options that decide where attention mass goes (``lengen.model.block_options``,
docs/models.md): each option's layer against an independent float64 re-derivation from its
formula written here, SDPA's extra-column path against the math path, causality, cached
decoding equal to the full pass, gradients reaching every new parameter, the default model
unchanged, and the one-line refusals."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

from helpers import compose_train, pe_factory
from lengen.errors import ConfigError
from lengen.model import DecoderOnly, EncoderOnly
from lengen.model.attention import MultiHeadAttention
from lengen.model.block_config import AttentionOptions
from lengen.model.block_options import extra_key_attention, extra_keys, math_attention
from lengen.preflight import validate

pytestmark = pytest.mark.usefixtures("single_thread")

D_MODEL, HEADS, LENGTH = 16, 2, 7
HEAD_DIM = D_MODEL // HEADS

#: every option alone, and the two extra key columns together
OPTIONS = {
    "gate_headwise": AttentionOptions(gate="headwise"),
    "gate_elementwise": AttentionOptions(gate="elementwise"),
    "sinks": AttentionOptions(sinks=True),
    "kv_bias": AttentionOptions(kv_bias=True),
    "sinks_and_kv_bias": AttentionOptions(sinks=True, kv_bias=True),
    "qk_norm": AttentionOptions(qk_norm=True),
    "sigmoid": AttentionOptions(fn="sigmoid"),
}
#: the model keys of each
KEYS = {
    "gate_headwise": {"attn_gate": "headwise"},
    "gate_elementwise": {"attn_gate": "elementwise"},
    "sinks": {"attn_sinks": True},
    "kv_bias": {"kv_bias": True},
    "sinks_and_kv_bias": {"attn_sinks": True, "kv_bias": True},
    "qk_norm": {"qk_norm": True},
    "sigmoid": {"attn_fn": "sigmoid"},
}
#: without a bias (SDPA), a rotation, a relative bias (math path)
ENCODINGS = ("nope", "rope", "alibi")


def _layer(options: AttentionOptions, pe_name: str, causal: bool = True, seed: int = 0):
    torch.manual_seed(seed)
    layer = MultiHeadAttention(D_MODEL, HEADS, 0.0, causal=causal, cross=False)
    layer.use_options(options)
    for name, parameter in layer.named_parameters():  # away from init so every term shows
        if name.startswith(("sinks", "q_norm", "k_norm", "k_bias", "v_bias", "gate")):
            parameter.data.normal_(0.5, 0.7)
    pe = pe_factory(pe_name)(d_model=D_MODEL, n_heads=HEADS, causal=causal)
    return layer.double(), pe.double()


# -- the independent re-derivation: each option's formula, in float64 ----------------------------
def reference(layer, pe, x, options: AttentionOptions, causal: bool = True, weights_only=False):
    """The layer's output written from the formulas: q, k, v; RMSNorm per head with its gain
    (QK-norm) before the rotation; logits q·kᵀ/√hd + bias + causal mask; softmax with a sink
    logit s_h (gpt-oss) and a key k*_h of value v*_h (Gu et al.) as extra columns, or
    sigmoid(l − log n_i), n_i = i + 1 keys seen; y ⊙ sigmoid(x W_g + b_g); the output map."""
    batch, length, _ = x.shape
    split = lambda t: t.view(batch, length, HEADS, HEAD_DIM).transpose(1, 2)  # noqa: E731
    wk, wv = layer.key_value.weight.chunk(2, 0)
    bk, bv = layer.key_value.bias.chunk(2, 0)
    q = split(x @ layer.query.weight.T + layer.query.bias)  # (B, H, T, hd)
    k, v = split(x @ wk.T + bk), split(x @ wv.T + bv)
    if options.qk_norm:
        rms = lambda t: t / torch.sqrt((t * t).mean(-1, keepdim=True) + 1e-6)  # noqa: E731
        q, k = rms(q) * layer.q_norm.weight, rms(k) * layer.k_norm.weight
    positions = torch.arange(length)
    q, k = pe.rotate(q, k, positions, positions)
    logits = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)  # (B, H, T, T)
    if pe.has_bias:
        logits = logits + pe.attention_bias(positions, positions).double()
    mask = torch.ones(length, length, dtype=torch.bool).tril() if causal else None
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    if options.fn == "sigmoid":
        seen = torch.arange(1, length + 1, dtype=torch.float64) if causal else float(length)
        seen = torch.as_tensor(seen).expand(length)[:, None]  # (T, 1)
        weights = torch.sigmoid(logits - seen.log())  # (B, H, T, T)
        y = weights @ v
    else:
        columns, values = [logits], [v]
        if options.sinks:
            columns.insert(0, layer.sinks.view(1, HEADS, 1, 1).expand(batch, -1, length, 1))
            values.insert(0, torch.zeros(batch, HEADS, 1, HEAD_DIM, dtype=torch.float64))
        if options.kv_bias:
            bias_logit = (q @ layer.k_bias[:, :, None]) / math.sqrt(HEAD_DIM)  # (B, H, T, 1)
            columns.insert(len(columns) - 1, bias_logit)
            values.insert(len(values) - 1, layer.v_bias[None, :, None].expand(batch, -1, 1, -1))
        weights = torch.cat(columns, -1).softmax(-1)
        y = weights @ torch.cat(values, 2)  # (B, H, T, hd)
        weights = weights[..., -length:]  # the sequence's keys: what the extra columns leave
    if weights_only:
        return weights
    if options.gate != "none":
        gate = torch.sigmoid(x @ layer.gate.weight.T + layer.gate.bias)  # (B, T, H or D)
        y = y * gate.view(batch, length, HEADS, -1).transpose(1, 2)
    y = y.transpose(1, 2).reshape(batch, length, D_MODEL)
    return y @ layer.out.weight.T + layer.out.bias


@pytest.mark.parametrize("pe_name", ENCODINGS)
@pytest.mark.parametrize("option", OPTIONS)
def test_each_option_matches_its_float64_formula(option, pe_name):
    layer, pe = _layer(OPTIONS[option], pe_name)
    x = torch.randn(2, LENGTH, D_MODEL, dtype=torch.float64)
    expected = reference(layer, pe, x, OPTIONS[option])
    assert_close(layer(x, pe, torch.arange(LENGTH)), expected)


@pytest.mark.parametrize("option", ["sinks", "kv_bias", "sigmoid", "gate_headwise"])
def test_each_option_matches_its_formula_in_a_bidirectional_stack(option):
    layer, pe = _layer(OPTIONS[option], "nope", causal=False)
    x = torch.randn(2, LENGTH, D_MODEL, dtype=torch.float64)
    expected = reference(layer, pe, x, OPTIONS[option], causal=False)
    assert_close(layer(x, pe, torch.arange(LENGTH)), expected)


@pytest.mark.parametrize("causal", [True, False])
def test_sdpas_extra_columns_equal_the_math_path(causal):
    """The fast path (extra key columns through SDPA) computes the math path's function."""
    layer, pe = _layer(OPTIONS["sinks_and_kv_bias"], "nope", causal=causal)
    q, k, v = (torch.randn(2, HEADS, LENGTH, HEAD_DIM, dtype=torch.float64) for _ in range(3))
    extra = extra_keys(layer, layer.options, q)
    scale = 1 / math.sqrt(HEAD_DIM)
    positions = torch.arange(LENGTH)
    fast = extra_key_attention(q, k, v, extra, causal=causal, scale=scale, dropout_p=0.0)
    slow = math_attention(q, k, v, extra, causal=causal, pe=pe, q_positions=positions,
                          k_positions=positions, scale=scale, sigmoid=False)  # fmt: skip
    assert_close(fast, slow)


def _model(option: str, pe_name: str = "rope", seed: int = 0, cls=DecoderOnly):
    torch.manual_seed(seed)
    pe = pe_factory(pe_name)
    model = cls(pe=pe, vocab_size=11, d_model=D_MODEL, n_heads=HEADS, n_layers=2, d_ff=32,
                **KEYS[option])  # fmt: skip
    for name, parameter in model.named_parameters():
        if name.endswith(("sinks", "k_bias", "v_bias")):
            parameter.data.normal_(0.5, 0.7)
    return model.double().eval()


@pytest.mark.parametrize("pe_name", ["rope", "alibi"])
@pytest.mark.parametrize("option", OPTIONS)
def test_an_output_depends_on_no_later_token(option, pe_name):
    model = _model(option, pe_name)
    tokens = torch.randint(0, 11, (1, 12))
    changed = tokens.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 11
    assert_close(model(tokens)[:, :8], model(changed)[:, :8])


@pytest.mark.parametrize("pe_name", ["rope", "alibi"])
@pytest.mark.parametrize("option", OPTIONS)
def test_cached_decoding_equals_the_full_pass(option, pe_name):
    model = _model(option, pe_name)
    tokens = torch.randint(0, 11, (2, 10))
    cache = model.new_cache(10)
    pieces = [model.decode(tokens[:, :4], cache)]
    pieces += [model.decode(tokens[:, t : t + 1], cache) for t in range(4, 10)]
    assert_close(torch.cat(pieces, 1), model(tokens))


#: the parameters each option adds to a self-attention layer
NEW = {
    "gate_headwise": {"gate.weight", "gate.bias"},
    "gate_elementwise": {"gate.weight", "gate.bias"},
    "sinks": {"sinks"},
    "kv_bias": {"k_bias", "v_bias"},
    "sinks_and_kv_bias": {"sinks", "k_bias", "v_bias"},
    "qk_norm": {"q_norm.weight", "k_norm.weight"},
    "sigmoid": set(),
}


@pytest.mark.parametrize("option", OPTIONS)
def test_gradients_reach_every_new_parameter(option):
    model = _model(option).train()
    model(torch.randint(0, 11, (2, 9))).square().sum().backward()
    new = {n: p for n, p in model.named_parameters() if n.split("attn.", 1)[-1] in NEW[option]}
    assert len(new) == 2 * len(NEW[option])  # both layers have them
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in new.values())


@pytest.mark.parametrize("option", ["sinks", "gate_elementwise", "sigmoid"])
def test_an_encoder_takes_the_options(option):
    model = _model(option, "alibi", cls=EncoderOnly)
    assert model(torch.randint(0, 11, (2, 9))).isfinite().all()


def test_the_default_adds_no_parameter():
    torch.manual_seed(0)
    plain = DecoderOnly(pe=pe_factory("rope"), vocab_size=11)
    names = {name.rsplit(".", 1)[-1] for name, _ in plain.named_parameters()}
    assert not names & {"sinks", "k_bias", "v_bias"}
    assert not any(
        ".gate." in n or "_norm" in n.split(".")[-2] for n, _ in plain.named_parameters()
    )


def test_sinks_take_mass_from_the_sequence():
    """A large sink logit leaves the sequence almost no mass: the output tends to zero
    before the output map (only the bias of ``out`` remains)."""
    layer, pe = _layer(AttentionOptions(sinks=True), "rope")
    layer.sinks.data.fill_(50.0)
    x = torch.randn(1, LENGTH, D_MODEL, dtype=torch.float64)
    assert_close(layer(x, pe, torch.arange(LENGTH)), layer.out.bias.expand(1, LENGTH, -1))


# -- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ("model.attn_gate=sigmoid",),
            "model.attn_gate must be one of none, headwise, elementwise",
        ),
        (("model.attn_fn=relu",), "model.attn_fn must be one of softmax, sigmoid"),
        (("model.qk_norm=yes",), "model.qk_norm must be true or false"),
        (("model.attn_sinks=true", "model.attn_fn=sigmoid"), "model.attn_sinks: an extra key"),
        (("model.kv_bias=true", "model.attn_fn=sigmoid"), "model.kv_bias: an extra key"),
        (("pe=nope", "model.mixer=gla", "model.attn_gate=headwise"), "model.mixer: every layer"),
    ],
)
def test_bad_options_are_refused_in_one_line_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as refused:
        validate(compose_train(*overrides))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


@pytest.mark.parametrize("pe_name, option", [("fox", "sinks"), ("cope", "sigmoid")])
def test_an_encoding_without_plain_logits_is_refused_with_options_that_change_them(pe_name, option):
    with pytest.raises(ValueError) as refused:
        _model(option, pe_name)
    message = str(refused.value)
    assert message.startswith("model.attn_") and "\n" not in message and " pe=" in message


def test_the_option_refusals_need_no_torch():
    code = (
        "import sys\n"
        "from lengen.model.config import DecoderOnlyConfig\n"
        "try:\n"
        "    DecoderOnlyConfig.from_keys({'kv_bias': True, 'attn_fn': 'sigmoid'}).check()\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "False" and "model.kv_bias: " in done.stdout


@pytest.mark.parametrize("option", ["sinks", "kv_bias", "sinks_and_kv_bias"])
def test_extra_columns_without_a_bias_keep_sdpa(option, monkeypatch):
    """Without a logit bias or a window the extra columns go through SDPA, not the math path."""
    import lengen.model.block_options as block_options

    def refuse(*args, **kwargs):
        raise AssertionError("took the math path")

    monkeypatch.setattr(block_options, "math_attention", refuse)
    layer, pe = _layer(OPTIONS[option], "rope")
    assert layer(
        torch.randn(1, LENGTH, D_MODEL, dtype=torch.float64), pe, torch.arange(LENGTH)
    ).shape


@pytest.mark.parametrize("option", ["sinks", "kv_bias", "sinks_and_kv_bias", "sigmoid"])
def test_the_diagnostics_recorder_sees_the_weights_the_options_give(option):
    """Attention diagnostics (``recording_statistics``) record the weights over the sequence's
    keys as the options make them: the first token's mean weight per head is the formula's."""
    from lengen.evaluation.attention import recording_statistics

    layer, pe = _layer(OPTIONS[option], "rope")
    x = torch.randn(2, LENGTH, D_MODEL, dtype=torch.float64)
    with recording_statistics() as recorded:
        layer(x, pe, torch.arange(LENGTH))
    weights = reference(layer, pe, x, OPTIONS[option], weights_only=True)  # (B, H, T, T)
    expected = weights[..., 0].mean(dim=(0, 2))  # (H,)
    assert_close(torch.tensor(recorded[0].means()["sink_mass"], dtype=torch.float64), expected,
                 atol=1e-6, rtol=1e-6)  # fmt: skip


@pytest.mark.parametrize("option", ["sinks_and_kv_bias", "qk_norm", "gate_elementwise", "sigmoid"])
def test_an_encoder_decoders_cached_decoding_equals_its_full_pass(option):
    from lengen.model import EncoderDecoder

    model = _model(option, "alibi", cls=EncoderDecoder)
    src, tgt = torch.randint(0, 11, (2, 7)), torch.randint(0, 11, (2, 6))
    cache = model.new_cache(6, src)
    pieces = [model.decode(tgt[:, t : t + 1], cache) for t in range(6)]
    assert_close(torch.cat(pieces, 1), model(src, tgt))


@pytest.mark.parametrize("option", [name for name in OPTIONS if NEW[name]])
def test_the_parameter_estimate_grows_by_what_the_option_adds(option):
    """``ModelConfig.parameter_sizes`` (the pre-check's estimate) counts each option's
    parameters exactly: its growth over the default is the built model's."""
    from lengen.model.config import DecoderOnlyConfig

    sizes = dict(d_model=D_MODEL, n_heads=HEADS, n_layers=2, d_ff=32)

    def estimate(**keys):
        return sum(DecoderOnlyConfig.from_keys({**sizes, **keys}).parameter_sizes(11, "v").values())

    def built(**keys):
        model = DecoderOnly(pe=pe_factory("nope"), vocab_size=11, **sizes, **keys)
        return sum(p.numel() for p in model.parameters())

    assert estimate(**KEYS[option]) - estimate() == built(**KEYS[option]) - built()


@pytest.mark.parametrize("option", ["sinks", "kv_bias", "sigmoid"])
def test_attention_maps_show_the_weights_the_options_give(option):
    """``lengen.attention_maps.record_attention`` records one map per layer under the options,
    the sequence's keys' weights as the formula gives them (layer 0 re-derived here)."""
    from lengen.attention_maps import record_attention

    model = _model(option, "rope")
    tokens = torch.randint(0, 11, (2, 9))
    maps = record_attention(model, {"tokens": tokens})
    block = model.stack.blocks[0]
    x = block.norm_attn(model.stack.pe.embed(model.embed(tokens), torch.arange(9)))
    expected = reference(block.attn, model.stack.pe, x, OPTIONS[option], weights_only=True)
    assert len(maps) == 2
    assert_close(maps[0].double(), expected, atol=1e-6, rtol=1e-6)

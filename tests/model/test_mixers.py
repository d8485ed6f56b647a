"""Sequence mixers (``lengen.model.mixers``, docs/models.md): the linear family's chunked and
recurrent forms against an independent float64 loop over time with the transition matrix
α(I − β k kᵀ) (tests/recurrence_reference.py); each mixer's whole forward re-derived from its
parameters; causality, cached decoding, gradients, the refusals, the yamls, and hybrids with every
encoding.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from helpers import CONFIG_DIR, compose_train, unsaved_figures, yaml_choices
from lengen.errors import ConfigError
from lengen.model import DecoderOnly
from lengen.model.attention import MultiHeadAttention
from lengen.model.config import DecoderOnlyConfig, EncoderDecoderConfig, EncoderOnlyConfig
from lengen.model.mixers.build import build_mixer
from lengen.model.mixers.config.base import mixer_config_class, mixer_defaults, plan_entry
from lengen.model.mixers.linear import chunked_form, recurrent_form
from lengen.pe import NoPE
from lengen.preflight import validate
from recurrence_reference import delta_rule_loop

pytestmark = pytest.mark.usefixtures("single_thread")

MIXERS = sorted(path.stem for path in (CONFIG_DIR / "model" / "mixer").glob("*.yaml"))
RECURRENT = [name for name in MIXERS if name != "attention"]
#: the linear family: (delta rule, forget gate)
LINEAR = {"gla": (False, True), "deltanet": (True, False), "gated_deltanet": (True, True)}
#: the recurrences of the linear family, Grazzi et al.'s β in (0, 2) included
VARIANTS = {**LINEAR, "gated_deltanet_negative": (True, True)}


def random_terms(variant: str, length: int = 10, seed: int = 0):
    """q, k, v, β, log α and a start state in float64 (B 2, H 2, dk 3, dv 4)."""
    delta, gated = VARIANTS[variant]
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    q, v = draw(2, 2, length, 3), draw(2, 2, length, 4)
    k = F.normalize(draw(2, 2, length, 3), dim=-1)
    top = 2.0 if variant.endswith("negative") else 1.0
    beta = top * torch.rand(2, 2, length, generator=generator, dtype=torch.float64)
    log_decay = -torch.rand(2, 2, length, generator=generator, dtype=torch.float64)
    state = draw(2, 2, 3, 4)
    return q, k, v, beta if delta else None, log_decay if gated else None, state


@pytest.mark.parametrize("variant", VARIANTS)
def test_chunked_form_equals_the_reference_loop(variant):
    q, k, v, beta, log_decay, state = random_terms(variant)
    expected = delta_rule_loop(q, k, v, beta, log_decay, state)
    got = chunked_form(q, k, v, beta, log_decay, state, chunk_size=4)  # 10 = 4 + 4 + 2
    assert_close(got, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_recurrent_form_equals_the_reference_loop(variant):
    q, k, v, beta, log_decay, state = random_terms(variant)
    assert_close(
        recurrent_form(q, k, v, beta, log_decay, state),
        delta_rule_loop(q, k, v, beta, log_decay, state),
    )


@pytest.mark.parametrize("chunk_size", [1, 3, 16])
@pytest.mark.parametrize("variant", VARIANTS)
def test_chunked_and_recurrent_forms_agree_at_any_chunk_size(variant, chunk_size):
    q, k, v, beta, log_decay, state = random_terms(variant)
    got = chunked_form(q, k, v, beta, log_decay, state, chunk_size=chunk_size)
    assert_close(got, recurrent_form(q, k, v, beta, log_decay, state))


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_sequence_split_in_two_calls_carries_its_state(variant):
    q, k, v, beta, log_decay, state = random_terms(variant)
    whole, final = chunked_form(q, k, v, beta, log_decay, state, chunk_size=4)

    def part(term, piece):
        return None if term is None else term[:, :, piece]

    first, middle = chunked_form(
        *(part(t, slice(0, 6)) for t in (q, k, v, beta, log_decay)), state, chunk_size=4
    )
    second, last = chunked_form(
        *(part(t, slice(6, None)) for t in (q, k, v, beta, log_decay)), middle, chunk_size=4
    )
    assert_close((torch.cat([first, second], dim=2), last), (whole, final))


@pytest.mark.parametrize("variant", VARIANTS)
def test_chunked_forms_backward_is_the_numerical_gradient(variant):
    # the masked exponentials and the triangular solve differentiate as their values do; 3
    # tokens in chunks of 2: a full chunk from the start state, then a short one from the
    # carried state (every branch of chunked_form, at half the numerical Jacobian of 5 tokens)
    terms = random_terms(variant, length=3)
    inputs = [t.detach().requires_grad_() if t is not None else None for t in terms]
    given = [t for t in inputs if t is not None]

    def outputs(*values):
        it = iter(values)
        filled = [next(it) if t is not None else None for t in inputs]
        return chunked_form(*filled[:5], filled[5], chunk_size=2)

    assert torch.autograd.gradcheck(outputs, given)


def test_negative_eigenvalues_flip_a_stored_association():
    # Grazzi et al.: β = 2 on a unit key reflects the memory along it (eigenvalue 1 − β = −1);
    # with β < 1 no eigenvalue is negative
    key = torch.tensor([[[[1.0, 0.0]]]], dtype=torch.float64)  # (1, 1, 1, 2)
    state = torch.tensor([[[[3.0], [5.0]]]], dtype=torch.float64)  # (1, 1, 2, 1): S = [3, 5]ᵀ
    zero = torch.zeros(1, 1, 1, 1, dtype=torch.float64)
    _, after = recurrent_form(key, key, zero, torch.full((1, 1, 1), 2.0).double(), None, state)
    assert_close(after, torch.tensor([[[[-3.0], [5.0]]]], dtype=torch.float64))


# -- each mixer's whole forward, re-derived from its parameters -----------------------------------
def mixer(name: str, d_model: int = 8, n_heads: int = 2, **options):
    """A float64 mixer with every parameter redrawn (biases that start at zero act too)."""
    torch.manual_seed(0)
    plan = plan_entry({"mixer": name, **options}, "model.mixer")
    built = build_mixer(
        plan, d_model=d_model, n_heads=n_heads, dropout=0.0, causal=True, kernel="auto"
    )
    built = built.double()
    with torch.no_grad():
        for parameter in built.parameters():
            parameter.normal_(0.0, 0.5)
    return built


def rederived_linear(module, x, delta, gated, beta_scale):
    """GLA / DeltaNet / Gated DeltaNet from their parameters (docs/models.md), float64."""
    batch, length, d_model = x.shape
    heads, head_dim = module.n_heads, d_model // module.n_heads

    def split(y):  # (B, T, D) -> (B, H, T, hd)
        return y.reshape(batch, length, heads, head_dim).permute(0, 2, 1, 3)

    weights = (module.query.weight, module.key.weight, module.value.weight)
    q, k, v = (x @ w.T for w in weights)  # (B, T, D) each
    if module.conv_size:  # y_t = Σ_i w_i x_{t − (width − 1) + i}, zeros before the start, then SiLU
        width, filters = module.conv_size, module.conv.weight[:, 0].split(d_model)  # (D, w) each
        convolved = []
        for y, taps in zip((q, k, v), filters, strict=True):
            out = torch.zeros_like(y)
            for t in range(length):
                for i in range(width):
                    if t - (width - 1) + i >= 0:
                        out[:, t] += taps[:, i] * y[:, t - (width - 1) + i]
            convolved.append(out * torch.sigmoid(out))
        q, k, v = convolved
    elif delta:
        q, k = (y * torch.sigmoid(y) for y in (q, k))
    q, k, v = split(q), split(k), split(v)
    if delta:
        q, k = (y / y.norm(dim=-1, keepdim=True) for y in (q, k))
    beta = None
    if delta:
        beta = beta_scale / (1 + torch.exp(-(x @ module.beta.weight.T + module.beta.bias)))
        beta = beta.permute(0, 2, 1)
    log_decay = None
    if gated:
        delta_t = torch.log1p(torch.exp(x @ module.decay.weight.T + module.dt_bias))
        log_decay = (-torch.exp(module.a_log) * delta_t).permute(0, 2, 1)
    start = torch.zeros(batch, heads, head_dim, head_dim, dtype=x.dtype)
    y, _ = delta_rule_loop(q / head_dim**0.5, k, v, beta, log_decay, start)
    y = y / torch.sqrt((y * y).mean(-1, keepdim=True) + 1e-5) * module.norm.weight
    y = y.permute(0, 2, 1, 3).reshape(batch, length, d_model)
    gate = x @ module.gate.weight.T
    y = y * gate * torch.sigmoid(gate)
    return y @ module.out.weight.T + module.out.bias


def rederived_lstm(module, x):
    """One LSTM layer written out (gates i, f, g, o, PyTorch's order), then the projection."""
    lstm = module.lstm
    batch, length, d_model = x.shape
    hidden = torch.zeros(batch, d_model, dtype=x.dtype)
    cell = torch.zeros(batch, d_model, dtype=x.dtype)
    outputs = []
    for t in range(length):
        gates = x[:, t] @ lstm.weight_ih_l0.T + lstm.bias_ih_l0 + hidden @ lstm.weight_hh_l0.T
        gates = gates + lstm.bias_hh_l0
        i, f, g, o = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        hidden = torch.sigmoid(o) * torch.tanh(cell)
        outputs.append(hidden)
    return torch.stack(outputs, dim=1) @ module.out.weight.T + module.out.bias


@pytest.mark.parametrize(
    ("name", "options"),
    [("gla", {}), ("deltanet", {}), ("gated_deltanet", {}), ("deltanet", {"negative_eigenvalues": True}),
     ("gla", {"conv_size": 3}), ("deltanet", {"conv_size": 0}), ("gated_deltanet", {"conv_size": 1}),
     ("gated_deltanet", {"negative_eigenvalues": True, "chunk_size": 3}), ("lstm", {})],
)  # fmt: skip
def test_mixer_forward_equals_its_float64_rederivation(name, options):
    module = mixer(name, **options)
    x = torch.randn(2, 7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = module(x, None, None)
        if name == "lstm":
            expected = rederived_lstm(module, x)
        else:
            scale = 2.0 if options.get("negative_eigenvalues") else 1.0
            expected = rederived_linear(module, x, *LINEAR[name], scale)
    assert_close(got, expected)


# -- in a model --------------------------------------------------------------------------------
def model(mixers, n_layers=2, **sizes) -> DecoderOnly:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "n_heads": 2, "d_ff": 32, **sizes}
    return DecoderOnly(
        pe=functools.partial(NoPE), vocab_size=11, n_layers=n_layers, mixers=mixers, **sizes
    ).eval()


def tokens(length, seed=0):
    return torch.randint(0, 11, (2, length), generator=torch.Generator().manual_seed(seed))


STACKS = [[name] for name in RECURRENT] + [["gated_deltanet", "attention"], ["lstm", "gla"]]
IDS = ["+".join(stack) for stack in STACKS]


@pytest.mark.parametrize("mixers", STACKS, ids=IDS)
def test_output_at_t_does_not_depend_on_later_tokens(mixers):
    net = model(mixers)
    before, after = tokens(12), tokens(12)
    after[:, :7] = before[:, :7]
    with torch.no_grad():
        assert_close(net(after)[:, :7], net(before)[:, :7])


@pytest.mark.parametrize("mixers", STACKS, ids=IDS)
def test_cached_decoding_equals_the_full_pass(mixers):
    net = model(mixers)
    sequence = tokens(13)
    with torch.no_grad():
        full = net(sequence)
        cache = net.new_cache(13)
        steps = [net.decode(sequence[:, :5], cache)]  # the prompt, then one token at a time
        steps += [net.decode(sequence[:, t : t + 1], cache) for t in range(5, 13)]
    assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("name", RECURRENT)
def test_decoding_state_stays_the_same_size_as_tokens_arrive(name):
    net = model([name], n_layers=1)
    sequence = tokens(40)
    with torch.no_grad():
        cache = net.new_cache(40)
        net.decode(sequence[:, :1], cache)
        first = state_size(cache.layers[0].self_attention.state)
        for t in range(1, 40):
            net.decode(sequence[:, t : t + 1], cache)
        last = state_size(cache.layers[0].self_attention.state)
    assert last == first


def state_size(state) -> int:
    """Numbers held by a decoding state: a tensor, or a tuple of tensors (or None parts)."""
    parts = state if isinstance(state, tuple) else (state,)
    return sum(part.numel() for part in parts if part is not None)


@pytest.mark.parametrize("mixers", STACKS, ids=IDS)
def test_gradients_reach_every_parameter(mixers):
    net = model(mixers).train()
    net(tokens(9)).logsumexp(-1).sum().backward()
    missing = [n for n, p in net.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def test_mixers_cycle_over_the_layers():
    net = model(["gla", "attention"], n_layers=4)
    kinds = [type(block.attn).__name__ for block in net.stack.blocks]
    assert kinds == ["GatedLinearAttention", "Attention", "GatedLinearAttention", "Attention"]


def test_a_stack_shallower_than_the_list_warns_naming_the_layers_it_uses():
    with pytest.warns(UserWarning, match=r"uses the first 2 of its 4 entries: gla, gla \("):
        model(["gla", "gla", "gla", "attention"], n_layers=2)


def test_default_model_keeps_attention_everywhere():
    net = model(None)
    assert all(isinstance(block.attn, MultiHeadAttention) for block in net.stack.blocks)


# -- options: refused before torch, in one line naming the key ---------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [(["model.mixer=glaa"], f"model.mixer must be one of {', '.join(MIXERS)}; got 'glaa'"),
     (["model.mixers=[gla,{mixer:gla,chunk_size:0}]"], "model.mixers.1.chunk_size must be a positive integer, got 0"),
     (["model.mixers=[{mixer:lstm,window:4}]"], "model.mixers.0.window: LSTMMixer takes no such key; allowed: state_init, state_noise_std, tbptt"),
     (["model.mixer=gla", "model.mixers=[gla]"], "model.mixer=gla and model.mixers disagree"),
     (["model=encoder", "model.mixer=deltanet"], "model.mixer: deltanet reads the tokens left to right")],
)  # fmt: skip
def test_bad_mixer_options_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as refused:
        validate(compose_train(*overrides))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_mixer_refusals_need_no_torch():
    code = (
        "import sys\n"
        "from lengen.model.config import DecoderOnlyConfig\n"
        "try:\n"
        "    DecoderOnlyConfig.from_keys({'mixers': ['gla', 'glaa']}).check()\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        done.stdout.splitlines()[-1] == "False" and "model.mixers.1 must be one of" in done.stdout
    )


@pytest.mark.parametrize("kind", [EncoderOnlyConfig, EncoderDecoderConfig])
def test_attention_still_serves_bidirectional_stacks(kind):
    kind.from_keys({"mixer": "attention"}).check()  # no refusal


def test_recurrent_mixers_serve_the_decoder():
    DecoderOnlyConfig.from_keys({"mixers": RECURRENT}).check()  # no refusal


@pytest.mark.parametrize("name", MIXERS)
def test_mixer_yaml_shows_its_config_classes_defaults(name):
    target = __import__("yaml").safe_load(
        (CONFIG_DIR / "model" / "mixer" / f"{name}.yaml").read_text()
    )["_target_"]
    assert mixer_defaults(name) == mixer_config_class(target).defaults()


# -- composition with every encoding, through the config ------------------------------------------
@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_a_hybrid_builds_and_runs_with_every_encoding(pe):
    from lengen.build import build

    cfg = compose_train(f"pe={pe}", "model.mixers=[gla,attention]")
    data, net, _ = build(cfg)
    logits = net(**data.train_batch(0)["inputs"])
    assert torch.isfinite(logits).all()


def test_a_hybrid_trains_and_evaluates_through_hydra_keys(tmp_path):
    from lengen.train import run

    cfg = compose_train(
        "model.mixers=[gated_deltanet,attention]", "eval.decoding=greedy", "logger=none"
    )
    with unsaved_figures():  # its rows and diagnostics, not its figures
        results = run(cfg, run_dir=tmp_path)
    assert "greedy" in {row["protocol"] for row in results["eval"]}  # decoding through the state
    assert results["attention_diagnostics"]["layers"] == ["1"]  # the attention layer's only


@pytest.mark.parametrize(
    ("overrides", "model_part"),
    [(["model.mixer=gla"], "decoder [gla]"),
     (["model.mixers=[{mixer:gated_deltanet,negative_eigenvalues:true},attention]"],
      "decoder [gated_deltanet(negative_eigenvalues=True), attention]"),
     (["model.mixer=attention"], "decoder")],
)  # fmt: skip
def test_a_runs_label_names_its_mixers(overrides, model_part):
    from lengen.config import run_label

    assert run_label(compose_train(*overrides), "greedy").split(" · ")[1] == model_part


@pytest.mark.parametrize("pe", ["rope", "alibi", "fox"])
def test_an_encoding_with_no_attention_layer_to_act_in_is_refused_in_one_line(pe):
    from lengen.build import build

    with pytest.raises(ConfigError) as refused:
        build(compose_train(f"pe={pe}", "model.mixer=gla"))
    message = str(refused.value)
    assert message.startswith("pe: ") and "no layer attends" in message and "\n" not in message


@pytest.mark.parametrize(
    "overrides",
    [("pe=nope", "model.mixer=gla"), ("pe=sinusoidal", "model.mixer=lstm"),
     ("pe=rope", "model.mixers=[gla,attention]")],
)  # fmt: skip
def test_an_encoding_that_acts_somewhere_is_accepted(overrides):
    from lengen.build import build

    build(compose_train(*overrides))  # no refusal

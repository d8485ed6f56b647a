"""Properties every encoding must have, parametrized across the encodings rather than written
per module: every shipped pe yaml (glob-driven over configs/pe, so a new yaml is covered with no
test edit) builds and runs its hooks, keeps a causal decoder's logits on a prefix equal to the
prefix of longer logits, and on grid data either builds or refuses in one line; the interface's
facts (``has_bias``, ``provides_positions``) and checks hold for each encoding; and every bias
encoding serves one elementwise ``score_bias`` as a dense fp32 block (under bf16 too), passes
gradients to its parameters and trains inside a model.
"""

from __future__ import annotations

import functools

import hydra
import pytest
import torch
from hydra.utils import get_class
from omegaconf import OmegaConf
from torch import Tensor

from helpers import CONFIG_DIR, compose_train, pe_factory, sharpen, yaml_choices
from lengen.build import build
from lengen.model import DecoderOnly, EncoderOnly
from lengen.pe import (
    FIRE,
    KERPLE,
    ALiBi,
    Learned,
    NoPE,
    PositionalEncoding,
    RoPE,
    Sandwich,
    Sinusoidal,
    T5RelativeBias,
)
from lengen.pe.config import grid_encodings

pytestmark = pytest.mark.usefixtures("single_thread")


# -- every shipped pe yaml -------------------------------------------------------------------
PE_CONFIGS = sorted((CONFIG_DIR / "pe").glob("*.yaml"))


def test_pe_configs_are_found():
    assert {path.stem for path in PE_CONFIGS} >= {"nope", "sinusoidal", "learned", "alibi", "rope"}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("path", PE_CONFIGS, ids=lambda path: path.stem)
def test_pe_config_builds_and_runs_hooks(path, causal):
    config = OmegaConf.load(path)
    assert config.pop("name") == path.stem
    factory = hydra.utils.instantiate(config)
    assert isinstance(factory, functools.partial)
    if factory.func.causal_only and not causal:
        with pytest.raises(ValueError, match=r"^pe: .*causal"):
            factory(d_model=32, n_heads=4, causal=causal)
        return
    pe = factory(d_model=32, n_heads=4, causal=causal, train_positions=10, max_positions=40)
    assert isinstance(pe, PositionalEncoding)
    generator = torch.Generator().manual_seed(13)
    x = torch.randn(2, 40, 32, generator=generator)
    assert pe.embed(x, torch.arange(40)).shape == (2, 40, 32)
    q = torch.randn(2, 4, 7, 8, generator=generator)
    k = torch.randn(2, 4, 12, 8, generator=generator)
    rotated_q, rotated_k = pe.rotate(q, k, torch.arange(5, 12), torch.arange(12))
    # q and k keep their leading shapes; their width may grow, alike (PoPE's is 2 · hd)
    assert rotated_q.shape[:-1] == q.shape[:-1] and rotated_k.shape[:-1] == k.shape[:-1]
    assert rotated_q.shape[-1] == rotated_k.shape[-1] >= q.shape[-1]
    if pe.has_bias:
        bias = pe.attention_bias(torch.arange(5, 12), torch.arange(12))
        assert bias.shape == (4, 7, 12)
        assert bias.dtype == torch.float32
    if pe.has_contextual:
        logits = torch.randn(2, 4, 7, 12, generator=generator)
        assert pe.contextual_logits(q, logits).shape == (2, 4, 7, 12)


#: every encoding × log-length scale off/on, and the methods global in length by definition
#: (dynamic NTK, randomized positions or distances), which the test skips with the reason
PREFIX_CASES = [
    (pe, f"pe.log_length_scale={flag}") for pe in yaml_choices("pe") for flag in ("false", "true")
] + [
    ("rope", "pe.scaling=dynamic_ntk", "pe.scaling_factor=2.0"),
    ("rope", "pe.randomized=true", "pe.max_position=64"),
    ("alibi", "pe.randomized=true", "pe.max_position=64"),
]


@pytest.mark.parametrize("options", PREFIX_CASES, ids=lambda case: " ".join(case))
def test_causal_logits_on_a_prefix_equal_the_prefix_of_longer_logits(options):
    """Appending tokens never changes earlier positions' logits: the log-length factor is per
    query. Trained on length 4 (≤ 10 positions), scored at 21 tokens, so the factor acts."""
    pe, *overrides = options
    cfg = compose_train(
        f"pe={pe}",
        "model=decoder",
        "data.len=4",
        "eval.lengths=[10]",
        "model.d_model=16",
        "model.n_layers=2",
        "model.n_heads=2",
        "model.d_ff=32",
        *overrides,
    )
    model = sharpen(build(cfg)[1])
    reason = model.stack.pe.length_global()
    if reason is not None:
        pytest.skip(f"length-global by definition: {reason}")
    assert model.stack.pe.train_positions < 13  # the prefixes already exceed training
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 21), generator=generator)
    full = model(tokens)
    for prefix in (13, 17):
        torch.testing.assert_close(
            model(tokens[:, :prefix]), full[:, :prefix], rtol=1e-4, atol=1e-5
        )


# -- every shipped pe yaml on grid data (axes=2) ---------------------------------------------
def encoding_class(name: str):
    return get_class(OmegaConf.load(CONFIG_DIR / "pe" / f"{name}.yaml")._target_)


def test_the_allowed_list_is_the_yamls_whose_torch_class_supports_axes():
    # grid_encodings reads the config classes without torch; the modules must say the same
    supported = [name for name in yaml_choices("pe") if encoding_class(name).supports_axes]
    assert list(grid_encodings()) == supported


@pytest.mark.parametrize(
    "name", [n for n in yaml_choices("pe") if not encoding_class(n).supports_axes]
)
def test_encodings_without_an_nd_form_refuse_grid_data_in_one_line(name):
    factory = pe_factory(name, train_positions=4, max_positions=8)
    with pytest.raises(ValueError) as error:
        factory(d_model=32, n_heads=4, causal=True, axes=2)
    message = str(error.value)
    assert message.startswith("pe: ") and "\n" not in message
    assert message.endswith("allowed: " + ", ".join(grid_encodings()))


@pytest.mark.parametrize("axes", [2, 3])
@pytest.mark.parametrize("name", [n for n in yaml_choices("pe") if encoding_class(n).supports_axes])
def test_encodings_with_an_nd_form_build_from_their_yaml(name, axes):
    pe = pe_factory(name, train_positions=4, max_positions=8)(
        d_model=48, n_heads=4, causal=False, axes=axes
    )
    assert pe.axes == axes


# -- the interface's facts and checks --------------------------------------------------------
ALL_PES = {
    "nope": NoPE,
    "sinusoidal": Sinusoidal,
    "learned": functools.partial(Learned, train_positions=10, max_positions=40),
    "alibi": ALiBi,
    "rope": RoPE,
}


@pytest.mark.parametrize("name", list(ALL_PES))
def test_has_bias_only_for_alibi(name):
    pe = ALL_PES[name](d_model=32, n_heads=4)
    assert pe.has_bias is (name == "alibi")


@pytest.mark.parametrize("name", list(ALL_PES))
def test_provides_positions_false_only_for_nope(name):
    pe = ALL_PES[name](d_model=32, n_heads=4)
    assert pe.provides_positions is (name != "nope")


@pytest.mark.parametrize("name", list(ALL_PES))
def test_d_model_not_divisible_by_heads_raises(name):
    with pytest.raises(ValueError, match=r"model\.d_model"):
        ALL_PES[name](d_model=30, n_heads=4)


# -- every bias encoding ---------------------------------------------------------------------
NEW_BIAS_PES = {"t5": T5RelativeBias, "kerple": KERPLE, "fire": FIRE, "sandwich": Sandwich}


ALIBI_VARIANTS = {
    f"alibi-{variant}-{'learned' if learned else 'fixed'}": (variant, learned)
    for variant in ("symmetric", "asymmetric_offset", "separate")
    for learned in (False, True)
}


def make(name: str, causal: bool, d_model: int = 32, n_heads: int = 4):
    if name in NEW_BIAS_PES:
        return NEW_BIAS_PES[name](d_model=d_model, n_heads=n_heads, causal=causal)
    variant, learned = ALIBI_VARIANTS[name]
    return ALiBi(
        d_model=d_model,
        n_heads=n_heads,
        causal=causal,
        bidirectional=variant,
        learnable_slopes=learned,
    )


ALL_NAMES = [*NEW_BIAS_PES, *ALIBI_VARIANTS]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_dense_bias_block_shape_and_fp32(name, causal):
    pe = make(name, causal)
    assert pe.has_bias is True
    bias = pe.attention_bias(torch.arange(5, 12), torch.arange(12))
    assert bias.shape == (4, 7, 12)
    assert bias.dtype == torch.float32
    assert torch.isfinite(bias).all()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_score_bias_elementwise_equals_dense_block(name, causal):
    # one definition serves the dense block and a per-element score_mod
    pe = make(name, causal)
    q_positions, k_positions = torch.tensor([0, 3, 40]), torch.tensor([0, 2, 3, 39, 41])
    dense = pe.attention_bias(q_positions, k_positions)
    for h in range(4):
        for a, i in enumerate(q_positions):
            for b, j in enumerate(k_positions):
                value = pe.score_bias(torch.tensor(h), i, j)
                assert value.dtype == torch.float32
                torch.testing.assert_close(value, dense[h, a, b], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_bias_fp32_and_unchanged_under_bf16_autocast(name):
    pe = make(name, causal=False)
    q_positions, k_positions = torch.arange(3000, 3016), torch.arange(3040)
    expected = pe.attention_bias(q_positions, k_positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bias = pe.attention_bias(q_positions, k_positions)
    assert bias.dtype == torch.float32
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_bias_fp32_when_module_cast_to_bf16(name):
    pe = make(name, causal=True).to(torch.bfloat16)
    bias = pe.attention_bias(torch.arange(8), torch.arange(8))
    assert bias.dtype == torch.float32


@pytest.mark.parametrize("name", ["t5", "kerple", "fire", "alibi-separate-learned"])
def test_gradient_reaches_every_parameter(name):
    pe = make(name, causal=False)
    bias = pe.attention_bias(torch.arange(20), torch.arange(20))
    (bias * torch.randn(bias.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
    for parameter_name, parameter in pe.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
        assert parameter.grad.abs().sum() > 0, parameter_name


def build_and_run(model_kind: str, encoding) -> tuple[torch.nn.Module, Tensor]:
    """A tiny model of the given kind with the encoding, and its logits on random tokens."""
    torch.manual_seed(0)
    cls = DecoderOnly if model_kind == "decoder" else EncoderOnly
    model = cls(pe=encoding, vocab_size=11, d_model=32, n_layers=2, n_heads=4, d_ff=64)
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    return model, model(tokens)


@pytest.mark.parametrize("model_kind", ["decoder", "encoder"])
@pytest.mark.parametrize("name", ["t5", "kerple", "fire", "sandwich"])
def test_model_trains_through_new_bias(name, model_kind):
    model, logits = build_and_run(model_kind, NEW_BIAS_PES[name])
    assert torch.isfinite(logits).all()
    logits.square().mean().backward()
    for parameter_name, parameter in model.stack.pe.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), parameter_name

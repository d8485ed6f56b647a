"""Canon layers (lengen.model.canon): the convolution against a float64 re-derivation of the
reference's sum, causality, decoding with the remembered inputs equal to the full pass,
gradients, the residual, and the torch-free ``model.canon`` rule."""

from __future__ import annotations

import pytest
import torch

from lengen.model.canon import Canon, CanonState, causal_depthwise_conv
from lengen.model.canon_config import canon_points

CHANNELS, KERNEL = 6, 4


def inputs(length: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(2, length, CHANNELS, generator=torch.Generator().manual_seed(seed))


def layer() -> Canon:
    torch.manual_seed(0)
    return Canon(CHANNELS, KERNEL)


def test_convolution_equals_a_float64_rederivation_of_the_reference_sum():
    canon = layer()
    x = inputs(9)
    weight, xd = canon.weight.detach().double(), x.double()
    expected = xd.clone()  # residual
    for t in range(9):
        for j in range(KERNEL):
            source = t - KERNEL + 1 + j  # the reference: K − 1 zeros padded on the left
            if source >= 0:
                expected[:, t] += weight[:, j] * xd[:, source]
    torch.testing.assert_close(canon(x).double(), expected, rtol=1e-6, atol=1e-6)


def test_output_at_t_does_not_depend_on_later_tokens():
    canon = layer()
    x = inputs(8)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, 3, CHANNELS)
    torch.testing.assert_close(canon(changed)[:, :5], canon(x)[:, :5])


def test_decoding_with_the_remembered_inputs_equals_the_full_pass():
    canon = layer()
    x = inputs(10)
    state = CanonState()
    pieces = [canon(x[:, :3], state), canon(x[:, 3:4], state), canon(x[:, 4:6], state)]
    pieces += [canon(x[:, t : t + 1], state) for t in range(6, 10)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), canon(x))


def test_state_keeps_the_last_kernel_minus_one_inputs():
    canon = layer()
    x = inputs(6)
    state = CanonState()
    canon(x, state)
    torch.testing.assert_close(state.history, x[:, -(KERNEL - 1) :])


def test_gradient_reaches_the_weights():
    canon = layer()
    canon(inputs(5)).square().sum().backward()
    assert canon.weight.grad is not None and canon.weight.grad.abs().min() > 0


def test_zero_weights_are_the_identity():
    x = inputs(5)
    torch.testing.assert_close(causal_depthwise_conv(x, torch.zeros(CHANNELS, KERNEL)), 0 * x)


@pytest.mark.parametrize(
    ("value", "points"),
    [("DCA", "ACD"), (["B", "A"], "AB"), ("", ""), (None, ""), ("ABCD", "ABCD")],
)
def test_canon_points_accept_letters_as_a_string_or_a_list(value, points):
    assert canon_points("model.canon", value) == points


@pytest.mark.parametrize("value", ["E", "AA", 4, ["A", 1], "abcd"])
def test_canon_points_refuse_other_values_in_one_line_naming_the_key(value):
    with pytest.raises(ValueError, match=r"^model\.canon must be letters from ABCD") as error:
        canon_points("model.canon", value)
    assert "\n" not in str(error.value)


# -- in the model (model.canon) ----------------------------------------------------------------
def canon_model(kind: str = "decoder", points: str = "ABCD"):
    from helpers import tiny_model

    torch.manual_seed(0)
    override = f"model.canon={points}" if points else "model.canon=''"
    return tiny_model("rope", kind, override).eval()


def test_the_default_model_has_no_canon_weights():
    assert not [name for name in canon_model(points="").state_dict() if "canon" in name]


def test_each_point_adds_its_layer_in_every_block():
    names = {
        name: tuple(p.shape) for name, p in canon_model().named_parameters() if "canon" in name
    }
    assert names["stack.blocks.0.canon.A.weight"] == (16, 4)  # d_model 16 (helpers.TINY)
    assert names["stack.blocks.1.attn.canon_qkv.weight"] == (48, 4)  # q, k, v
    assert "stack.blocks.1.canon.C.weight" in names
    assert names["stack.blocks.0.canon.D.weight"][1] == 4


def test_a_canon_model_is_causal():
    model = canon_model()
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 9))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % model.embedding.num_embeddings
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :6], model(tokens)[:, :6])


@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_cached_decoding_of_a_canon_model_equals_the_full_pass(kind):
    model = canon_model(kind)
    vocab = model.embedding.num_embeddings
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, vocab, (2, 9), generator=generator)
    with torch.no_grad():
        if kind == "decoder":
            full, cache = model(tokens), model.new_cache(9)
        else:
            source = torch.randint(0, vocab, (2, 5), generator=generator)
            full, cache = model(source, tokens), model.new_cache(9, source)
        pieces = [model.decode(tokens[:, :4], cache), model.decode(tokens[:, 4:5], cache)]
        pieces += [model.decode(tokens[:, 5:7], cache), model.decode(tokens[:, 7:], cache)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


def test_gradients_reach_every_canon_weight():
    model = canon_model().train()
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 7))
    model(tokens).square().mean().backward()
    for name, parameter in model.named_parameters():
        if "canon" in name:
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_the_model_config_refuses_other_points_naming_the_key():
    from lengen.model.config import DecoderOnlyConfig

    with pytest.raises(ValueError, match=r"^model\.canon must be letters from ABCD"):
        DecoderOnlyConfig.from_keys({"canon": "AE"}, owner="DecoderOnly")


def test_the_size_estimate_counts_every_canon_weight():
    from lengen.model.config import DecoderOnlyConfig

    def estimate(points: str) -> int:
        keys = {"d_model": 16, "d_ff": 24, "n_layers": 3, "canon": points}
        return sum(DecoderOnlyConfig.from_keys(keys).parameter_sizes(10, "vocab").values())

    # per layer 4 taps on A 16 + B 48 + C 16 + D 24 channels
    assert estimate("ABCD") - estimate("") == 3 * 4 * (16 + 48 + 16 + 24)


def test_canon_b_without_an_attention_layer_is_refused_naming_the_key():
    from lengen.model.config import DecoderOnlyConfig

    config = DecoderOnlyConfig.from_keys({"canon": "AB", "mixer": "gla"}, owner="DecoderOnly")
    with pytest.raises(ValueError, match=r"^model\.canon=AB: B acts on attention's q, k, v"):
        config.check()

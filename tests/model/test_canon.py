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

"""ReRoPE and Leaky ReRoPE (``pe.extension=rerope``, lengen.pe.rerope) against Su's formulas:
the relative position i − j below the window w, w beyond it (ReRoPE), or w + (i − j − w)/k
(Leaky ReRoPE, ``pe.rerope_leak`` = k)."""

from __future__ import annotations

import pytest
import torch

from extension_reference import arm_output, random_qkv, relative_attention
from lengen.pe.config.base import EncodingContext
from lengen.pe.config.rope import RoPEConfig

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("window", [1, 3, 6])
def test_rerope_equals_the_clamped_formula(window):
    q, k, v = random_qkv()
    expected = relative_attention(q, k, v, lambda i, j: min(i - j, window))
    actual = arm_output(q, k, v, extension="rerope", rerope_window=window)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("window", "leak"), [(3, 2.0), (4, 16.0), (2, 1.5)])
def test_leaky_rerope_equals_the_leaky_formula(window, leak):
    q, k, v = random_qkv()

    def relative(i, j):
        return i - j if i - j < window else window + (i - j - window) / leak

    expected = relative_attention(q, k, v, relative)
    actual = arm_output(q, k, v, extension="rerope", rerope_window=window, rerope_leak=leak)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_rerope_keeps_the_half_layout():
    q, k, v = random_qkv()
    expected = relative_attention(q, k, v, lambda i, j: min(i - j, 4), layout="half")
    actual = arm_output(q, k, v, extension="rerope", rerope_window=4, layout="half")
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_the_window_is_required():
    with pytest.raises(ValueError, match=r"^pe\.rerope_window must be set"):
        RoPEConfig(extension="rerope").check(EncodingContext(8, 2), "RoPE")


def test_a_leak_below_one_is_refused():
    with pytest.raises(ValueError, match=r"^pe\.rerope_leak must be a number >= 1"):
        RoPEConfig.from_keys({"extension": "rerope", "rerope_window": 2, "rerope_leak": 0.5})

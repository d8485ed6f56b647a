"""The chunked form's short cuts (``lengen.model.mixers.linear.chunked_form``, #49's step time):
from no start state and without a gate it skips the terms that are exactly 0 or 1, leaves the
solve's unread triangle unmasked and returns one chunk uncopied. The values and gradients are
the recurrence's (tests/recurrence_reference.py's float64 loop over time, from a zero state),
and the skipped work is not done (counted with the profiler)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from lengen.model.mixers.linear import chunked_form
from recurrence_reference import delta_rule_loop

pytestmark = pytest.mark.usefixtures("single_thread")

#: (delta rule, forget gate, β's top): GLA, DeltaNet, Gated DeltaNet, and Grazzi et al.'s β ≤ 2
VARIANTS = {
    "gla": (False, True, 1.0),
    "deltanet": (True, False, 1.0),
    "gated_deltanet": (True, True, 1.0),
    "deltanet_negative": (True, False, 2.0),
}


def terms(variant: str, length: int, seed: int = 0):
    """q, k (unit), v, β, log α in float64 (B 2, H 2, dk 3, dv 4); None where the variant has
    no such term."""
    delta, gated, top = VARIANTS[variant]
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    q, k, v = (
        draw(2, 2, length, 3),
        F.normalize(draw(2, 2, length, 3), dim=-1),
        draw(2, 2, length, 4),
    )
    beta = top * torch.rand(2, 2, length, generator=generator, dtype=torch.float64)
    log_decay = -torch.rand(2, 2, length, generator=generator, dtype=torch.float64)
    return q, k, v, beta if delta else None, log_decay if gated else None


@pytest.mark.parametrize("chunk_size", [16, 4, 1])  # one chunk (the training size), several
@pytest.mark.parametrize("variant", VARIANTS)
def test_chunked_form_from_no_state_equals_the_loop_from_zero(variant, chunk_size):
    q, k, v, beta, log_decay = terms(variant, length=10)
    got = chunked_form(q, k, v, beta, log_decay, None, chunk_size=chunk_size)
    assert_close(got, delta_rule_loop(q, k, v, beta, log_decay))


@pytest.mark.parametrize("chunk_size", [8, 2])
@pytest.mark.parametrize("variant", VARIANTS)
def test_chunked_form_from_no_state_has_the_numerical_gradient(variant, chunk_size):
    # the solve's diagonal and upper triangle are left unmasked: its gradient must still reach
    # only the strictly lower part, which k kᵀ's gradient then carries
    given = [t.requires_grad_() for t in terms(variant, length=6) if t is not None]

    def outputs(*values):
        it = iter(values)
        filled = [None if t is None else next(it) for t in terms(variant, length=6)]
        return chunked_form(*filled, None, chunk_size=chunk_size)

    assert torch.autograd.gradcheck(outputs, given)


def aten_calls(run) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    return [event.name for event in prof.events()]


def test_one_ungated_chunk_from_no_state_forms_no_exponential_and_no_state_product():
    # DeltaNet at the default training size: the decay would be exp(0) = 1 and the start
    # state's products 0, so the chunk is k kᵀ, q kᵀ, their product with the solve's values
    # and the state update k W: four batched products and no exponential
    q, k, v, beta, _ = terms("deltanet", length=8)
    calls = aten_calls(lambda: chunked_form(q, k, v, beta, None, None, chunk_size=8))
    assert calls.count("aten::exp") == 0
    assert calls.count("aten::bmm") == 4
    assert calls.count("aten::cat") == 0  # one chunk: its output as it is

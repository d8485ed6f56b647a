"""Training-length curricula: the length of each step's batch, a pure function of (seed, step).

``data.curriculum`` picks one; every length lies in ``data.min_len … data.len``:

* ``uniform`` (default): uniform over min_len … len at every step.
* ``fixed``: always len (the Chomsky-hierarchy code's ``FixedCurriculum``).
* ``regular_increase``: the longest allowed length grows linearly with the step, from min_len at
  step 0 to len over ``trainer.max_steps`` (each of the K = len − min_len + 1 maxima holds for
  max_steps / K steps); the step's length is uniform in min_len … that maximum. This is the
  reference's ``RegularIncreaseCurriculum(initial_sequence_length=min_len, increase_amount=1,
  increase_frequency=max_steps / K, sample_all_length=True)``.
* ``reverse_exponential``: P(length = l) ∝ tau^(l − min_len), 0 < tau <= 1 (``data.curriculum_tau``),
  so shorter lengths are exponentially more likely; the reference's
  ``ReverseExponentialCurriculum`` (P ∝ tau^l over its list of lengths, the same distribution).

Reference: google-deepmind/neural_networks_chomsky_hierarchy, training/curriculum.py (Delétang
et al. 2023), reused unchanged by google-deepmind/randomized_positional_encodings,
experiments/curriculum.py (Ruoss et al. 2023).
"""

from __future__ import annotations

from lengen.lazy import torch

#: ``data.curriculum``'s choices (checked by ``lengen.data.task_data.TaskDataConfig``)
CURRICULA = ("uniform", "fixed", "regular_increase", "reverse_exponential")


def longest_allowed(step: int, min_len: int, max_len: int, max_steps: int) -> int:
    """regular_increase: the maximum length at this step (min_len at 0, max_len at the end)."""
    levels = max_len - min_len + 1
    return min_len + min(levels - 1, levels * max(step, 0) // max_steps)


def reverse_exponential_probabilities(min_len: int, max_len: int, tau: float) -> torch.Tensor:
    """P(length) for min_len … max_len -> (max_len − min_len + 1,) float64, summing to 1."""
    exponents = torch.arange(max_len - min_len + 1, dtype=torch.float64)
    weights = torch.as_tensor(tau, dtype=torch.float64) ** exponents
    return weights / weights.sum()


def curriculum_length(
    name: str,
    generator: torch.Generator,
    step: int,
    min_len: int,
    max_len: int,
    *,
    tau: float = 0.9,
    max_steps: int | None = None,
) -> int:
    """The training length of this step; ``generator`` is seeded from (seed, step) by the caller."""
    if name == "uniform":  # the draw every run made before curricula existed: keep it exact
        return int(torch.randint(min_len, max_len + 1, (1,), generator=generator))
    if name == "fixed":
        return max_len
    if name == "regular_increase":
        top = longest_allowed(step, min_len, max_len, max_steps)
        return int(torch.randint(min_len, top + 1, (1,), generator=generator))
    if name == "reverse_exponential":
        probabilities = reverse_exponential_probabilities(min_len, max_len, tau)
        return min_len + int(torch.multinomial(probabilities, 1, generator=generator))
    raise ValueError(f"data.curriculum must be one of {', '.join(CURRICULA)}; got {name!r}")

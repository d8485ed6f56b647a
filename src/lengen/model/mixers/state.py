"""Training interventions on a recurrent mixer's state (Buitrago Ruiz & Gu, ICML 2025,
"Understanding and Improving Length Generalization in Recurrent Models", arXiv 2507.02782).

Their "unexplored states hypothesis": a recurrent model fails past its training length when
training shows it only the states reachable from h₋₁ = 0 within T tokens. Each intervention
widens the states trained on by changing the initial state h₋₁ of every training sequence (the
options: ``lengen.model.mixers.config.state``; docs/models.md "Training the state"):

* ``noise`` — "Random Noise": h₋₁ i.i.d. N(0, σ²), one σ for every layer and head;
* ``fitted_noise`` — "Fitted Noise": h₋₁ i.i.d. Gaussian per layer and head with the mean and
  standard deviation of the final states recorded in training (lengen: the last training
  batch's; the first batch starts from zero);
* ``passing`` — "State Passing": "the final state of a previous (unrelated) sequence": lengen's
  task batches are i.i.d., so row i of a batch starts from row i's final state of the previous
  training batch, detached (rows cycled if the batch size changed; the first batch from zero);
* ``tbptt`` — "Truncated Backpropagation Through Time": "split a long sequence into smaller
  chunks, and use the final state of each chunk as the initial state of the next one ...
  equivalent to processing the whole sequence, yet stopping the gradient propagation between
  chunks": the forward values are the full pass's, the gradient stops at every ``tbptt``
  tokens, in this layer's state (its short convolution's tail included).

Only in training (``module.training``, no decoding cache): evaluation, validation and decoding
start from zero and are deterministic. The noise draws from torch's global generator, which
lengen seeds from (seed, step) every training step, so a resumed run draws the same. What a
mixer's state is, each says (``RecurrentMixer.memory_of`` / ``with_memory`` /
``memory_shapes``). The recorded states are plain attributes, not buffers, so the weights'
keys stay as they were; a checkpoint carries them beside the weights (``carried_states``,
written and read by ``lengen.lit``), so a resumed run's next batch starts where the
uninterrupted run's would.
Quotations: the authors' post ``goombalab/goombalab.github.io``
``_posts/2025-07-06-improving-length-generalization.md`` (the paper's own text is not stored).
"""

from __future__ import annotations

import torch
from torch import Tensor


class TrainingState:
    """One recurrent layer's interventions and what they remember between training batches."""

    def __init__(self, init: str = "zero", noise_std: float | None = None, tbptt=None) -> None:
        self.init, self.noise_std, self.tbptt = init, noise_std, tbptt
        # the last training batch's final states (detached), or their per-head (mean, std)
        self.passed: tuple[Tensor, ...] | None = None
        self.fitted: tuple[tuple[Tensor, Tensor], ...] | None = None

    @property
    def active(self) -> bool:
        return self.init != "zero" or self.tbptt is not None

    def initial(self, mixer, x: Tensor):
        """The mixer's state before a training batch x (B, T, D); None: zeros, as before."""
        batch = x.shape[0]
        if self.init == "noise":
            shapes = mixer.memory_shapes(batch)
            dtype = mixer.memory_dtype(x)
            noise = [torch.randn(shape, device=x.device, dtype=dtype) for shape in shapes]
            return mixer.with_memory(tuple(self.noise_std * n for n in noise))
        if self.init == "fitted_noise" and self.fitted is not None:
            drawn = []
            for shape, (mean, std) in zip(mixer.memory_shapes(batch), self.fitted, strict=True):
                per_head = (1, -1) + (1,) * (len(shape) - 2)  # (1, H, 1, …): broadcast by head
                noise = torch.randn(shape, device=x.device, dtype=mean.dtype)
                mean, std = mean.to(x.device), std.to(x.device)  # (a checkpoint's: on the CPU)
                drawn.append(mean.view(per_head) + std.view(per_head) * noise)
            return mixer.with_memory(tuple(drawn))
        if self.init == "passing" and self.passed is not None:
            rows = torch.arange(batch) % self.passed[0].shape[0]
            return mixer.with_memory(tuple(tensor[rows].to(x.device) for tensor in self.passed))
        return None

    def record(self, mixer, state) -> None:
        """Keep what the next training batch starts from: the final states, detached."""
        memory = tuple(tensor.detach() for tensor in mixer.memory_of(state))  # each (B, H, …)
        if self.init == "passing":
            self.passed = memory
        elif self.init == "fitted_noise":  # per head: over the batch and the state's entries
            self.fitted = tuple(
                (t.transpose(0, 1).flatten(1).mean(1), t.transpose(0, 1).flatten(1).std(1))
                for t in memory
            )

    def run(self, mixer, x: Tensor) -> Tensor:
        """A training pass of ``mixer`` over x (B, T, D) -> (B, T, D) under the interventions."""
        state = self.initial(mixer, x)
        step = self.tbptt or x.shape[1]
        outputs = []
        for start in range(0, x.shape[1], step):
            if start:  # truncation: the next segment's state carries no gradient
                state = _detached(state)
            y, state = mixer.mix(x[:, start : start + step], state, decoding=False)
            outputs.append(y)  # (B, segment, D)
        self.record(mixer, state)
        return torch.cat(outputs, dim=1)


def carried_states(model) -> dict[str, dict]:
    """What the model's layers carry from one training batch to the next, by module name
    (empty without ``passing`` or ``fitted_noise``, or before the first batch): for a
    checkpoint."""
    carried = {}
    for name, module in model.named_modules():
        held = getattr(module, "interventions", None)
        if isinstance(held, TrainingState) and (held.passed or held.fitted) is not None:
            carried[name] = {"passed": held.passed, "fitted": held.fitted}
    return carried


def restore_carried_states(model, carried: dict[str, dict]) -> None:
    """Put back what ``carried_states`` took (a checkpoint's), by module name."""
    modules = dict(model.named_modules())
    for name, held in carried.items():
        state = modules[name].interventions
        state.passed, state.fitted = held["passed"], held["fitted"]


def _detached(state):
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, (tuple, list)):
        return type(state)(_detached(part) for part in state)
    return state  # None: a part the mixer does not have (no convolution)

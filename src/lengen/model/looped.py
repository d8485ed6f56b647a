"""Depth of a stack: its blocks run once (``Depth``), or K times with tied weights (``Looped``).

A looped stack (``model.loops=K``, ``model.loop_rule``; docs/models.md "Looped depth") is the
looped Transformer of Fan et al., "Looped Transformers for Length Generalization" (ICLR 2025,
arXiv 2409.15647): the stack's blocks M are one weight-tied unit, applied K times with the
embedded input e injected before each application,

    h_0 = 0,    h_{i+1} = M(h_i + e + s_i)    (i = 0 … K−1),    output = norm(h_K)

so loop 1 is the unlooped model (M(e)) up to the step term s_i. s_i is a per-loop step
embedding, as the time-dependent looped models of Xu & Sato ("On Expressive Power of Looped
Transformers: Theoretical Analysis and Enhancement via Timestep Encoding", arXiv 2410.01405;
code read: ``kevin671/timestep-encoding``, ``nanoGPT/model.py``, ``TimestepEmbedder``) use:
sinusoidal features of the loop index through a two-layer SiLU MLP. Theirs modulates the
block's norms (DiT's adaLN: a scale and a gate per loop); ours adds s_i to the loop's input, as
a position signal over depth, which keeps lengen's blocks unchanged. The sinusoid of the index,
not a table of K rows, is what lets a loop count grow past the trained one at evaluation.

The loop count (``ModelConfig.loop_count``) is K under ``fixed`` and ceil(K · T / T_train) at a
sequence of T tokens under ``linear`` (T_train: the training sequence's, ``pe.train_positions``),
Fan et al.'s steps tied to the length, in training and evaluation alike. Under ``linear`` the
count is length-global: a causal model's output at t depends on the sequence's total length T,
not only on tokens ≤ t. Cached decoding keeps this exact: the count is fixed once per sequence
from the cache's ``total_length`` (the N of the full pass it reproduces), and each (loop,
block) pair has its own layer cache, since the keys of loop i are not those of loop j.

Every loop calls each block with its encoding (``pe.for_layer(index)``): rotations and logit
biases act in every loop; an encoding added to the embeddings (sinusoidal, learned) is part of
e, so it is injected in every loop too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from lengen.pe.sinusoidal import sinusoidal_table


class Depth(nn.Module):
    """The blocks run once, in order: the stack as it is without loops (no parameters)."""

    def loops_at(self, tokens: int) -> int:
        """Passes through the blocks at a sequence of ``tokens`` tokens."""
        return 1

    def evaluation_passes(self, tokens: int) -> int:
        """Passes through the blocks that evaluating one sequence of ``tokens`` tokens costs
        (for the evaluation's time estimate, ``lengen.estimate.eval_flops``)."""
        return self.loops_at(tokens)

    def forward(
        self,
        blocks: Sequence[nn.Module],
        layer_pe: Callable,
        x: Tensor,
        positions: Tensor,
        memory: Tensor | None = None,
        layers: Sequence | None = None,
        tokens: int | None = None,
    ) -> Tensor:
        # x: (B, T, D) embedded input -> (B, T, D); layers: one cache per block while decoding
        for index, block in enumerate(blocks):
            cache = None if layers is None else layers[index]
            x = block(x, layer_pe(index), positions, memory, cache)
        return x


class StepEmbedding(nn.Module):
    """s_i: sinusoidal features of the loop index i (``sinusoidal_table``'s interleaved sin/cos,
    base 10000) through Linear-SiLU-Linear, as a diffusion model embeds its timestep."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.mlp = nn.Sequential(
            nn.Linear(d_model, d_model), nn.SiLU(), nn.Linear(d_model, d_model)
        )

    def forward(self, loop: int, like: Tensor) -> Tensor:
        # -> (D,), in the dtype and on the device of ``like``
        table = sinusoidal_table(loop + 1, self.d_model).to(like.device)  # (loop + 1, D)
        weight = self.mlp[0].weight
        return self.mlp(table[loop].to(weight.dtype)).to(like.dtype)


class Looped(Depth):
    """The blocks as one weight-tied unit run ``loop_count(T)`` times, input injected each time.

    ``loop_count``: tokens -> loops (``ModelConfig.loop_count`` bound to the training length),
    the one place that decides the count, unless an evaluation has fixed it (``forced``, set by
    ``loops_forced``: ``loop_rule=confidence``'s choice). ``rule`` and ``extra``: the model's
    ``loop_rule`` and ``loop_extra``, which evaluation reads (``lengen.evaluation.loop_choice``)."""

    def __init__(
        self,
        d_model: int,
        loop_count: Callable[[int], int],
        rule: str = "fixed",
        extra: int = 0,
    ) -> None:
        super().__init__()
        self.loop_count = loop_count
        self.step = StepEmbedding(d_model)
        self.rule, self.extra = rule, extra
        self.forced: int | None = None  # a count every pass uses, whatever its length

    def loops_at(self, tokens: int) -> int:
        return self.loop_count(tokens) if self.forced is None else self.forced

    def evaluation_passes(self, tokens: int) -> int:
        # confidence: every count K = 1 … K_max scored in a pass of K loops, then the length at
        # the count chosen (≤ K_max): a loop_extra of 10^8 evaluated "4 s" by the estimate and
        # ran for ever (#51 kept-back KB23)
        if self.rule != "confidence" or self.forced is not None:
            return self.loops_at(tokens)
        most = self.loops_at(tokens) + self.extra
        return most * (most + 1) // 2 + most

    def forward(self, blocks, layer_pe, x, positions, memory=None, layers=None, tokens=None):
        # x: (B, T, D) embedded input e; tokens: the sequence's total length (cached decoding
        # feeds T < N tokens of an N-token sequence), by default T
        loops = self.loops_at(x.shape[1] if tokens is None else tokens)
        hidden = torch.zeros_like(x)  # h_0 = 0, (B, T, D)
        for loop in range(loops):
            hidden = hidden + x + self.step(loop, x)  # input injection: (B, T, D) + (D,)
            for index, block in enumerate(blocks):
                cache = None if layers is None else layers[loop * len(blocks) + index]
                hidden = block(hidden, layer_pe(index), positions, memory, cache)
        return hidden


def evaluation_passes(model: nn.Module, tokens: int) -> int:
    """Passes through its blocks that evaluating one sequence of ``tokens`` tokens costs
    ``model`` (the largest of its stacks': an encoder–decoder's two): 1 without loops."""
    depths = [module for module in model.modules() if isinstance(module, Depth)]
    return max((depth.evaluation_passes(tokens) for depth in depths), default=1)


def looped_depth(model: nn.Module) -> Looped | None:
    """The model's looped stack; None for an unlooped model and for one of two looped stacks
    (an encoder–decoder), which no single count describes."""
    looped = [module for module in model.modules() if isinstance(module, Looped)]
    return looped[0] if len(looped) == 1 else None


@contextlib.contextmanager
def loops_forced(depth: Looped, loops: int) -> Iterator[None]:
    """Every pass (full and cached) of ``depth`` runs ``loops`` times inside the block, the
    count its own rule gives again after it (even when the block raises)."""
    before, depth.forced = depth.forced, loops
    try:
        yield
    finally:
        depth.forced = before


def loop_facts(model: nn.Module, tokens: int) -> dict:
    """What a results row adds for a looped model: ``loops``, the passes its looped stack makes
    over a sequence of ``tokens`` tokens (under ``linear`` a function of the length: the row
    says how much depth it was scored with). Nothing for an unlooped model, whose rows stay as
    they were, nor for an encoder–decoder, whose two stacks see sequences of other lengths."""
    depth = looped_depth(model)
    return {} if depth is None else {"loops": depth.loops_at(tokens)}


def last_loop(model: nn.Module, calls: list, tokens: int) -> list:
    """Of the attention calls recorded over one pass of ``tokens`` tokens, those of the last
    loop (a looped stack attends once per loop; the last loop makes the output), in call order;
    every call for an unlooped model. What attention diagnostics and maps show per layer."""
    loops = loop_facts(model, tokens).get("loops", 1)
    if loops > 1 and len(calls) % loops == 0:
        return calls[len(calls) - len(calls) // loops :]
    return calls

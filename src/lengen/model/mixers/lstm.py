"""An LSTM layer as a block's mixer: the recurrent baseline of Delétang et al. 2023 ("Neural
Networks and the Chomsky Hierarchy", ICLR 2023) beside the Transformer's rows.

One ``torch.nn.LSTM`` layer (Hochreiter & Schmidhuber 1997; PyTorch's gate equations) of width
d_model, then an output projection, inside lengen's pre-LN block (the block keeps its MLP and
residuals: one "layer" is LSTM + MLP, as each Transformer layer is attention + MLP; Delétang et
al.'s LSTM has no MLP between layers). Training runs the whole sequence through the LSTM's own
loop (fused on GPU); decoding feeds it the new tokens with the (h, c) kept from the earlier ones.
It has no parallel form: its gates are nonlinear in the state.
"""

from __future__ import annotations

from torch import Tensor, nn

from lengen.model.mixers.base import RecurrentMixer
from lengen.model.mixers.config.lstm import LSTMMixerConfig


class LSTMMixer(RecurrentMixer):
    Options = LSTMMixerConfig

    def __init__(self, *, d_model, n_heads, **ignored) -> None:
        super().__init__(d_model=d_model, n_heads=n_heads, **ignored)
        self.lstm = nn.LSTM(d_model, d_model, batch_first=True)
        self.out = nn.Linear(d_model, d_model)

    def memory_shapes(self, batch: int) -> list[tuple[int, ...]]:
        return [(batch, 1, self.d_model)] * 2  # h and c, one "head" each

    def memory_of(self, state) -> tuple[Tensor, ...]:
        return tuple(part.transpose(0, 1) for part in state)  # (1, B, D) -> (B, 1, D)

    def with_memory(self, memory: tuple[Tensor, ...]):
        return tuple(part.transpose(0, 1).contiguous() for part in memory)  # (h, c)

    def mix(self, x: Tensor, state, decoding: bool):
        y, state = self.lstm(x, state)  # (B, T, D); state: (h, c), each (1, B, D)
        return self.out(y), state

"""Pre-LayerNorm Transformers: decoder-only, encoder-only and encoder–decoder.

Each stack owns one positional encoding, built from the factory the run passes in (a partial
that still needs ``d_model``, ``n_heads`` and ``causal``), and calls all three of its hooks:
``embed`` on the input, ``rotate`` and the logit bias in every self-attention layer. The
constructors take plain arguments so tests build models without Hydra.

Token embeddings start at std d^-1/2 and are scaled by √d_model in the forward pass (Vaswani et
al., §3.4), so tokens and added position signals (sinusoidal, learned) start at the same
magnitude. With tied embeddings the final hidden state is scaled by d^-1/2 before the shared
projection (as T5 does): otherwise each token's logit for itself starts near √d_model and the
initial loss is several times ln(vocab).

Causal models also decode incrementally: ``new_cache(total_length)`` then ``decode(tokens,
cache)`` a few tokens at a time gives the logits that ``forward`` gives over the whole sequence
(``lengen.model.cache``). The training path (``forward``) takes no cache and does no extra work.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from torch import Tensor, nn

from lengen.model import config
from lengen.model.attention import MultiHeadAttention
from lengen.model.block_config import AttentionOptions, attention_options
from lengen.model.block_options import check_encoding
from lengen.model.cache import DecodingCache, LayerCache
from lengen.model.canon import Canon, CanonState
from lengen.model.kernels import choose_kernel
from lengen.model.looped import Depth, Looped
from lengen.model.mixers.base import RecurrentMixer
from lengen.model.mixers.build import build_mixer, check_encoding_reaches
from lengen.model.mixers.config.base import MixerPlan, layer_plans
from lengen.pe.base import PositionalEncoding

PEFactory = Callable[..., PositionalEncoding]


class Block(nn.Module):
    """Pre-LN block: self-attention (or another mixer), optional cross-attention, GELU MLP."""

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff,
        dropout,
        causal,
        cross_attention=False,
        attention="auto",
        mixer: MixerPlan | None = None,
        options: AttentionOptions | None = None,
        *,
        canon: str = "",
    ):
        super().__init__()
        self.norm_attn = nn.LayerNorm(d_model)
        # the sequence mixer (model.mixer / model.mixers; lengen.model.mixers), attention when
        # none is given; called attn whatever it is, so checkpoints keep their keys
        self.attn = (
            MultiHeadAttention(
                d_model, n_heads, dropout, causal=causal, cross=False, kernel=attention
            )
            if mixer is None
            else build_mixer(
                mixer,
                d_model=d_model,
                n_heads=n_heads,
                dropout=dropout,
                causal=causal,
                kernel=attention,
            )
        )
        if options is not None and isinstance(self.attn, MultiHeadAttention):
            self.attn.use_options(options)  # model.attn_gate, attn_sinks, …: attention layers
        self.cross_attn = None
        if cross_attention:
            self.norm_cross = nn.LayerNorm(d_model)
            self.cross_attn = MultiHeadAttention(
                d_model, n_heads, dropout, causal=False, cross=True, kernel=attention
            )
        self.norm_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        # model.canon (lengen.model.canon): A and C on the normed inputs of attention and
        # MLP, D on the MLP's hidden pre-activation, B in attention on q, k, v; an empty
        # dict without them, so the default model keeps its parameters and keys
        self.canon = nn.ModuleDict(
            {point: Canon(d_ff if point == "D" else d_model) for point in canon if point != "B"}
        )
        if "B" in canon and isinstance(self.attn, MultiHeadAttention):
            self.attn.canon_qkv = Canon(3 * d_model)  # attention layers only
        self.dropout = nn.Dropout(dropout)

    @property
    def attends(self) -> bool:
        """Its mixer is attention (the encoding's hooks apply), not a recurrent one."""
        return not isinstance(self.attn, RecurrentMixer)

    def forward(self, x, pe, positions, memory=None, cache: LayerCache | None = None):
        # x: (B, T, D), memory: (B, S, D) or None; cache: this block's state while decoding
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache.self_attention, cache.cross_attention
        states = None if cache is None else cache.canon  # Canon's remembered inputs
        h = self._canon("A", self.norm_attn(x), states)  # (B, T, D)
        x = x + self.dropout(self.attn(h, pe, positions, cache=self_cache))
        if self.cross_attn is not None:
            x = x + self.dropout(
                self.cross_attn(self.norm_cross(x), pe, positions, memory, cache=cross_cache)
            )
        return x + self.dropout(self._mlp(self._canon("C", self.norm_mlp(x), states), states))

    def _canon(self, point: str, h: Tensor, states: dict[str, CanonState] | None) -> Tensor:
        """Canon layer ``point`` on h (B, T, C), or h where the block has none."""
        if point not in self.canon:
            return h
        return self.canon[point](h, None if states is None else states[point])

    def _mlp(self, h: Tensor, states: dict[str, CanonState] | None) -> Tensor:
        if "D" not in self.canon:
            return self.mlp(h)
        up, activation, down = self.mlp
        return down(activation(self._canon("D", up(h), states)))  # (B, T, D)


class Stack(nn.Module):
    """Positional encoding, n blocks, final LayerNorm."""

    def __init__(
        self,
        pe: PEFactory,
        *,
        d_model,
        n_layers,
        n_heads,
        d_ff,
        dropout,
        causal,
        cross_attention=False,
        attention="auto",
        mixers: tuple[MixerPlan, ...] = (),
        looping: config.ModelConfig | None = None,
        canon: str = "",
        options: AttentionOptions | None = None,
    ):
        super().__init__()
        self.causal = causal
        # n_layers: for encodings with per-layer parameters (RoPE-Mixed; ``pe.for_layer``)
        self.pe = pe(d_model=d_model, n_heads=n_heads, causal=causal, n_layers=n_layers)
        # what the config alone can refuse (an unknown option, flex with dropout), now, for
        # every layer's encoding (a schedule gives each layer its own)
        for index in range(n_layers):
            choose_kernel(self.pe.for_layer(index), attention, training=True, dropout=dropout)
        if self.pe.context.task_positions and not self.pe.reads_positions:
            raise ValueError(
                f"data.task.positions: pe={type(self.pe).__name__} reads no positions, so the "
                f"task's positions would change nothing (it trains as data.task.positions=index); "
                f"allowed: an encoding that embeds, rotates or biases by position (learned, "
                f"sinusoidal, rope, alibi, t5, kerple, sandwich, fire, …)"
            )
        self.dropout = nn.Dropout(dropout)
        # layer i mixes with plan i mod len(mixers), as pe.layers cycles encodings
        plans = layer_plans(list(mixers), n_layers) if mixers else [None] * n_layers
        self.blocks = nn.ModuleList(
            Block(
                d_model,
                n_heads,
                d_ff,
                dropout,
                causal,
                cross_attention,
                attention,
                plan,
                options,
                canon=canon,
            )
            for plan in plans
        )
        check_encoding_reaches(self.pe, [block.attends for block in self.blocks])
        for index, block in enumerate(self.blocks):
            if options is not None and block.attends:
                check_encoding(self.pe.for_layer(index), options)
        # the blocks run once, or K times with tied weights (model.loops; lengen.model.looped)
        self.depth = Depth() if looping is None else self._looped(d_model, looping)
        self.norm = nn.LayerNorm(d_model)

    def _looped(self, d_model: int, looping: config.ModelConfig) -> Looped:
        if looping.loop_rule != "fixed" and self.pe.context.axes > 1:  # confidence: linear's
            raise ValueError(
                f"model.loop_rule={looping.loop_rule} counts a sequence's tokens against the "
                f"training sequence's, and grids size positions per axis; allowed: "
                f"loop_rule=fixed on grids"
            )
        train_tokens = self.pe.train_positions
        looping.loop_count(1, train_tokens)  # refuses linear without a training length, now
        count = functools.partial(looping.loop_count, train_tokens=train_tokens)
        return Looped(d_model, count, looping.loop_rule, looping.loop_extra)

    @property
    def position_blind(self) -> bool:
        """A bidirectional stack whose PE adds nothing cannot tell positions apart."""
        return not self.causal and not self.pe.provides_positions

    def forward(
        self,
        x: Tensor,
        positions: Tensor | None = None,
        memory=None,
        cache: DecodingCache | None = None,
    ) -> Tensor:
        # x: (B, T, D) token embeddings; positions: (T,), by default the PE's (0 … T−1, or a
        # random subset under pe.randomized); on grids (T, A) from the batch, −1 rows for
        # tokens without a grid position; a sequence task's own (T,) (position coupling,
        # Abacus), shifted by a random start offset in training (pe.start_offset)
        if cache is not None:
            return self._forward_cached(x, cache)
        if positions is None:
            positions = self.pe.positions(x.shape[1], x.device)
        elif positions.ndim == 1:
            positions = self.pe.shift_task_positions(positions)
        x = self.dropout(self.pe.embed(x, positions))
        positions = self.pe.attention_positions(positions)  # the same, but for Abacus's base
        x = self.depth(self.blocks, self.pe.for_layer, x, positions, memory)
        return self.norm(x)

    def new_cache(
        self, total_length: int, memory: Tensor | None = None, positions: Tensor | None = None
    ) -> DecodingCache:
        """Empty decoding state for a sequence of ``total_length`` tokens (causal stacks);
        ``positions`` (N,): the task's positions of the whole sequence, known from its layout
        before generation (None: the encoding's)."""
        if not self.causal:
            raise ValueError("cached decoding needs a causal stack (decoder), not an encoder")
        device = self.norm.weight.device
        cache = DecodingCache(
            self.pe, len(self.blocks), total_length, device, memory, positions=positions
        )
        # a looped stack: a layer cache per (loop, block), loop-major, all at the positions
        # drawn once for the sequence (lengen.model.looped)
        for _ in range(self.depth.loops_at(total_length) - 1):
            cache.layers += DecodingCache(
                self.pe, len(self.blocks), total_length, device, memory, cache.positions
            ).layers
        for index, layer in enumerate(cache.layers):
            block = self.blocks[index % len(self.blocks)]
            if isinstance(block.attn, RecurrentMixer):  # a state of fixed size, not keys
                layer.self_attention = block.attn.new_state()
        return cache

    def _forward_cached(self, x: Tensor, cache: DecodingCache) -> Tensor:
        # x: (B, T, D) embeddings of the next T tokens -> (B, T, D)
        positions = cache.next_positions(x.shape[1])  # (T,)
        x = self.dropout(self.pe.embed(x, positions))
        positions = cache.next_positions(x.shape[1], attention=True)  # (T,)
        # the loop count of the whole N-token sequence, as the full pass over it takes
        x = self.depth(
            self.blocks, cache.pe.for_layer, x, positions, cache.memory, cache.layers,
            tokens=cache.total_length,
        )  # fmt: skip
        cache.length += x.shape[1]
        return self.norm(x)


class _Transformer(nn.Module):
    """Shared sizes, embedding, output head and initialisation; subclasses build the stacks."""

    #: the typed config (lengen.options): options, defaults, checks, and the model's kind
    Options = config.ModelConfig
    kind = Options.kind

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" not in vars(cls):  # a user's model may still declare its kind itself
            cls.kind = cls.Options.kind

    def __init__(self, *, pe: PEFactory, vocab_size: int, **keywords):
        super().__init__()
        self.cfg = cfg = self.Options.from_keys(keywords, owner=type(self).__name__)
        cfg.check()
        self.embedding = nn.Embedding(vocab_size, cfg.d_model)
        self.embed_scale = math.sqrt(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        self.output_scale = 1.0
        sizes = dict(
            d_model=cfg.d_model,
            n_layers=cfg.n_layers,
            n_heads=cfg.n_heads,
            d_ff=cfg.d_ff,
            dropout=cfg.dropout,
            attention=cfg.attention,
            mixers=tuple(cfg.mixer_plans()),
            looping=cfg if cfg.looped else None,
            canon=cfg.canon,
            options=attention_options(cfg),
        )
        self.build_stacks(pe, sizes)
        self._init(cfg.tie_embeddings)

    def check_kernel(self, device_type: str, training: bool = True) -> None:
        """Refuse, naming model.attention, a kernel that cannot run on this device."""
        for stack in self.modules():
            if isinstance(stack, Stack):
                for index in range(len(stack.blocks)):
                    layer_pe = stack.pe.for_layer(index)
                    choose_kernel(
                        layer_pe, self.cfg.attention, training=training, device_type=device_type
                    )

    def build_stacks(self, pe: PEFactory, sizes: dict) -> None:
        raise NotImplementedError

    def _init(self, tie_embeddings: bool) -> None:
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                # GPT-2: residual output projections shrink with depth
                residual = name.endswith(("attn.out", "mlp.2"))
                std = 0.02 / math.sqrt(2 * self.cfg.n_layers) if residual else 0.02
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        d_model = self.embedding.embedding_dim
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        if tie_embeddings:
            self.head.weight = self.embedding.weight
            self.output_scale = d_model**-0.5

    def project(self, hidden: Tensor) -> Tensor:
        return self.head(hidden * self.output_scale)  # (B, T, V)

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * self.embed_scale  # (B, T, D)

    @property
    def position_blind(self) -> bool:
        return any(m.position_blind for m in self.modules() if isinstance(m, Stack))


class DecoderOnly(_Transformer):
    """Causal language model over the whole sequence."""

    Options = config.DecoderOnlyConfig
    causal = True

    def build_stacks(self, pe: PEFactory, sizes: dict) -> None:
        self.stack = Stack(pe, causal=self.causal, **sizes)

    def forward(self, tokens: Tensor, positions: Tensor | None = None) -> Tensor:
        # tokens: (B, T) -> logits (B, T, V)
        return self.project(self.stack(self.embed(tokens), positions))

    def new_cache(self, total_length: int, positions: Tensor | None = None) -> DecodingCache:
        """Decoding state for a sequence of ``total_length`` tokens (see ``decode``);
        ``positions`` (N,): the task's positions of all N tokens (the batch's), if it has them."""
        return self.stack.new_cache(total_length, positions=positions)

    def decode(self, tokens: Tensor, cache: DecodingCache) -> Tensor:
        """Logits of the next tokens (B, T) -> (B, T, V), given the earlier ones in ``cache``.

        Equals the corresponding rows of ``forward`` over the whole ``total_length``-token
        sequence (``lengen.model.cache`` explains why); the first call usually feeds the prompt.
        """
        return self.project(self.stack(self.embed(tokens), cache=cache))


class EncoderOnly(DecoderOnly):
    """Bidirectional encoder; answers are read from answer slots (Chomsky-hierarchy style)."""

    Options = config.EncoderOnlyConfig
    causal = False


class EncoderDecoder(_Transformer):
    """Bidirectional encoder over the source, causal decoder with cross-attention.

    Each stack has its own positional encoding in its self-attention (the encoder's built
    non-causal, the decoder's causal); cross-attention is position-free (see
    ``MultiHeadAttention``). Source and target share the token embedding and vocabulary.
    """

    Options = config.EncoderDecoderConfig

    def build_stacks(self, pe: PEFactory, sizes: dict) -> None:
        self.encoder = Stack(pe, causal=False, **sizes)
        decoder_layers = self.cfg.n_decoder_layers or sizes["n_layers"]
        self.decoder = Stack(
            pe, causal=True, cross_attention=True, **{**sizes, "n_layers": decoder_layers}
        )

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_positions: Tensor | None = None,
        tgt_positions: Tensor | None = None,
    ) -> Tensor:
        # src: (B, S), tgt: (B, T) -> logits (B, T, V)
        memory = self.encoder(self.embed(src), src_positions)  # (B, S, D)
        return self.project(self.decoder(self.embed(tgt), tgt_positions, memory))

    def new_cache(
        self,
        total_length: int,
        src: Tensor,
        src_positions: Tensor | None = None,
        tgt_positions: Tensor | None = None,
    ) -> DecodingCache:
        """Encode ``src`` (B, S) once; decoding state for a ``total_length``-token target
        (``tgt_positions`` (N,): the task's target positions, if it has them)."""
        memory = self.encoder(self.embed(src), src_positions)  # (B, S, D)
        return self.decoder.new_cache(total_length, memory, positions=tgt_positions)

    def decode(self, tgt: Tensor, cache: DecodingCache) -> Tensor:
        """Logits of the next target tokens (B, T) -> (B, T, V); see ``DecoderOnly.decode``."""
        return self.project(self.decoder(self.embed(tgt), cache=cache))

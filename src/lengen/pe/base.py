"""The positional-encoding interface every encoding implements.

Three families of positional schemes, one hook each (the x-transformers taxonomy):

* ``embed(x, positions)``: added to the token embeddings (sinusoidal, learned);
* ``rotate(q, k, q_positions, k_positions)``: applied to queries and keys per head (RoPE);
* ``score_bias(heads, q_positions, k_positions)``: an additive attention-logit bias given
  per (head, query position, key position). Written elementwise on broadcastable tensors, it
  serves both to build a dense bias block (``attention_bias``) and, for biases of q − k only,
  the per-offset table (``relative_bias_table``) that the relative SDPA path and
  FlexAttention's ``score_mod`` read (``model.attention=flex``).

A fourth hook, ``contextual_logits(q, logits, scores=…, bias=…)``, serves encodings whose
logits are computed from the attention logits themselves (CoPE's positions; DAPE's MLP over the
scores and the bias); the attention layer then computes its softmax explicitly, one block of
queries at a time, and passes the block's scaled q·k (``scores``) and what it added to them
(``bias``: the score bias and the mask) besides their sum.

Two more hooks serve mechanisms whose position signal depends on the tokens or that replace
the softmax (GitHub issue #28), and also default to no-ops:

* ``token_state(x)``: data-dependent per-token quantities of *one* layer, computed from that
  layer's normed input x (B, T, D) — Forgetting Attention's log forget gates (B, H, T), PaTH's
  Householder vectors and strengths. None by default. The attention layer calls it in
  self-attention only; encodings with per-layer parameters hold them for ``n_layers`` layers and
  ``for_layer(index)`` returns a view that shares them (as RoPE-Mixed does). Cached decoding
  keeps the keys' states beside keys and values (``lengen.model.cache``).
* ``attention(q, k, v, q_state, k_state, *, causal, scale, dropout_p)``: an encoding that
  computes attention itself (``has_attention``: FoX, stick-breaking, PaTH). q (B, H, Tq, hd),
  k and v (B, H, Tk, hd); in causal attention the queries are the last Tq of the Tk keys, and
  q_state / k_state are ``token_state`` of the queries' and of all keys' tokens. ``scale`` is
  the logit multiplier ``attend`` computed (1/√hd times the log-length factor, which, per query,
  it has already applied to q's rows). Memory must grow linearly with length (blocks of
  queries). ``lengen.model.kernels.choose_kernel`` sends such an encoding to its own path,
  ``encoding``; no other kernel sees it.

**Task-supplied positions** (``inputs["positions"]`` (T,) from a sequence task: position
coupling, Abacus; docs/pe.md): the stack passes them to the hooks instead of ``positions()``,
after ``shift_task_positions`` (the random start offset, ``start_offset``, in training only);
``attention_positions`` lets an encoding give attention other positions than its embedding
reads (Abacus: its base encoding's token indices; every other encoding: the same).

Every hook defaults to a no-op, so NoPE is this base class itself. The model calls all hooks
unconditionally; the attention layer asks ``has_bias`` (and ``has_contextual``,
``has_attention``) to pick its kernel.

Two options every encoding takes, implemented here once:

* **Randomized positions** (Ruoss et al., 2023, "Randomized Positional Encodings Boost Length
  Generalization of Transformers"; reference code google-deepmind/randomized_positional_encodings,
  ``models/positional_encodings.py``): with ``randomized=True`` a sequence of length T gets,
  instead of 0 … T−1, a sorted random subset of T distinct positions from [0, ``max_position``),
  drawn afresh for every training batch (shared by the batch's rows): what the reference code
  does for every encoding it adds or rotates (``noisy_fixed_positional_encodings``: sin/cos,
  learned, RoPE). Encodings whose logit bias is a function of the query–key *distance*
  (``bias_of_distance``: ALiBi, T5, KERPLE, Sandwich, FIRE) instead follow the reference code's
  relative encodings (``compute_noisy_alibi_encodings_biases``,
  ``compute_attention_with_noisy_relative_encodings``) with ``randomized_relative="distances"``
  (the default of their configs): the tokens keep their indices, and the *offsets*
  1 … T−1 are mapped to a sorted random subset d_1 < … < d_{T−1} of [1, ``max_position``)
  (d_0 = 0), so the bias of query i and key j is that of distance d_{|i−j|} with the sign of
  i − j: a Toeplitz bias, the same at every place in the sequence.
  ``randomized_relative="positions"`` keeps the older scheme, the distance |p_i − p_j| of the
  random positions (not a function of i − j alone); null means ``positions``, and so does a
  missing key in the config.yaml of a run directory written before the option existed
  (``lengen.rundir.load_config`` reads it so, and the run re-evaluates as it trained).
  ``randomized_eval`` (default true, as in the paper) applies the draw at evaluation too, with
  one fixed draw per length so that evaluation stays reproducible and paired; false evaluates
  on 0 … T−1. A draw is made by ``positions()`` once per forward pass and shared by all layers
  of the stack (the reference code draws again in every attention layer, for RoPE and the
  relative encodings alike).
* **Log-length attention temperature** (``log_length_scale=True``; Chiang & Cholak, 2022,
  "Overcoming a Theoretical Limitation of Self-Attention"): content logits q·k are multiplied by
  max(1, log n / log n_train), n the number of keys a query attends to, so attention does not
  flatten as sequences outgrow training. In causal attention n is per query (query i of a
  sequence sees i + 1 keys, plus any cached prefix: ``query_scale``), so a token's output never
  depends on how many tokens follow it; bidirectional attention uses the window's n for every
  query (``attention_scale``). Encodings may add a constant temperature
  (``logit_temperature``: YaRN does). These per-query multipliers are a base of this class,
  ``lengen.pe.temperature.LogitScaling``, beside the functions they apply.

Positional math runs in fp32 whatever the model's precision: bf16 angles at long positions
would fake extrapolation failures.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lengen.pe.config.base import CONTEXT_KEYS, FACTS, EncodingConfig, EncodingContext
from lengen.pe.temperature import LogitScaling


class PositionalEncoding(LogitScaling, nn.Module):
    """No positional information (NoPE); the base class of every encoding.

    Built from keywords: the run's (``EncodingContext``: ``d_model``, ``n_heads``, ``causal``,
    ``train_positions``, ``max_positions``, ``axes``, ``n_layers``, ``task_positions``; the model and
    ``lengen.build`` pass them) and the encoding's options, the fields of its config class
    ``Options`` (``lengen.pe.config.<module>``; each option's default and allowed values are
    written there once). The options every encoding takes:

        randomized: draw positions as a sorted random subset of [0, max_position).
        max_position: the range of randomized positions (must cover every sequence length).
        randomized_eval: also randomize at evaluation (fixed draw per length).
        randomized_relative: for encodings with ``bias_of_distance``, ``distances`` (the
            reference code's randomized distances; their default) or ``positions``
            (distances of random positions; what null means, so that run directories written
            before the option existed re-evaluate as they trained); refused for the others.
        log_length_scale: multiply q·k logits by max(1, log n / log train_positions).
        window, chunk: local attention by index (``lengen.pe.local``): a sliding window of w
            keys, or chunks of c tokens; the kernels mask (and slice) keys accordingly.
        ssmax, ssmax_init: Scalable-Softmax, logits × s·log n with s learned per layer and head
            (``lengen.pe.temperature``; ``for_layer`` gives each layer its s).
        attn_temperature_tuning, floor_scale, attn_scale: Llama 4's query temperature.
        start_offset: task-supplied positions >= 1 shifted by one k in 0 … start_offset per
            training pass (``shift_task_positions``); refused without task positions.

    With ``axes`` > 1 positions are (T, A) integer coordinates, a row of −1s meaning "no
    position" (a readout slot), and ``train_positions`` / ``max_positions`` are per-axis
    extents. ``n_layers``: only encodings with per-layer parameters use it (``for_layer``).
    """

    #: the config class: options, defaults, checks and the facts ``causal_only``,
    #: ``supports_axes``, ``bias_of_distance`` (class attributes here too, for the model)
    Options = EncodingConfig
    causal_only = Options.causal_only
    supports_axes = Options.supports_axes
    bias_of_distance = Options.bias_of_distance
    #: True when ``score_bias`` depends on q_position − k_position only (ALiBi, T5, KERPLE,
    #: Sandwich; not FIRE): attention then reads one bias per offset (``relative_bias_table``).
    bias_is_relative = False

    @property
    def score_copies(self) -> int:
        """Score-sized fp32 tensors (B, H, c, Tk) that ``score_bias`` or ``contextual_logits``
        hold at once (at batch 1): evaluating on a CPU, the blocked path divides its block budget
        by it, so a block's memory stays near ``MAX_BIAS_ELEMENTS`` floats whatever the encoding
        builds per score (``lengen.model.kernels._block_rows``)."""
        return 1

    def __init_subclass__(cls, **kwargs) -> None:
        """The facts come from the config class; a class that declares one itself (a user's
        encoding written before configs existed) gets a config class that agrees with it."""
        super().__init_subclass__(**kwargs)
        declared = {fact: vars(cls)[fact] for fact in FACTS if fact in vars(cls)}
        if any(getattr(cls.Options, fact) != value for fact, value in declared.items()):
            cls.Options = type(cls.Options.__name__, (cls.Options,), declared)
        for fact in FACTS:
            setattr(cls, fact, getattr(cls.Options, fact))

    def __init__(self, **keywords) -> None:
        super().__init__()
        name = type(self).__name__
        context = {key: keywords.pop(key) for key in CONTEXT_KEYS if key in keywords}
        #: the run, as the model and the data describe it
        self.context = EncodingContext(**context)
        #: the options, checked (``lengen.pe.config``)
        self.cfg = self.Options.from_keys(keywords, owner=name)
        #: what the encoding derives from its checked options (RoPE's sizes, …), or None
        self.derived = self.cfg.check(self.context, name)
        self.d_model = self.context.d_model
        self.n_heads = self.context.n_heads
        self.head_dim = self.context.head_dim
        self.causal = self.context.causal
        self.train_positions = self.context.train_positions
        self.max_positions = self.context.max_positions
        self.axes = self.context.axes
        self.n_layers = self.context.n_layers
        if self.cfg.chunk is not None:
            # a chunk mask depends on the index, not on q − k alone: no per-offset table (as
            # under randomized distances, below); attention builds it per query block
            self.bias_is_relative = False
        if self.local and self.has_attention:  # a user's class whose config omits the fact
            local = "window" if self.cfg.window is not None else "chunk"
            raise ValueError(
                f"pe.{local}={getattr(self.cfg, local)}: {name} computes attention itself, "
                f"without a local mask; allowed: null (the whole sequence); set "
                f"computes_attention = True on its config class to refuse it before the run"
            )
        #: SSMax's s per layer and head (``lengen.pe.temperature``), flat (n_layers · H) so
        #: that the optimiser leaves it undecayed like every 1-D parameter; None without ssmax
        self.ssmax_scales = None
        if self.cfg.ssmax:
            initial = self.cfg.ssmax_init or self.ssmax_initial_scale()
            self.ssmax_scales = nn.Parameter(torch.full((self.n_layers * self.n_heads,), initial))
        #: the layer of the stack this object serves (``for_layer`` views set it)
        self.layer = 0
        #: bias encodings of distances: ``distances`` or ``positions``; None for the others
        #: (derived, not ``cfg.randomized_relative``: null reads as ``positions``)
        self.randomized_relative = (
            self.cfg.randomized_distances() if self.cfg.bias_of_distance else None
        )
        #: randomized distances: the bias is Toeplitz within a pass but its table changes with
        #: every draw, so attention builds it per query block (the per-offset table path and its
        #: cached dense masks assume a fixed bias per offset)
        self.randomizes_distances = self.cfg.randomized and self.randomized_relative == "distances"
        if self.randomizes_distances:
            self.bias_is_relative = False
        #: distances of this pass's offsets 0 … T−1 (int64, (T,)), set by ``positions()`` when
        #: ``randomizes_distances`` applies, else None
        self._distances: Tensor | None = None
        #: the seed of evaluation's position draw (``lengen.evaluation.tasks`` sets it per
        #: length and draw, ``eval.position_draws``); None: one fixed draw per length
        self.draw_seed: int | None = None

    # -- positions -------------------------------------------------------------------------
    @property
    def position_range(self) -> int | None:
        """How many distinct positions this encoding can be asked about."""
        return self.cfg.position_range(self.context)

    @property
    def randomizing(self) -> bool:
        """Whether this pass draws randomized positions (training, or ``randomized_eval``)."""
        return self.cfg.randomized and (self.training or self.cfg.randomized_eval)

    def positions(self, length: int, device: torch.device | None = None) -> Tensor:
        """The positions of a length-T sequence -> (T,) int64: 0 … T−1 or a random subset.

        Under randomized distances the positions stay 0 … T−1 and this call draws the pass's
        distances (``relative_distance``). Training draws from the global (seeded) RNG,
        evaluation uses one fixed draw per length. Positions on several axes come from the
        data (the batch's ``positions``), never from here."""
        if self.axes > 1:
            raise ValueError(
                f"pe: positions on {self.axes} axes come with the batch (inputs['positions'], "
                f"shaped (T, {self.axes})); none were given"
            )
        self._distances = None
        if not self.randomizing:
            return torch.arange(length, device=device)
        if length > self.cfg.max_position:
            raise ValueError(
                f"pe.max_position={self.cfg.max_position} is shorter than a sequence of {length}"
            )
        seed = length if self.draw_seed is None else self.draw_seed
        generator = None if self.training else torch.Generator().manual_seed(seed)
        if self.randomizes_distances:
            # offsets 1 … T−1 -> a sorted random subset of the distances 1 … max_position − 1
            drawn = torch.randperm(self.cfg.max_position - 1, generator=generator)[: length - 1] + 1
            zero = torch.zeros(1, dtype=drawn.dtype)
            self._distances = torch.cat((zero, drawn.sort().values)).to(device)  # (T,)
            return torch.arange(length, device=device)
        chosen = torch.randperm(self.cfg.max_position, generator=generator)[:length]
        return chosen.sort().values.to(device)

    def shift_task_positions(self, positions: Tensor) -> Tensor:
        """Task-supplied positions (T,) as this pass reads them -> (T,) int64.

        Training with ``start_offset`` adds one k, uniform in 0 … start_offset, to every
        position >= 1; position 0 (BOS, a non-digit) stays. One k per forward pass, so the
        batch's rows share it (lengen shares positions across a batch); the references draw
        per instance (position coupling's dataset ``__getitem__``) or per batch (Abacus's
        ``random.randint`` in ``forward``), docs/pe.md. Evaluation adds none, as both
        references evaluate at their base positions. k comes from the global RNG, which
        training seeds per step (``lengen.lit``)."""
        if not (self.training and self.cfg.start_offset):
            return positions
        k = int(torch.randint(0, self.cfg.start_offset + 1, ()))
        return torch.where(positions >= 1, positions + k, positions)

    def attention_positions(self, positions: Tensor) -> Tensor:
        """The positions the attention hooks (``rotate``, ``score_bias``) read, given those
        ``embed`` reads (T,) -> (T,): the same (the default). An encoding whose embedding reads
        the task's positions while attention keeps token indices (Abacus over a base encoding)
        returns those indices. Called once per forward pass and once per decoding cache."""
        return positions

    @property
    def reads_positions(self) -> bool:
        """Whether the positions passed to the hooks reach the output: an added embedding, a
        rotation or a logit bias, in this encoding or any layer's (schedules). CoPE, FoX,
        stick-breaking, PaTH and NoPE read none: task positions would change nothing."""

        def reads(encoding: PositionalEncoding) -> bool:
            cls, base = type(encoding), PositionalEncoding
            return encoding.has_bias or cls.embed is not base.embed or cls.rotate is not base.rotate

        return reads(self) or any(reads(self.for_layer(i)) for i in range(self.n_layers))

    def relative_distance(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Signed distance "query − key" of broadcastable integer positions -> int64.

        q − k itself, or under randomized distances d_{|q − k|} with the sign of q − k (the
        distances drawn by the last ``positions()`` call). Bias encodings of distances read
        their distances here; FIRE also reads its query position as the distance to key 0."""
        offset = q_positions - k_positions
        distances = self._distances
        if distances is None:
            return offset
        if distances.device != offset.device:
            distances = self._distances = distances.to(offset.device)
        magnitude = offset.abs()
        if magnitude.numel() and int(magnitude.max()) >= len(distances):
            raise ValueError(
                f"pe.randomized_relative=distances: offset {int(magnitude.max())} exceeds the "
                f"{len(distances)} positions drawn for this pass (positions() of a shorter "
                f"sequence)"
            )
        return distances[magnitude] * offset.sign()

    def length_global(self) -> str | None:
        """Why this encoding's outputs at a position depend on the sequence's total length
        even in causal attention (a method that is global by definition), or None."""
        if self.cfg.randomized and self.cfg.randomized_eval:
            return (
                "randomized positions: evaluation draws positions (or distances) for the whole "
                "sequence's length, so a prefix gets a different draw"
            )
        return None

    # -- hooks -----------------------------------------------------------------------------
    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: (B, T, D), positions: (T,) or (B, T) -> (B, T, D)."""
        return x

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        """q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,) -> (q, k)."""
        return q, k

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Additive logit bias, elementwise over broadcastable integer tensors (fp32 out)."""
        raise NotImplementedError  # only called when has_bias is True

    def contextual_logits(
        self, q: Tensor, logits: Tensor, *, scores: Tensor | None = None, bias: Tensor | None = None
    ) -> Tensor:
        """Logits added from the content itself (CoPE, DAPE): q (B, H, c, hd), logits
        (B, H, c, Tk) scaled and masked (−inf where a key is hidden) -> (B, H, c, Tk), fp32.

        The attention kernel also passes the two terms of ``logits`` = ``scores`` + ``bias``:
        scores (B, H, c, Tk), the scaled q·k alone (finite everywhere), and bias (H or 1, c, Tk),
        the encoding's ``attention_bias`` block (zero without one) with −inf where a key is
        hidden. None where a caller does not separate them."""
        raise NotImplementedError  # only called when has_contextual is True

    def token_state(self, x: Tensor) -> Tensor | tuple[Tensor, ...] | None:
        """Per-token quantities of this layer from its normed input x (B, T, D), e.g. log
        forget gates (B, H, T); None (the default) when the encoding has none."""
        return None

    def attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        q_state: Tensor | tuple[Tensor, ...] | None,
        k_state: Tensor | tuple[Tensor, ...] | None,
        *,
        causal: bool,
        scale: float,
        dropout_p: float,
    ) -> Tensor:
        """Attention computed by the encoding: q (B, H, Tq, hd), k and v (B, H, Tk, hd), the
        queries the last Tq keys when causal -> (B, H, Tq, hd)."""
        raise NotImplementedError  # only called when has_attention is True

    # -- derived ---------------------------------------------------------------------------
    @property
    def has_bias(self) -> bool:
        return type(self).score_bias is not PositionalEncoding.score_bias

    @property
    def has_contextual(self) -> bool:
        return type(self).contextual_logits is not PositionalEncoding.contextual_logits

    @property
    def has_attention(self) -> bool:
        """Whether the encoding computes attention itself (the ``attention`` hook)."""
        return type(self).attention is not PositionalEncoding.attention

    @property
    def provides_positions(self) -> bool:
        """Whether any hook carries position information."""
        base = PositionalEncoding
        cls = type(self)
        return (
            self.has_bias
            or self.has_contextual
            or self.has_attention
            or cls.embed is not base.embed
            or cls.rotate is not base.rotate
        )

    def attention_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Dense bias block: q_positions (Tq,), k_positions (Tk,) -> (H, Tq, Tk), fp32; on A
        axes q_positions (Tq, A), k_positions (Tk, A), passed to ``score_bias`` with their
        axis dimension last."""
        heads = torch.arange(self.n_heads, device=q_positions.device)
        if self.axes > 1:
            return self.score_bias(
                heads[:, None, None], q_positions[None, :, None, :], k_positions[None, None, :, :]
            )
        return self.score_bias(
            heads[:, None, None], q_positions[None, :, None], k_positions[None, None, :]
        )

    def relative_bias_table(self, offsets: Tensor) -> Tensor:
        """Bias per offset δ = q_position − k_position, for encodings with ``bias_is_relative``:
        offsets (L,) int64 -> (H, L), fp32. ``score_bias`` at query δ and key 0."""
        heads = torch.arange(self.n_heads, device=offsets.device)
        return self.score_bias(heads[:, None], offsets[None, :], torch.zeros_like(offsets)[None, :])

    def for_layer(self, index: int) -> PositionalEncoding:
        """The encoding as layer ``index`` of the stack uses it: itself, unless the encoding has
        per-layer parameters (SSMax's s here, RoPE-Mixed's frequencies); the stack calls it per
        block."""
        if self.ssmax_scales is None or index == self.layer:
            return self
        return self.layer_view(index)

    def layer_view(self, index: int) -> PositionalEncoding:
        """A shallow copy of this encoding serving layer ``index``: it shares the parameters
        (one set of weights), made per forward pass."""
        if not 0 <= index < self.n_layers:
            raise ValueError(
                f"pe: {type(self).__name__} holds parameters for {self.n_layers} layers "
                f"(n_layers), not layer {index}"
            )
        view = object.__new__(type(self))
        view.__dict__ = dict(self.__dict__)  # the same parameter dicts
        view.layer = index
        return view

    def describe(self) -> dict:
        """Facts for results.json: the encoding's own options that differ from its config's
        defaults (``EncodingConfig.changed``); encodings add what they derive (a table's size)."""
        return self.cfg.changed()

    def describe_options(self) -> dict:
        """The shared options, when any is switched on (for results.json)."""
        options = {}
        if self.cfg.randomized:
            options.update(
                randomized=True,
                max_position=self.cfg.max_position,
                randomized_eval=self.cfg.randomized_eval,
            )
            if self.randomized_relative is not None:
                options["randomized_relative"] = self.randomized_relative
        if self.cfg.log_length_scale:
            options["log_length_scale"] = True
        for key in ("window", "chunk"):
            if getattr(self.cfg, key) is not None:
                options[key] = getattr(self.cfg, key)
        if self.ssmax_scales is not None:
            options.update(ssmax=True, ssmax_init=self.cfg.ssmax_init or self.ssmax_initial_scale())
        if self.cfg.attn_temperature_tuning:
            options.update(
                attn_temperature_tuning=True,
                floor_scale=self.cfg.floor_scale,
                attn_scale=self.cfg.attn_scale,
            )
        if self.axes > 1:
            options["axes"] = self.axes
        reason = self.length_global()
        if reason is not None:
            options["length_global"] = reason
        return options

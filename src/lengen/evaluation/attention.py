"""Softmax weights of the model's attention, and statistics of them, at any length.

The attention layers call ``attend`` (``lengen.model.kernels``), whose fast paths never form the
weights. :func:`attention_weights` is the one function that does, for a block of queries, from
exactly what ``attend`` receives: explicit logits (q·k × the encoding's query scale / √hd, plus
its bias, the causal mask and CoPE's contextual term), then softmax. Attention maps
(``lengen.attention_maps.reference_attend``) call it for the whole (n × n) matrix; the
statistics recorder (:func:`recording_statistics`) calls it one block of queries at a time and
keeps only per-head sums, so memory grows linearly with length.

Encodings that compute attention themselves (``pe.has_attention``: FoX, stick-breaking, PaTH)
have no softmax(logits) of these hooks, but their output is Σ_j A_ij v_j with weights A that do
not depend on v: their own kernel given one-hot values (v_j = e_j) returns A itself
(:func:`own_attention_weights`, a few keys' columns per call). That costs one attention call per
block of columns, so it is done up to ``MAX_OWN_WEIGHTS`` weights per call;
:func:`weights_unavailable` says why when a call is larger, and the recorder notes it instead of
inventing numbers. Stick-breaking's weights are those of its output: what the sticks leave goes
to the query's own value (the reference), so it shows on the diagonal; with
``pe.remainder=none`` the weights sum to less than 1 and the statistics are of them as they are.

Statistics of one query's weights w over the keys it may see (per layer and head, then averaged
over queries and instances; distances in token indices, never position values):

* ``entropy``: −Σ_j w_j log w_j (nats); log k for uniform attention over k keys, 0 one-hot;
* ``entropy_normalized``: entropy / log(keys seen), in [0, 1], so lengths compare; the keys seen
  are those the causal mask and a local window or chunks leave (queries that see a single key,
  where log 1 = 0, are left out of its mean);
* ``max_weight``: max_j w_j;
* ``sink_mass``: w_0, the weight on the first token of the sequence (the attention sink);
* ``bucket_mass``: Σ w_j over keys at distance |i − j| in bucket b: 0, 1, 2–3, 4–7, …
  (bucket b ≥ 1 holds 2^(b−1) ≤ d < 2^b).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import Tensor

import lengen.model.attention as attention_module
from lengen.model import block_options

# MAX_OWN_WEIGHTS, the largest (B × H × Tq × Tk) weights formed for an encoding that attends
# itself, is defined with the encodings' torch-free configs, which plot.py's pre-check reads
from lengen.pe.config.base import MAX_OWN_WEIGHTS

#: Largest block of weights (B × H × queries × keys) formed at once by the recorder: 4M fp32
#: = 16 MiB, a few temporaries of that size per block.
MAX_BLOCK_ELEMENTS = 1 << 22

#: the scalar statistics, in the order figures and tables show them
SCALAR_STATISTICS = ("entropy", "entropy_normalized", "max_weight", "sink_mass")


def weights_unavailable(pe, q: Tensor | None = None, k: Tensor | None = None) -> str | None:
    """Why the weights of attention with encoding ``pe`` over q (B, H, Tq, hd) and k
    (B, H, Tk, hd) cannot be formed here, or None."""
    if pe is None or not getattr(pe, "has_attention", False) or q is None:
        return None
    batch, heads, q_len = q.shape[:3]
    size = batch * heads * q_len * k.shape[2]
    if size <= MAX_OWN_WEIGHTS:
        return None
    return (
        f"pe {type(pe).__name__} computes attention itself: its weights are formed by calling "
        f"it with one-hot values, up to {MAX_OWN_WEIGHTS:,} weights per call "
        f"({batch} × {heads} × {q_len} × {k.shape[2]} = {size:,} here)"
    )


def own_attention_weights(
    attend, q: Tensor, k: Tensor, max_elements: int = MAX_OWN_WEIGHTS, **kwargs
) -> Tensor:
    """Weights of an encoding that attends itself -> (B, H, Tq, Tk) fp32.

    ``attend(q, k, v, **kwargs)`` is the model's kernel call; its output is linear in v with
    weights that do not depend on v, so values v_j = e_j (one-hot over a block of keys' columns)
    return those columns of the weights. Blocks keep v within ``max_elements // Tq`` columns'
    worth (v is (B, H, Tk, columns))."""
    batch, heads, q_len, _ = q.shape
    k_len = k.shape[2]
    columns = max(1, min(k_len, max_elements // max(1, batch * heads * max(q_len, k_len))))
    blocks = []
    for start in range(0, k_len, columns):
        stop = min(start + columns, k_len)
        one_hot = torch.zeros(k_len, stop - start, dtype=q.dtype, device=q.device)  # (Tk, c)
        one_hot[torch.arange(start, stop), torch.arange(stop - start)] = 1
        v = one_hot.expand(batch, heads, k_len, stop - start)  # (B, H, Tk, c)
        blocks.append(attend(q, k, v, **{**kwargs, "dropout_p": 0.0}).float())  # (B, H, Tq, c)
    # rounding only: stick-breaking's leftover 1 − Σ_j A_ij comes out as −1e-7 where the sticks
    # took everything, and a negative weight would make the entropy NaN
    return torch.cat(blocks, dim=-1).clamp_min(0.0)  # (B, H, Tq, Tk)


def attention_weights(
    q: Tensor,
    k: Tensor,
    *,
    causal: bool,
    pe=None,
    q_positions: Tensor | None = None,
    k_positions: Tensor | None = None,
    rows: slice | None = None,
    **_kernel_options,
) -> Tensor:
    """Softmax weights of queries ``rows`` (default all) -> (B, H, c, Tk) fp32.

    q (B, H, Tq, hd) and k (B, H, Tk, hd) as ``attend`` receives them (rotated); with a causal
    mask the Tq queries are the last Tq of the Tk keys. The same function as ``attend``, written
    the textbook way, one block of queries at a time."""
    q_len, k_len = q.shape[2], k.shape[2]
    rows = rows or slice(0, q_len)
    start, stop = rows.start, min(rows.stop, q_len)
    scale = pe.query_scale(q_len, k_len, causal, q.device) if pe is not None else 1.0
    if isinstance(scale, Tensor):  # (Tq,) per query or (H, Tq) per head and query (PE docs)
        scale = scale[..., start:stop, None]  # (c, 1) or (H, c, 1)
    scale = scale / math.sqrt(q.shape[-1])
    q_block = q[:, :, start:stop]  # (B, H, c, hd)
    scores = torch.matmul(q_block.float(), k.float().transpose(-1, -2)) * scale  # (B, H, c, Tk)
    bias = torch.zeros(1, stop - start, k_len, device=q.device)  # (1, c, Tk)
    if pe is not None and pe.has_bias:
        bias = pe.attention_bias(q_positions[start:stop], k_positions)  # (H, c, Tk)
    seen = visible(pe, query_indices(q_len, k_len, rows, q.device), k_len, causal)  # (c, Tk)
    if seen is not None:
        bias = bias.masked_fill(~seen, float("-inf"))
    logits = scores + bias  # the kernels' split: DAPE reads scores and bias apart
    if pe is not None and pe.has_contextual:
        logits = logits + pe.contextual_logits(q_block, logits, scores=scores, bias=bias)
    return torch.softmax(logits, dim=-1)  # (B, H, c, Tk)


def visible(pe, query_index: Tensor, k_len: int, causal: bool) -> Tensor | None:
    """Which keys each query sees -> bool (c, Tk), or None when it sees them all: the causal
    mask and the encoding's local window or chunks (``lengen.pe.local``), by index as in every
    kernel. ``query_index`` (c, 1): the queries' key indices."""
    key_index = torch.arange(k_len, device=query_index.device)  # (Tk,)
    if pe is not None and getattr(pe, "local", False):
        from lengen.pe import local

        options = {"causal": causal, "window": pe.cfg.window, "chunk": pe.cfg.chunk}
        return local.allowed(query_index[:, 0], key_index, **options)
    return key_index <= query_index if causal else None


def query_indices(q_len: int, k_len: int, rows: slice, device=None) -> Tensor:
    """Key index of each query of ``rows`` -> (c, 1): the queries are the last q_len keys."""
    stop = min(rows.stop, q_len)
    return torch.arange(rows.start, stop, device=device)[:, None] + (k_len - q_len)


def distance_bucket(distance: Tensor) -> Tensor:
    """Bucket of each distance d ≥ 0 (any shape, integer): 0 for d = 0, else ⌊log₂ d⌋ + 1,
    so 1 -> 1, 2–3 -> 2, 4–7 -> 3, …"""
    largest = max(int(distance.max()), 1) if distance.numel() else 1
    boundaries = 2 ** torch.arange(largest.bit_length() + 1, device=distance.device)  # 1, 2, 4, …
    return torch.bucketize(distance, boundaries, right=True)


def bucket_labels(n_buckets: int) -> list[str]:
    """['0', '1', '2–3', '4–7', …] for ``n_buckets`` buckets."""
    labels = ["0", "1"][:n_buckets]
    labels += [f"{2 ** (b - 1)}–{2**b - 1}" for b in range(2, n_buckets)]
    return labels


class AttentionStatistics:
    """Per-head sums of the statistics (module docstring) over the query blocks and instances
    of one attention layer; :meth:`means` divides them at the end."""

    def __init__(self, n_heads: int, k_len: int, normalized: bool = True):
        self.n_buckets = int(distance_bucket(torch.tensor([max(k_len - 1, 0)]))) + 1
        self.sums = {name: torch.zeros(n_heads, dtype=torch.float64) for name in SCALAR_STATISTICS}
        self.sums["bucket_mass"] = torch.zeros(n_heads, self.n_buckets, dtype=torch.float64)
        self.queries = 0  # queries × instances summed
        self.normalizable = 0  # of those, queries that see more than one key
        self.keys = k_len
        # Gu et al.'s sink rate thresholds each instance's α (their reference code), so the
        # first token's weight is also kept per instance: Σ over queries, (B, H), and the
        # queries per instance. ``normalized`` False (sigmoid attention): the weights are
        # scored as their proxy A_ij / Σ_j A_ij there, as ``model_attn_sim_infer.py`` does
        self.normalized = normalized
        self.first_token: Tensor | None = None
        self.instance_queries = 0

    def add(self, weights: Tensor, query_index: Tensor, seen: Tensor | None) -> None:
        """weights (B, H, c, Tk) of queries at key indices ``query_index`` (c, 1); ``seen``
        (c, Tk): the keys each query may see (None: all)."""
        batch, _, block, k_len = weights.shape
        key_index = torch.arange(k_len, device=weights.device)  # (Tk,)
        keys = seen.sum(-1).double() if seen is not None else torch.full((block,), float(k_len))
        entropy = -torch.special.xlogy(weights, weights).sum(-1).double()  # (B, H, c)
        normalizable = keys.to(weights.device) > 1  # (c,)
        log_seen = keys.to(weights.device).clamp(min=2).log()  # (c,)
        per_query = {
            "entropy": entropy,
            "entropy_normalized": torch.where(normalizable, entropy / log_seen, 0.0),
            "max_weight": weights.amax(-1).double(),
            "sink_mass": weights[..., 0].double(),
        }
        for name, values in per_query.items():
            self.sums[name] += values.sum(dim=(0, 2)).cpu()  # (H,)
        buckets = distance_bucket((query_index - key_index).abs())  # (c, Tk)
        mass = torch.zeros(*weights.shape[:3], self.n_buckets, device=weights.device)
        mass.scatter_add_(-1, buckets.expand_as(weights), weights)  # (B, H, c, buckets)
        self.sums["bucket_mass"] += mass.sum(dim=(0, 2)).double().cpu()  # (H, buckets)
        self.queries += batch * block
        self.normalizable += batch * int(normalizable.sum())
        first = weights[..., 0].double()  # (B, H, c)
        if not self.normalized:  # the proxy; query 0 always sees key 0, so Σ_j > 0
            first = first / weights.double().sum(-1).clamp_min(1e-300)
        first = first.sum(-1).cpu()  # (B, H)
        self.first_token = first if self.first_token is None else self.first_token + first
        self.instance_queries += block

    def first_token_by_instance(self) -> Tensor | None:
        """Gu et al.'s α_h^l(1) of each instance: the mean over its queries of the weight on
        the first token (the proxy for unnormalised weights) -> (B, H) float64, or None."""
        if self.first_token is None or not self.instance_queries:
            return None
        return self.first_token / self.instance_queries

    def means(self) -> dict[str, list]:
        """{statistic: per head (buckets: per head, per bucket)}, means over queries."""
        means = {}
        for name, total in self.sums.items():
            count = self.normalizable if name == "entropy_normalized" else self.queries
            means[name] = (total / count).tolist() if count else [None] * total.shape[0]
        return means


def statistics_of_call(
    q: Tensor,
    k: Tensor,
    *,
    causal: bool,
    max_block_elements: int = MAX_BLOCK_ELEMENTS,
    **options,
) -> AttentionStatistics:
    """The statistics of one ``attend`` call (its arguments), one block of queries at a time:
    no (B, H, Tq, Tk) tensor unless it fits in ``max_block_elements``."""
    batch, n_heads, q_len, _ = q.shape
    k_len = k.shape[2]
    block = max(1, min(q_len, max_block_elements // max(1, batch * n_heads * k_len)))
    statistics = AttentionStatistics(n_heads, k_len)
    for start in range(0, q_len, block):
        rows = slice(start, min(start + block, q_len))
        weights = attention_weights(q, k, causal=causal, rows=rows, **options)  # (B, H, c, Tk)
        query_index = query_indices(q_len, k_len, rows, q.device)  # (c, 1)
        seen = visible(options.get("pe"), query_index, k_len, causal)  # (c, Tk) or None
        statistics.add(weights, query_index, seen)
    return statistics


def statistics_of_weights(
    weights: Tensor, pe, causal: bool, normalized: bool = True
) -> AttentionStatistics:
    """The statistics of formed weights (B, H, Tq, Tk), queries the last Tq of the keys;
    ``normalized`` False for attention without normalisation (sigmoid)."""
    _, n_heads, q_len, k_len = weights.shape
    statistics = AttentionStatistics(n_heads, k_len, normalized)
    query_index = query_indices(q_len, k_len, slice(0, q_len), weights.device)  # (Tq, 1)
    statistics.add(weights, query_index, visible(pe, query_index, k_len, causal))
    return statistics


@contextmanager
def recording_statistics(max_block_elements: int = MAX_BLOCK_ELEMENTS):
    """Within the block, every positional self-attention call appends to the list this yields,
    in call order (stack by stack, layer by layer), its :class:`AttentionStatistics`, or a
    string saying why it has none. The model's own kernel still computes every output, so the
    forward pass is the one evaluation runs. Cross-attention (no encoding) is not recorded."""
    recorded: list[AttentionStatistics | str] = []
    original = attention_module.attend

    def recording(q, k, v, **kwargs):
        output = original(q, k, v, **kwargs)
        pe = kwargs.get("pe")
        if pe is None:
            return output
        reason = weights_unavailable(pe, q, k)
        if reason is not None:
            recorded.append(reason)
        elif pe.has_attention:
            weights = own_attention_weights(original, q, k, **kwargs)  # (B, H, Tq, Tk)
            recorded.append(statistics_of_weights(weights, pe, kwargs["causal"]))
        else:
            options = {key: kwargs.get(key) for key in ("pe", "q_positions", "k_positions")}
            recorded.append(
                statistics_of_call(
                    q, k, causal=kwargs["causal"], max_block_elements=max_block_elements, **options
                )
            )
        return output

    original_options = block_options.attend_with_options

    def recording_options(q, k, v, extra, options, **kwargs):
        output = original_options(q, k, v, extra, options, **kwargs)
        recorded.append(_options_statistics(original_options, q, k, extra, options, kwargs))
        return output

    attention_module.attend = recording
    block_options.attend_with_options = recording_options
    try:
        yield recorded
    finally:
        attention_module.attend = original
        block_options.attend_with_options = original_options


def _options_statistics(attend_options, q, k, extra, options, kwargs):
    """The statistics of a layer whose block options change the weights, or why there are
    none (``options_weights``)."""
    weights = options_weights(attend_options, q, k, extra, options, kwargs)
    if isinstance(weights, str):
        return weights
    normalized = options.fn != "sigmoid"  # sigmoid attention: no normalisation
    return statistics_of_weights(weights, kwargs.get("pe"), kwargs["causal"], normalized)


def options_weights(attend_options, q, k, extra, options, kwargs) -> Tensor | str:
    """Weights (B, H, Tq, Tk) fp32 of a layer whose block options change them (learned sinks,
    key biases, sigmoid attention; ``lengen.model.block_options``), or why they cannot be
    formed. Its output is linear in v with weights that do not depend on v once the extra
    columns' values are zero, so one-hot values give the weights over the sequence's keys, as
    for encodings that attend themselves (``own_attention_weights``): what a sink or a key bias
    takes is missing from them, so they sum to less than 1, and sigmoid's need not sum to 1.
    ``attend_options``: ``block_options.attend_with_options``; ``kwargs``: the layer's call's."""
    batch, heads, q_len, _ = q.shape
    size = batch * heads * q_len * k.shape[2]
    if size > MAX_OWN_WEIGHTS:
        return (
            f"block options ({options}) change the weights: they are formed by calling the "
            f"layer's attention with one-hot values, up to {MAX_OWN_WEIGHTS:,} weights per "
            f"call ({batch} × {heads} × {q_len} × {k.shape[2]} = {size:,} here)"
        )

    def silent(q, k, v, **kw):  # the extra columns' values zero, at the one-hot values' width
        muted = None if extra is None else (*extra[:2], extra[2].new_zeros(*extra[2].shape[:2],
                                                                           v.shape[-1]))  # fmt: skip
        return attend_options(q, k, v, muted, options, **kw)

    return own_attention_weights(silent, q, k, **kwargs)  # (B, H, Tq, Tk)


def layer_names(model: torch.nn.Module) -> list[str]:
    """Names of the positional self-attention layers in call order (e.g. 'encoder.0'); a
    block whose mixer is recurrent (``model.mixers``: docs/models.md) has none and is left out."""
    from lengen.model.transformer import Stack

    names = []
    for stack_name, module in model.named_modules():
        if isinstance(module, Stack):
            prefix = "" if stack_name == "stack" else f"{stack_name}."  # decoder-only: '0', '1'
            names += [f"{prefix}{i}" for i, block in enumerate(module.blocks) if block.attends]
    return names

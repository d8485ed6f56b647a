"""Attention diagnostics at every evaluation length (``eval.diagnostics``, docs/analysis.md).

Per length, ``eval.diagnostics_samples`` instances (the first of the evaluated ones: tasks'
held-out instances, text's first validation windows) go through the model once more under
``lengen.evaluation.attention.recording_statistics``; the statistics of every positional
self-attention layer and head, averaged over queries and instances, become results.json's
``attention_diagnostics`` and a figure. The pass is separate from scoring and leaves the random
state as it found it (``torch.random.fork_rng``), so no metric changes whether it runs or not.

Beside each length's per-head ``sink_mass``, its ``sink_rate`` is Gu et al.'s Sink^ε_1 (ICLR
2025, arXiv 2410.10781, §3.1) at ε = 0.3: "α_h^l(k) = 1/(T − k + 1) Σ_{i=k}^{T} A_{i,k}^{l,h}",
the mean weight on token k over the queries that see it, and "Sink_k^ε = 1/L Σ_l 1/H Σ_h
I(α_h^l(k) > ε)", the fraction of heads whose mean attention to token k exceeds ε, computed
as their reference code does (``sail-sg/Attention-Sink`` ``pretrain/eval_sink_pretrain.py``:
``importance_scores = (attention_scores / ratios).sum(dim=-2)``, then ``(importance_scores >
epsilon).to(torch.float).mean(dim=(1,2))`` per sequence, averaged over their 100 sequences of
64 tokens): α and the threshold **per instance**, then the mean over instances. For k = 1
every query sees the token, so α is the instance's mean weight on it over all queries (query
0's weight 1 included). Attention without normalisation (``model.attn_fn=sigmoid``) is scored
on the proxy A_ij / Σ_j A_ij, as their ``lit_gpt/inference/model_attn_sim_infer.py``
(``attn_weight_normalized``) and Table 6's starred cells do. Until 2026-12-02 lengen
thresholded α averaged over the instances instead (no paper form: not kept). The rate is of
the length the diagnostics run at; Gu et al.'s is at 64 tokens (below ~10 tokens a uniform
head already passes ε: α = H_T / T, docs/analysis.md).
"""

from __future__ import annotations

import contextlib

import torch

from lengen.data.source import mix_seed
from lengen.evaluation.attention import (
    SCALAR_STATISTICS,
    bucket_labels,
    layer_names,
    recording_statistics,
)
from lengen.measure import is_out_of_memory
from lengen.model.looped import last_loop
from lengen.pe.base import PositionalEncoding

#: digits kept in results.json: enough to compare lengths, compact at 8 heads × 12 layers
DIGITS = 4

#: ε of Gu et al.'s Sink^ε_1 (``sink_rate``): their threshold, so lengen's rates compare with
#: their Tables 3, 4 and 6
SINK_EPSILON = 0.3


def task_inputs(data, length: int, samples: int, evaluated: int) -> dict:
    """The first ``samples`` of the ``evaluated`` held-out instances scored at ``length``."""
    inputs = data.held_out_inputs(length, evaluated, data.eval_seed)[:samples]  # (k, n)
    return next(data.batches_of(inputs, samples))["inputs"]


def text_inputs(data, length: int, samples: int, evaluated: int) -> dict:
    """The first ``samples`` disjoint windows of the validation stream (as ``nonoverlap``)."""
    import numpy as np

    windows = max(1, min(samples, (data.val_ids.shape[0] - 1) // length))
    return data.windows(data.val_ids, np.arange(windows) * length, length)["inputs"]


#: the instances diagnostics look at, per ``evaluation_kind`` of the data source
INPUTS = {"tasks": task_inputs, "text": text_inputs}


def _rounded(values):
    if isinstance(values, list):
        return [_rounded(value) for value in values]
    return None if values is None else round(float(values), DIGITS)


@contextlib.contextmanager
def diagnostic_pass(model, data):
    """A diagnostic's passes (this module's, ``lengen.evaluation.remembrance``'s): the model in
    eval mode, the run's random state forked so that nothing after them changes, and
    ``seed_length(L)`` giving randomized encodings evaluation's first position draw at length
    L; the model's mode and the draws restored after -> (device, seed_length)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    drawing = [m for m in model.modules() if isinstance(m, PositionalEncoding) and m.randomizing]

    def seed_length(length: int) -> None:
        for pe in drawing:  # the first of evaluation's position draws
            pe.draw_seed = mix_seed(data.eval_seed, length, 0)

    forks = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=forks):  # the run's random state stays as it was
            yield device, seed_length
    finally:
        for pe in drawing:
            pe.draw_seed = None
        model.train(was_training)


@torch.no_grad()
def attention_diagnostics(data, model, lengths: list[int], *, samples: int, evaluated: int):
    """results.json's ``attention_diagnostics`` (docs/analysis.md): per length, per layer, per
    statistic, per head (``bucket_mass``: per head, per distance bucket)."""
    names = layer_names(model)
    section = {
        # the instances looked at per length, as found below (at most the evaluated ones:
        # eval.diagnostics_samples=100000 with 8 evaluated recorded 100000, G04)
        "samples": 0,
        "queries": "every query of each instance; distances in token indices",
        "statistics": [*SCALAR_STATISTICS, "bucket_mass"],
        "layers": names,
        "train_len": data.train_len,
        "sink_epsilon": SINK_EPSILON,  # each length's sink_rate: Gu et al.'s Sink^ε_1
        "lengths": {},
        "skipped": [],
    }
    select = INPUTS.get(getattr(data, "evaluation_kind", None))
    if select is None:
        section["skipped"].append(f"no instances for data of type {type(data).__name__}")
        return section
    widest = 1
    with diagnostic_pass(model, data) as (device, seed_length):
        for length in sorted(set(lengths)):
            seed_length(length)
            inputs = {
                key: value.to(device)
                for key, value in select(data, length, samples, evaluated).items()
            }
            looked_at = next(v for k, v in inputs.items() if k != "positions").shape[0]
            section["samples"] = max(section["samples"], int(looked_at))
            try:
                with recording_statistics() as recorded:
                    model(**inputs)
            except Exception as error:
                if not is_out_of_memory(error):
                    raise
                section["skipped"].append(f"length {length}: out of memory")
                continue
            # a looped stack attends once per loop: its layers' are the last loop's calls
            last = last_loop(model, recorded, looked_at_tokens(inputs))
            if len(last) < len(recorded):
                recorded = last
                section["skipped"].append(
                    "looped depth: each layer's statistics are its last loop's (earlier "
                    "loops unrecorded)"
                )
            layers, note = _per_layer(recorded, names)
            if note:  # the same at every length: said once
                section["skipped"].append(note)
            if layers:
                tokens = max(stats.keys for stats in recorded if not isinstance(stats, str))
                section["lengths"][str(length)] = {
                    "tokens": tokens,
                    "sink_rate": sink_rate(recorded),
                    "layers": layers,
                }
                widest = max(widest, *(len(layer["bucket_mass"][0]) for layer in
                                       layers.values()))  # fmt: skip
    section["buckets"] = bucket_labels(widest)
    section["skipped"] = sorted(set(section["skipped"]), key=section["skipped"].index)
    return section


def sink_rate(recorded: list, epsilon: float = SINK_EPSILON) -> float | None:
    """Gu et al.'s Sink^ε_1 as their reference code computes it (module docstring): per
    instance, 1/L Σ_l 1/H Σ_h I(α_h^l > ``epsilon``) over the recorded layers, then the mean
    over instances; None without any."""
    alphas = [stats.first_token_by_instance() for stats in recorded if not isinstance(stats, str)]
    alphas = [alpha for alpha in alphas if alpha is not None]  # each (B, H)
    if not alphas:
        return None
    per_layer = torch.stack([(alpha > epsilon).double().mean(-1) for alpha in alphas])  # (L, B)
    return _rounded(per_layer.mean(0).mean())


def uniform_first_token_alpha(length: int) -> float:
    """α of uniform causal attention over ``length`` tokens: query i gives 1/(i + 1) to the
    first token, so α = H_T / T (H_T the harmonic number) — the trivial baseline."""
    return sum(1 / (i + 1) for i in range(length)) / length


def uniform_sink_rate(length: int, epsilon: float = SINK_EPSILON) -> float:
    """The sink rate uniform causal attention would give at ``length`` tokens: 0 at Gu et
    al.'s 64 (α = 0.074), 1 up to 9 tokens (α(9) = 0.314 > 0.3)."""
    return float(uniform_first_token_alpha(length) > epsilon)


def looked_at_tokens(inputs: dict) -> int:
    """Tokens per instance of a diagnostics batch (its longest token input)."""
    return max(value.shape[1] for key, value in inputs.items() if key != "positions")


def _per_layer(recorded: list, names: list[str]) -> tuple[dict, str | None]:
    """{layer name: {statistic: per head}} of one forward pass, and a note on what is missing.

    A pass that recorded a different number of calls than the model has layers went through an
    attention path the recorder cannot see: nothing is attributed to a layer then."""
    if len(recorded) != len(names):
        return {}, (
            f"recorded {len(recorded)} attention calls for {len(names)} layers (an attention "
            f"path the recorder cannot see); no diagnostics"
        )
    layers, notes = {}, []
    for name, stats in zip(names, recorded, strict=True):
        if isinstance(stats, str):
            notes.append(f"layer {name}: {stats}")
        else:
            layers[name] = {key: _rounded(values) for key, values in stats.means().items()}
    return layers, "; ".join(notes) or None

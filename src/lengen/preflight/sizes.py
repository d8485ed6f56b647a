"""How much memory a run's model needs, from its config alone (no torch, nothing built): its
parameters and a training step's activations, each by the key that sizes it, so the memory
pre-check (``lengen.preflight.resources.check_model_memory``) can refuse what cannot fit and
name the key. The model's part comes from its typed config (``ModelConfig.parameter_sizes``),
the encoding's from its own (``EncodingConfig.parameter_sizes``, ``activation_sizes``): a new
encoding brings its sizes with it.

An upper bound within a small factor (docs/scaling.md, "Memory"): positions are taken as
2 × data.len + 2 per instance (prompt, separator, answer) where the data source cannot say
without being built, and a step keeps every layer's activations and attention weights for
backward.
"""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from lengen.config import CONFIG_DIR, eval_lengths
from lengen.model.config import model_config
from lengen.pe.config import EncodingContext, config_of
from lengen.schema import node_options

#: bytes per parameter while training: the fp32 weight, its gradient, Adam's two moments (16)
#: and the transient copies around them (the initialiser's draw, a dense gradient's
#: temporary, the foreach update's intermediates): at the peak of build + one AdamW step, a
#: learned table of 2e6 × 128 and a T5 table of 2e7 × 4 took 23 bytes per entry, 29 as the
#: first step of a process, a 25M-parameter model 18 (tests/test_preflight_sizes.py)
TRAINING_BYTES = 32
#: bytes per parameter in evaluation: the weight and the initialiser's transient copy
EVAL_BYTES = 8
#: bytes per float of an activation
FLOAT_BYTES = 4
#: symbols of a task that no option counts (digits, operators, markers: under 64)
FIXED_VOCAB = 64
#: the options' bound under which the task is built to count its alphabet (milliseconds)
BUILT_VOCAB = 1 << 20
#: the most attention logits evaluation holds at once (lengen.model.kernels.MAX_BIAS_ELEMENTS,
#: 2^24, and a copy for the softmax; that module loads torch)
EVAL_ATTENTION_ELEMENTS = 2 << 24
#: the data layout's special tokens (lengen.data.layout.N_SPECIAL; that module loads torch)
SPECIAL_TOKENS = 4


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Bytes a run needs, by the key that sizes each part, and its parameters (floats)."""

    training: dict[str, int]
    evaluation: dict[str, int]
    parameters: dict[str, int]


def vocabulary(cfg: DictConfig) -> tuple[int, str]:
    """(an upper bound of the vocabulary size, the key that sets it). A task's options that
    count things (``n_symbols``, ``modulus``, ``n_keys``, …) bound its alphabet by their sum;
    where that is small the task is built (no torch: its symbols are a list of names) and its
    own alphabet counted."""
    data = cfg.data
    task = data.get("task")
    if task is None:
        vocab = data.get("vocab_size")
        return SPECIAL_TOKENS + int(vocab or 1 << 16), "data.vocab_size"  # null: every word
    counts = {
        f"data.task.{key}": value
        for key, value in OmegaConf.to_container(task, resolve=True).items()
        if isinstance(value, int) and not isinstance(value, bool) and value > 0
    }
    key = max(counts, key=counts.get) if counts else "data.task"
    bound = sum(counts.values()) + FIXED_VOCAB
    if bound <= BUILT_VOCAB:
        from hydra.utils import instantiate

        try:
            return SPECIAL_TOKENS + len(instantiate(task).vocab), key
        except Exception:  # noqa: BLE001 - refused by the task's own checks after this
            pass
    return SPECIAL_TOKENS + bound, key


def positions(cfg: DictConfig, axes: int) -> tuple[int, int]:
    """(training positions, positions of the longest evaluation) per axis, as the data source
    plans them where it can say without being built (text), else 2 L + 2 (a task's prompt,
    separator and answer) on sequences and L + 1 per axis on grids."""
    from hydra.utils import get_class

    lengths = eval_lengths(cfg)
    planned = get_class(cfg.data._target_).planned_positions(cfg, lengths)
    if planned is not None:
        return int(planned["train_positions"]), int(planned["max_positions"])
    longest = max(lengths)
    if axes > 1:
        return int(cfg.data.len) + 1, longest + 1
    return 2 * int(cfg.data.len) + 2, 2 * longest + 2


def model_sizes(cfg: DictConfig, axes: int) -> Sizes | None:
    """The bytes a run's model needs to train (parameters with their gradients and Adam's
    moments, one step's activations) and to evaluate one instance at the longest length, by
    the key that sizes each part; None for a model of the user's (built on the meta device
    later) or values its typed config refuses (refused by the component checks after)."""
    options = model_config(cfg.model.get("_target_"))
    if options is None:
        return None
    try:
        model = options.from_keys(node_options(cfg.model), owner=options.kind)
    except ValueError:
        return None
    vocab, vocab_key = vocabulary(cfg)
    parameters = model.parameter_sizes(vocab, vocab_key)
    layers, _ = model.layer_counts()
    # a looped stack (model.loops, fixed or linear: at most K at the training length) keeps
    # every loop's activations for backward: K times the layers' (weights are tied)
    layers *= model.loops
    train_positions, eval_positions = positions(cfg, axes)
    train_tokens, eval_tokens = train_positions**axes, eval_positions**axes
    batch = int(cfg.data.batch_size)
    d_model, d_ff = model.d_model, model.d_ff
    # per layer, for backward: ~16·d (norms, q, k, v, attention output, residuals and their
    # temporaries) and 3·d_ff (the MLP's hidden layer before and after its activation, its
    # gradient) per token, and the attention weights (B, H, T, T); measured at T = 129, RoPE's
    # and NoPE's step took 0.75–0.8 of this
    train = {
        "data.len": batch * layers * (train_tokens * (16 * d_model + 3 * d_ff)
                                      + model.n_heads * train_tokens * train_tokens),
    }  # fmt: skip
    # evaluation forms attention in blocks (lengen.model.kernels, relative.py: at most
    # MAX_BIAS_ELEMENTS logits at once), so long lengths grow linearly past them
    attention = min(model.n_heads * eval_tokens * eval_tokens, EVAL_ATTENTION_ELEMENTS)
    evaluation = {"eval.lengths": eval_tokens * (8 * d_model + d_ff) + attention}
    encoding = encoding_config(cfg)
    if encoding is not None:
        context = EncodingContext(
            d_model=d_model,
            n_heads=model.n_heads,
            causal=options.stacks[-1],
            train_positions=train_positions,
            max_positions=eval_positions,
            axes=axes,
            n_layers=model.n_layers,
        )
        for key, count in encoding.parameter_sizes(context).items():
            parameters[key] = parameters.get(key, 0) + len(options.stacks) * count
        for key, count in encoding.activation_sizes(context, batch, train_tokens).items():
            train[key] = train.get(key, 0) + layers * count
        blocks = (encoding.attention_copies + 1) * EVAL_ATTENTION_ELEMENTS
        for key, count in encoding.activation_sizes(context, 1, eval_tokens).items():
            if key == "data.len":  # the attention blocks: formed in blocks at evaluation too
                key, count = "eval.lengths", min(count, blocks)
            evaluation[key] = evaluation.get(key, 0) + count  # no backward: a layer at a time
    training = {key: FLOAT_BYTES * count for key, count in train.items()}
    evaluating = {key: FLOAT_BYTES * count for key, count in evaluation.items()}
    for key, count in parameters.items():
        training[key] = training.get(key, 0) + TRAINING_BYTES * count
        evaluating[key] = evaluating.get(key, 0) + EVAL_BYTES * count
    return Sizes(training, evaluating, parameters)


def encoding_config(cfg: DictConfig):
    """The typed config of a shipped encoding, from the run's ``pe`` node (no torch); None
    for an encoding of the user's or values its config refuses (refused after)."""
    node = OmegaConf.to_container(cfg.pe, resolve=True)
    options = config_of(node.get("_target_"))
    if options is None:
        return None
    try:
        return options.from_keys(node_options(node), owner=options.__name__)
    except ValueError:
        return None


#: the keys a run's activations grow with: the one that sizes a refused estimate is found by
#: setting each back to its shipped default (``sizing_key``)
ACTIVATION_KEYS = (
    "data.len",
    "data.batch_size",
    "model.n_layers",
    "model.loops",
    "model.d_model",
    "model.d_ff",
    "model.n_heads",
)


def shipped_defaults(cfg: DictConfig) -> dict[str, object]:
    """The values of ``ACTIVATION_KEYS`` in the shipped yamls of the run's model and data
    source (configs/model/<name>.yaml, configs/data/<name>.yaml; what a key is at when the
    user leaves it), where they are plain numbers; the model's typed defaults where its yaml
    does not say (``loops``)."""
    defaults: dict[str, object] = {}
    for group in ("model", "data"):
        path = CONFIG_DIR / group / f"{cfg[group].get('name')}.yaml"
        try:
            node = OmegaConf.load(path)
        except (OSError, ValueError):  # a component of the user's, or no yaml of that name
            continue
        for key in ACTIVATION_KEYS:
            if key.startswith(f"{group}."):
                value = node.get(key.split(".", 1)[1])
                if isinstance(value, int) and not isinstance(value, bool):
                    defaults[key] = value
    defaults.setdefault("model.loops", 1)
    return defaults


def sizing_key(cfg: DictConfig, estimate, fallback: str) -> str:
    """Which of ``ACTIVATION_KEYS`` sizes ``estimate(cfg)`` (bytes, or None where a config is
    refused): the one whose shipped default shrinks it most, each tried alone with the rest
    as given; ``fallback`` where none shrinks it. Activations are a product (batch × layers ×
    positions × width …), so no single factor owns them: ``model.d_ff=20000000000`` and
    ``model.loops=10000000`` were refused naming ``data.len=16`` (KB20, KB24,
    docs/trials/kept-back-2026-12-02.md)."""
    best, smallest = fallback, estimate(cfg)
    if smallest is None:
        return fallback
    for key, default in shipped_defaults(cfg).items():
        value = OmegaConf.select(cfg, key, default=None)
        if value is None or value == default:
            continue
        trial = cfg.copy()
        OmegaConf.update(trial, key, default, merge=False)
        size = estimate(trial)
        if size is not None and size < smallest:
            best, smallest = key, size
    return best

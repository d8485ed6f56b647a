"""From a validated config to the run's objects: data source, model, evaluation lengths.

Used by training (``lengen.train``), re-evaluation (``lengen.reeval``), attention maps and
``lengen.load_run``. Torch only: nothing here imports Lightning.
"""

from __future__ import annotations

import functools
import warnings

from omegaconf import DictConfig, OmegaConf

from lengen.checks import ConfigError
from lengen.config import eval_lengths

#: keys of the group yamls that are lengen's, not arguments of the ``_target_``: ``name`` names
#: the choice; ``compile`` (model.compile) is applied by LitModel; ``checkpoint_every_n_steps``
#: (trainer) by the StepCheckpoint callback; ``criterion_*`` (trainer) by CriterionStop;
#: ``num_workers`` (data) by the DataModule
OWN_KEYS = (
    "name",
    "compile",
    "checkpoint_every_n_steps",
    "criterion_target",
    "criterion_metric",
    "criterion_checks",
    "num_workers",
)


def instantiate_named(node: DictConfig, **kwargs):
    """``hydra.utils.instantiate`` for group yamls, without lengen's own keys (``OWN_KEYS``)."""
    from hydra.utils import instantiate

    node = OmegaConf.masked_copy(node, [k for k in node if k not in OWN_KEYS])
    return instantiate(node, **kwargs)


def model_kind(cfg: DictConfig) -> str:
    from hydra.utils import get_class

    return get_class(cfg.model._target_).kind


def build(cfg: DictConfig, *, meta: bool = False):
    """Data and model from a config -> (data source, model, eval lengths).

    The PE is wired in here, visibly: the pe yaml gives a partial; the run adds what the
    table-based encodings need to know about lengths; the model supplies its sizes.
    ``meta=True`` builds the model on PyTorch's meta device (shapes, no memory): every
    component's own checks run, at any model size, in well under a second.
    """
    import contextlib

    import torch

    lengths = eval_lengths(cfg)
    try:
        data = instantiate_named(
            cfg.data,
            model_kind=model_kind(cfg),
            seed=cfg.seed,
            eval_seed=cfg.eval.seed,
            # tasks' curricula (regular_increase) need the horizon; text data takes no such key
            **({"max_steps": cfg.trainer.max_steps} if "curriculum" in cfg.data else {}),
        )
        data.check_eval_lengths(lengths)
        pe = functools.partial(
            instantiate_named(cfg.pe),
            train_positions=data.max_position(data.train_len),
            max_positions=max(data.max_position(length) for length in lengths),
        )
        torch.manual_seed(cfg.seed)
        with torch.device("meta") if meta else contextlib.nullcontext():
            model = instantiate_named(cfg.model, pe=pe, vocab_size=data.vocab_size)
    except Exception as error:  # the components' own checks name the key
        cause = _user_error(error)
        if cause is None:
            raise
        raise ConfigError(str(cause)) from None
    return data, model, lengths


def _user_error(error: BaseException) -> ValueError | None:
    """The ValueError a component raised, unwrapped from Hydra's InstantiationException."""
    while error is not None:
        if isinstance(error, ValueError):
            return error
        error = error.__cause__
    return None


def position_warnings(model) -> list[str]:
    """Warnings about what the model cannot see (recorded in results.json)."""
    if not model.position_blind:
        return []
    message = (
        "a bidirectional stack without positional information cannot tell positions apart "
        "(permutation-invariant); its results are labelled position_blind"
    )
    warnings.warn(message, stacklevel=2)
    return [message]


# -- what the machine can run: checked before anything is built ------------------------------
def check_resources(cfg: DictConfig) -> None:
    """The devices and memory a config asks for exist here (ConfigError naming the key)."""
    check_devices(cfg)
    check_memory(cfg)


def check_devices(cfg: DictConfig) -> None:
    """A GPU asked for where there is none: say so now, not in Lightning's words later."""
    import torch

    if str(cfg.trainer.accelerator) in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"trainer.accelerator={cfg.trainer.accelerator}: no CUDA GPU is visible here; "
            f"allowed: cpu, or auto (the GPU when there is one)"
        )
    if str(cfg.trainer.accelerator) == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("trainer.accelerator=mps: MPS is not available here; allowed: cpu, auto")


def available_memory(cfg: DictConfig) -> tuple[int, str]:
    """(bytes, where) the run can use: the GPU's total memory where it trains on one, else the
    memory Linux reports available (MemAvailable); (0, "") when unknown."""
    import torch

    if str(cfg.trainer.accelerator) in ("gpu", "cuda", "auto") and torch.cuda.is_available():
        return torch.cuda.mem_get_info()[1], "GPU"
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "CPU"
    except OSError:
        pass
    return 0, ""


def check_memory(cfg: DictConfig) -> None:
    """Refuse, before building anything, sizes that cannot fit: a training step's activations
    (a lower bound: every instance at least ``data.len`` positions long) and one instance at the
    longest evaluation length. Without this, ``data.len=1000000000`` was killed by the kernel
    after 97 s with no message."""
    from lengen.config import eval_lengths

    available, where = available_memory(cfg)
    if not available:
        return
    model, gib = cfg.model, 2**30
    per_token = 12 * model.d_model + 2 * model.d_ff  # floats one layer keeps for backward
    train = 4 * cfg.data.batch_size * cfg.data.len * model.n_layers * per_token
    if train > available:
        raise ConfigError(
            f"data.len={cfg.data.len}: a training step needs at least {train / gib:,.1f} GiB of "
            f"activations (data.batch_size {cfg.data.batch_size} × {cfg.data.len} positions × "
            f"{model.n_layers} layers), more than the {available / gib:,.1f} GiB of {where} "
            f"memory available; allowed: a smaller data.len, data.batch_size or model"
        )
    longest = max(eval_lengths(cfg))
    evaluation = 4 * longest * (8 * model.d_model + model.d_ff) * 2  # one instance, no grad
    if evaluation > available:
        key = "eval.lengths" if cfg.eval.lengths is not None else "eval.factors"
        raise ConfigError(
            f"{key}: evaluating length {longest} needs at least {evaluation / gib:,.1f} GiB even "
            f"one instance at a time, more than the {available / gib:,.1f} GiB of {where} "
            f"memory available; allowed: shorter evaluation lengths"
        )

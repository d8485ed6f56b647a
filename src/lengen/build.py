"""From a validated config to the run's objects: data source, model, evaluation lengths.

Used by training (``lengen.train``), re-evaluation (``lengen.reeval``), attention maps,
``lengen.load_run`` and the checks of ``lengen.preflight`` (the data source, and the model on the
meta device). Torch only: nothing here imports Lightning.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

from omegaconf import DictConfig, OmegaConf

from lengen.checks import ConfigError
from lengen.config import eval_lengths
from lengen.options import data_seed

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
    """``decoder``, ``encoder`` or ``encoder_decoder``: read without torch for lengen's models
    (their config classes, ``lengen.options``), from the class for a model of the user's."""
    from lengen.model.config import model_config

    options = model_config(cfg.model._target_)
    kind = options.kind if options is not None else None
    if kind is None:
        from hydra.utils import get_class

        kind = get_class(cfg.model._target_).kind
    return kind


@contextlib.contextmanager
def user_errors():
    """A component's own check fails with a ValueError naming its key (Hydra's instantiate may
    wrap it): re-raised as the ConfigError the entry points print in one line."""
    try:
        yield
    except Exception as error:
        cause = _user_error(error)
        if cause is None:
            raise
        raise ConfigError(str(cause)) from None


def build_data(cfg: DictConfig):
    """The data source, built and checked against the evaluation lengths, without torch ->
    (data source, eval lengths, what the encoding is told of the run's positions).

    The PE's keywords: the positions of training and of the longest evaluation (table-based
    encodings size themselves from them); grids add ``axes`` and the extents are per axis,
    while sequences pass no axes keyword, so their PE is built exactly as before."""
    lengths = eval_lengths(cfg)
    data = instantiate_named(
        cfg.data,
        model_kind=model_kind(cfg),
        seed=data_seed(cfg),  # the training stream's seed (data.seed, else seed)
        eval_seed=cfg.eval.seed,
        # tasks' curricula (regular_increase) need the horizon; text data takes no such key
        **({"max_steps": cfg.trainer.max_steps} if "curriculum" in cfg.data else {}),
    )
    data.check_eval_lengths(lengths)
    positions = dict(
        train_positions=data.max_position(data.train_len),
        max_positions=max(data.max_position(length) for length in lengths),
        **({"axes": data.axes} if data.axes > 1 else {}),
        # a sequence task that gives each token its position (data.task.positions)
        **({"task_positions": True} if supplies_positions(data) else {}),
    )
    return data, lengths, positions


def supplies_positions(data) -> bool:
    """Whether the data's task gives each token of a sequence its position (the task option
    ``data.task.positions``: position coupling, Abacus), which the encoding then reads."""
    return bool(getattr(getattr(data, "task", None), "supplies_positions", False))


def build(cfg: DictConfig, *, meta: bool = False):
    """Data and model from a config -> (data source, model, eval lengths).

    The PE is wired in here, visibly: the pe yaml gives a partial; the run adds what the
    table-based encodings need to know about lengths (``build_data``); the model supplies its
    sizes. ``meta=True`` builds the model for its checks only (``shapes_only``: layer weights
    on the meta device, no initialisers), for components ``lengen.preflight.check_components``
    does not know.
    """
    import torch

    with user_errors():
        data, lengths, positions = build_data(cfg)
        data.check_sampling()
        pe = functools.partial(instantiate_named(cfg.pe), **positions)
        torch.manual_seed(cfg.seed)
        with shapes_only() if meta else contextlib.nullcontext():
            model = instantiate_named(cfg.model, pe=pe, vocab_size=data.vocab_size)
    return data, model, lengths


#: initialisers with nothing to compute on the meta device (``torch.nn.init`` and in-place
#: Tensor methods); ``shapes_only`` returns their tensor untouched
_INITIALISERS = frozenset(
    [
        "normal_",
        "uniform_",
        "trunc_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "orthogonal_",
        "zeros_",
        "ones_",
        "constant_",
        "zero_",
        "fill_",
        "bernoulli_",
        "random_",
        "exponential_",
    ]
)


def shapes_only():
    """A context in which modules are built for their checks only: the weights that
    ``torch.nn`` layers allocate (``torch.empty``) land on the meta device (shapes, no memory,
    at any model size) and random initialisers are skipped; everything else (an encoding's
    frequency tables, slopes) is computed on the CPU as usual.

    Why not the whole build under ``torch.device("meta")``: on the meta device many ops
    (float64 ``arange``, elementwise products, ``normal_``) run Python reference kernels whose
    first call imports torch._dynamo, about 1 s of a 2.5 s refused command on this machine."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ShapesOnly(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") in _INITIALISERS:
                return args[0] if args else kwargs["tensor"]
            if func is torch.empty:
                kwargs = {**kwargs, "device": "meta"}
            return func(*args, **kwargs)

    return ShapesOnly()


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

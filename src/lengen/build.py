"""From a validated config to the run's objects: data source, model, evaluation lengths.

Used by training (``lengen.train``), re-evaluation (``lengen.reeval``), attention maps and
``lengen.load_run``. Torch only: nothing here imports Lightning.
"""

from __future__ import annotations

import contextlib
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
    """``decoder``, ``encoder`` or ``encoder_decoder``: read without torch for lengen's models
    (their config classes, ``lengen.options``), from the class for a model of the user's."""
    from lengen.options import model_options

    options = model_options(cfg.model._target_)
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
        seed=cfg.seed,
        eval_seed=cfg.eval.seed,
        # tasks' curricula (regular_increase) need the horizon; text data takes no such key
        **({"max_steps": cfg.trainer.max_steps} if "curriculum" in cfg.data else {}),
    )
    data.check_eval_lengths(lengths)
    positions = dict(
        train_positions=data.max_position(data.train_len),
        max_positions=max(data.max_position(length) for length in lengths),
        **({"axes": data.axes} if data.axes > 1 else {}),
    )
    return data, lengths, positions


def build(cfg: DictConfig, *, meta: bool = False):
    """Data and model from a config -> (data source, model, eval lengths).

    The PE is wired in here, visibly: the pe yaml gives a partial; the run adds what the
    table-based encodings need to know about lengths (``build_data``); the model supplies its
    sizes. ``meta=True`` builds the model for its checks only (``shapes_only``: layer weights
    on the meta device, no initialisers), for components ``check_components`` does not know.
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


def check_components(cfg: DictConfig) -> bool:
    """Every component's own checks of a config, before a run directory exists: the data
    source's, then the encoding's for each stack of the model (``lengen.pe.options``; the
    model's own keys are ``validate``'s, ``lengen.options``) without importing torch, so a refusal takes well under 2 s; then
    drawing a few training instances (``check_sampling``, which imports torch). A source that
    is not cheap to build (text reads its corpus) is not built: its keys are checked by
    ``validate`` and the encoding learns its positions from ``planned_positions``. Raises
    ConfigError naming the key. -> True when this covered the config; False when a component
    is not lengen's (a user's encoding or model, which its constructor checks) or the kernel
    option is ``flex`` (its policy reads the built encoding and the device):
    ``check_by_building`` then runs their checks."""
    from hydra.utils import get_class

    from lengen.options import model_options
    from lengen.pe.options import check_encoding

    model = cfg.model
    with user_errors():
        data, positions = (
            None,
            get_class(cfg.data._target_).planned_positions(cfg, eval_lengths(cfg)),
        )
        if positions is None:
            data, _, positions = build_data(cfg)
        options = model_options(model._target_)
        node = OmegaConf.to_container(cfg.pe, resolve=True)
        sizes = dict(d_model=model.d_model, n_heads=model.n_heads, n_layers=model.n_layers)
        known = [
            check_encoding(node, causal=causal, **sizes, **positions)
            for causal in (options.stacks if options is not None else ())
        ]
        if data is not None:
            data.check_sampling()
    return all(known) and options is not None and model.get("attention") != "flex"


def check_by_building(cfg: DictConfig) -> None:
    """The checks ``check_components`` leaves to the components themselves: build them on the
    meta device (their constructors check their keys), and ask the kernel policy whether
    ``model.attention`` can train on the device the run will train on."""
    _, model, _ = build(cfg, meta=True)
    accelerator = str(cfg.trainer.accelerator)
    cuda = accelerator in ("gpu", "cuda") or (accelerator == "auto" and cuda_available())
    with user_errors():
        model.check_kernel("cuda" if cuda else "mps" if accelerator == "mps" else "cpu")


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


# -- what the machine can run: checked before anything is built ------------------------------
def check_resources(cfg: DictConfig) -> None:
    """The devices and memory a config asks for exist here (ConfigError naming the key)."""
    check_devices(cfg)
    check_memory(cfg)


def cuda_available() -> bool:
    """``torch.cuda.is_available()``, without importing torch where no GPU device node exists
    (NVIDIA's, AMD's ROCm or WSL's), where the answer is False: a refusal stays fast."""
    import os

    if not any(
        os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
    ):
        return False
    import torch

    return torch.cuda.is_available()


def check_devices(cfg: DictConfig) -> None:
    """A GPU asked for where there is none: say so now, not in Lightning's words later."""
    accelerator = str(cfg.trainer.accelerator)
    if accelerator in ("gpu", "cuda") and not cuda_available():
        raise ConfigError(
            f"trainer.accelerator={cfg.trainer.accelerator}: no CUDA GPU is visible here; "
            f"allowed: cpu, or auto (the GPU when there is one)"
        )
    if accelerator == "mps":
        import torch

        if not torch.backends.mps.is_available():
            raise ConfigError(
                "trainer.accelerator=mps: MPS is not available here; allowed: cpu, auto"
            )


def available_memory(cfg: DictConfig) -> tuple[int, str]:
    """(bytes, where) the run can use: the GPU's total memory where it trains on one, else the
    memory Linux reports available (MemAvailable); (0, "") when unknown."""
    if str(cfg.trainer.accelerator) in ("gpu", "cuda", "auto") and cuda_available():
        import torch

        return torch.cuda.mem_get_info()[1], "GPU"
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "CPU"
    except OSError:
        pass
    return 0, ""


def config_axes(cfg: DictConfig) -> int:
    """Axes of the data's positions, read from the config without building anything: the
    task class's ``axes`` (grid tasks 2, volumes 3); 1 for text and sequence tasks."""
    from hydra.utils import get_class

    task = cfg.data.get("task")
    if task is None or "_target_" not in task:
        return 1
    return int(getattr(get_class(task._target_), "axes", 1))


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
    axes = config_axes(cfg)
    per_token = 12 * model.d_model + 2 * model.d_ff  # floats one layer keeps for backward
    tokens = cfg.data.len**axes  # grids: data.len is the side (shapes: pixels, an upper bound)
    train = 4 * cfg.data.batch_size * tokens * model.n_layers * per_token
    if train > available:
        shown = f"{cfg.data.len}^{axes} = {tokens:,}" if axes > 1 else f"{tokens}"
        raise ConfigError(
            f"data.len={cfg.data.len}: a training step needs at least {train / gib:,.1f} GiB of "
            f"activations (data.batch_size {cfg.data.batch_size} × {shown} positions × "
            f"{model.n_layers} layers), more than the {available / gib:,.1f} GiB of {where} "
            f"memory available; allowed: a smaller data.len, data.batch_size or model"
        )
    longest = max(eval_lengths(cfg))
    evaluation = 4 * longest**axes * (8 * model.d_model + model.d_ff) * 2  # one instance, no grad
    if evaluation > available:
        key = "eval.lengths" if cfg.eval.lengths is not None else "eval.factors"
        raise ConfigError(
            f"{key}: evaluating length {longest} needs at least {evaluation / gib:,.1f} GiB even "
            f"one instance at a time, more than the {available / gib:,.1f} GiB of {where} "
            f"memory available; allowed: shorter evaluation lengths"
        )

"""What the machine can run: the devices, precision and memory a config asks for exist here,
and its logger can start, checked before anything is built (``ConfigError`` naming the key).
Torch is imported only where a GPU device node exists."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from lengen.config import eval_lengths
from lengen.errors import ConfigError
from lengen.loggers import wandb_start_refusal
from lengen.options import WandbConfig, logger_options
from lengen.schema import node_options


def check_resources(cfg: DictConfig) -> None:
    """The devices and memory a config asks for exist here, and its logger can start
    (ConfigError naming the key)."""
    check_devices(cfg)
    check_memory(cfg)
    check_model_memory(cfg)
    check_logger(cfg)
    check_evaluation_bound()


def check_evaluation_bound() -> None:
    """``LENGEN_MAX_EVAL_HOURS`` is a number of hours (``lengen.estimate_bound``), found now,
    not when the estimate is made after the model is built."""
    from lengen.estimate_bound import max_eval_seconds

    try:
        max_eval_seconds()
    except ValueError as error:
        raise ConfigError(str(error)) from None


def check_logger(cfg: DictConfig) -> None:
    """A logger that cannot start here (``logger=wandb`` online without credentials or a
    reachable server: ``lengen.loggers.wandb_start_refusal``) is refused before the run
    directory is made; it failed in wandb's traceback after."""
    logger = cfg.get("logger")
    if logger is None or logger_options(logger.get("_target_")) is not WandbConfig:
        return
    options = WandbConfig.from_keys(node_options(logger), owner="wandb")
    try:
        refusal = wandb_start_refusal(options)
    except ValueError as error:  # WANDB_MODE of no mode
        raise ConfigError(str(error)) from None
    if refusal is not None:
        raise ConfigError(refusal)


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


def on_cpu(cfg: DictConfig) -> bool:
    """Whether the run trains on the CPU: asked for, or ``auto`` where no GPU is visible."""
    accelerator = str(cfg.trainer.accelerator)
    return accelerator == "cpu" or (accelerator == "auto" and not cuda_available())


def check_devices(cfg: DictConfig) -> None:
    """A GPU asked for where there is none, or half precision on a CPU (slow, and not what
    any result here was measured with): say so now, not in Lightning's words later."""
    accelerator = str(cfg.trainer.accelerator)
    precision = str(cfg.trainer.get("precision", "32-true"))
    cpu = on_cpu(cfg)
    if cpu and not precision.startswith(("32", "64")):
        raise ConfigError(
            f"trainer.precision={precision}: half precision needs a GPU, and this run trains "
            f"on the CPU; allowed: 32-true (or 64-true) on the CPU"
        )
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
    memory Linux reports available (MemAvailable) or, where less, what ``ulimit -v`` / ``-d``
    or the memory cgroup leave this process (``lengen.preflight.limits``); (0, "") when
    unknown."""
    if str(cfg.trainer.accelerator) in ("gpu", "cuda", "auto") and cuda_available():
        import torch

        return torch.cuda.mem_get_info()[1], "GPU"
    return cpu_memory_limit()


def cpu_memory_limit() -> tuple[int, str]:
    """(bytes, where) this process may take on the CPU: the tightest of MemAvailable and the
    limits it lives under (``lengen.preflight.limits``: ulimit -v / -d, the memory cgroup);
    (0, "") when none is known."""
    from lengen.preflight.limits import memory_limits

    available = cpu_memory_available()
    choices = [(available, "CPU")] if available else []
    choices += [(left, f"CPU ({name})") for left, name in memory_limits()]
    return min(choices, key=lambda choice: choice[0]) if choices else (0, "")


def cpu_memory_available() -> int:
    """Bytes of memory Linux reports available (MemAvailable); 0 when unknown."""
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


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
    available, where = available_memory(cfg)
    if not where:  # unknown (a limit may leave 0 bytes: that is refused)
        return
    model, gib = cfg.model, 2**30
    axes = config_axes(cfg)
    tokens = cfg.data.len**axes  # grids: data.len is the side (shapes: pixels, an upper bound)
    train = step_activations(cfg, axes)
    if train > available:
        from lengen.preflight.sizes import sizing_key

        key = sizing_key(cfg, lambda trial: step_activations(trial, axes), "data.len")
        shown = f"{cfg.data.len}^{axes} = {tokens:,}" if axes > 1 else f"{tokens}"
        raise ConfigError(
            f"{key}={OmegaConf.select(cfg, key)}: a training step needs at least "
            f"{train / gib:,.1f} GiB of activations (data.batch_size {cfg.data.batch_size} × "
            f"{shown} positions × {model.n_layers} layers × (12 × model.d_model "
            f"{model.d_model} + 2 × model.d_ff {model.d_ff}) floats), more than the "
            f"{available / gib:,.1f} GiB of {where} memory available; allowed: a smaller {key}"
            f"{'' if key == 'data.len' else ' (or data.len, data.batch_size)'}"
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


def step_activations(cfg: DictConfig, axes: int) -> int:
    """Bytes a training step's activations take at least: every instance ``data.len``
    positions long, 12 · d_model + 2 · d_ff floats per position and layer kept for backward."""
    model = cfg.model
    per_token = 12 * model.d_model + 2 * model.d_ff  # floats one layer keeps for backward
    return 4 * cfg.data.batch_size * cfg.data.len**axes * model.n_layers * per_token


def check_model_memory(cfg: DictConfig) -> None:
    """Refuse a model that cannot fit, training or evaluating, in one line naming the key
    that sizes most of it and the estimate (``lengen.preflight.sizes``: parameters with their
    gradients and Adam's moments, a step's activations, the encoding's tables and networks).
    ``check_memory`` bounds the activations by the lengths; this sees what options size:
    ``pe=learned pe.table_size=2000000000`` failed at build (a 1 TB table) with a run
    directory left, ``model.d_model=65536`` was killed by the kernel without a word."""
    from lengen.preflight.sizes import model_sizes, sizing_key

    available, where = available_memory(cfg)
    if not where:
        return
    axes = config_axes(cfg)
    sizes = model_sizes(cfg, axes)
    if sizes is None:
        return
    for doing, parts in (("training", sizes.training), ("evaluating", sizes.evaluation)):
        total = sum(parts.values())
        if total <= available:
            continue
        part = key = max(parts, key=parts.get)
        if key in ("data.len", "eval.lengths"):  # activations: a product, sized by any factor

            def estimate(trial, doing=doing):
                return _total(model_sizes(trial, axes), doing)

            key = sizing_key(cfg, estimate, key)
        if key == "eval.lengths" and cfg.eval.lengths is None:
            key = "eval.factors"
        value = OmegaConf.select(cfg, key, default=None)
        shown = key if value is None else f"{key}={value}"
        raise ConfigError(
            f"{shown}: {doing} this model needs about {_gib(total)} of memory ({_gib(parts[part])} "
            f"of it sized by {key}), more than the {_gib(available)} of {where} memory "
            f"available; allowed: a smaller {key} (the estimate: docs/scaling.md, Memory)"
        )


def _total(sizes, doing: str) -> int | None:
    """The bytes of ``doing`` (training, evaluating) in ``sizes``; None where there are none."""
    if sizes is None:
        return None
    return sum((sizes.training if doing == "training" else sizes.evaluation).values())


def _gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB"

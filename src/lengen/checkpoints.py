"""Every checkpoint operation of lengen, in one module.

* Writing: ``save_checkpoint`` (temp name, then rename) and ``StepCheckpoint``, the callback
  that writes ``checkpoints/last.ckpt`` periodically and when the run is preempted.
* Reading back: for eval.py (``run=``), fine-tuning (``init_from=``) and ``lengen.load_run``.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from lengen.atomic import replace_durably
from lengen.errors import CheckpointWriteError, ConfigError, Preempted
from lengen.process import acted_on_signal, install_preemption_handlers, received_signal


def checkpoint_file(path: str | Path, key: str) -> Path:
    """A run directory (its checkpoints/last.ckpt) or a .ckpt file -> the file."""
    path = Path(path)
    file = path / "checkpoints" / "last.ckpt" if path.is_dir() else path
    if not file.is_file():
        raise ConfigError(
            f"{key}={path}: no checkpoint there (checkpoints/last.ckpt); the run never finished "
            f"training, so there is nothing to load"
        )
    return file


def load_checkpoint(path: str | Path, key: str) -> dict:
    import torch

    file = checkpoint_file(path, key)
    try:
        return torch.load(file, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - any unpickling failure means a bad file
        raise ConfigError(
            f"{key}={path}: {file.name} cannot be read ({type(error).__name__}: {error})"
        ) from None


def load_weights(model, checkpoint: dict, key: str) -> None:
    """Load a Lightning checkpoint's model weights; a shape mismatch, or weights that are not
    finite, is a user error."""
    state = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()}
    if (problem := non_finite_weights(state)) is not None:
        raise NonFiniteCheckpoint(key, problem)
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = lines[1] if len(lines) > 1 else lines[0]
        raise ConfigError(
            f"{key}: the checkpoint holds a different model than this config builds: {detail}"
        ) from None


class NonFiniteCheckpoint(ConfigError):
    """A checkpoint whose weights are not finite; ``problem`` says so without the key, for a
    caller that names the run itself (eval.py's ``run=``, whose ``key`` is its overrides)."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.problem = problem


def non_finite_weights(state: dict) -> str | None:
    """Why a state dict's weights measure nothing (NaN or inf in a floating tensor: a diverged
    or damaged checkpoint), or None. eval.py on all-NaN weights wrote rows of nan loss and 0.0
    accuracy, exit 0, and plot.py drew blank maps, with no word of the cause (CK01, CK01b)."""
    bad = [
        name
        for name, tensor in state.items()
        if torch.is_tensor(tensor) and tensor.is_floating_point() and not tensor.isfinite().all()
    ]
    if not bad:
        return None
    return (
        f"the checkpoint's weights hold NaN or inf ({len(bad)} of {len(state)} tensors, the "
        f"first {bad[0]}): a diverged or damaged checkpoint, which nothing can be measured "
        f"with; allowed: a run whose checkpoint is finite"
    )


# -- resuming ---------------------------------------------------------------------------------
# -- writing ---------------------------------------------------------------------------------
#: what torch.save's zip writer raises when the file beneath it cannot be written (a full disk:
#: "[enforce fail at inline_container.cc:672] . unexpected pos 39104 vs 39056", seen on a full
#: tmpfs): a RuntimeError, not the OSError of the write it could not make
TORCH_WRITE_FAILURES = ("unexpected pos", "file write failed", "PytorchStreamWriter failed")


def write_failure(error: BaseException, folder: Path) -> str | None:
    """Why a checkpoint could not be written into ``folder`` (its OSError's reason, or that
    of torch's writer, with the disk's state), or None for an error that is no failed write."""
    import errno
    import os

    if isinstance(error, OSError):
        return error.strerror or str(error)
    if not isinstance(error, RuntimeError) or not any(
        text in str(error) for text in TORCH_WRITE_FAILURES
    ):
        return None
    with contextlib.suppress(OSError):
        if os.statvfs(folder).f_bavail == 0:
            return os.strerror(errno.ENOSPC)  # what the write beneath torch's writer met
    return f"torch's writer stopped: {str(error).splitlines()[0]}"


class LocalCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, writing straight to the path it is given.

    Lightning's own stages the whole file in the system's temporary folder (fsspec's local
    transaction) and moves it over: a small ``$TMPDIR`` then fails every checkpoint while the
    run's disk has room, and a kill mid-write leaves the staged file there. Here the bytes go
    to the temporary name beside the run that ``save_checkpoint`` renames into place."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            torch.save(checkpoint, handle)


def save_checkpoint(trainer: pl.Trainer, path: Path) -> None:
    """Lightning checkpoint under a temporary name beside ``path`` (``LocalCheckpointIO``),
    synced to disk, then renamed into place (rank 0 writes). A failed write (a full disk, a
    read-only folder) keeps the previous checkpoint and stops the run with one line naming the
    path, and what can still be done."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        trainer.save_checkpoint(tmp, weights_only=False)  # every rank calls it; rank 0 writes
        if trainer.is_global_zero:
            replace_durably(tmp, path)
    except (OSError, RuntimeError) as error:
        if (reason := write_failure(error, path.parent)) is None:
            raise
        with contextlib.suppress(OSError):  # a read-only folder refuses the cleanup too
            tmp.unlink(missing_ok=True)
        if path.exists():
            kept = f"the previous checkpoint {path} is kept; allowed: free the disk (or make "
            advice = "it writable), then resume=true with the same hydra.run.dir"
        else:
            kept = "no checkpoint was kept, so the run cannot be resumed; allowed: free the "
            advice = "disk (or make it writable) and start the run again in a new hydra.run.dir"
        raise CheckpointWriteError(
            f"checkpoint: writing {path} failed ({reason}); {kept}{advice}"
        ) from None
    trainer.strategy.barrier("lengen.save_checkpoint")


class StepCheckpoint(pl.Callback):
    """``last.ckpt`` every ``every_n_steps`` steps and when a preemption signal arrives.

    A step's checkpoint is written once the step is complete: at the end of the training batch,
    or, on steps followed by validation, once validation is done (so a resumed run neither
    repeats nor skips it). A signal stops training after the next such checkpoint, at the start
    of the following step (once the finished step is logged); a signal during the last step
    stops the run after training, before evaluation.

    Signals are remembered from process start (``lengen.process.install_preemption_handlers``,
    installed by the entry point and again here); Lightning's own handlers are never installed
    (``lengen.train.make_trainer``), so no signal falls in a gap between the two. SIGINT
    (Ctrl-C) stops training the same way; outside training it interrupts as usual. On SLURM
    this replaces Lightning's auto-requeue on SIGUSR1 too (see docs/scaling.md).
    """

    def __init__(self, path: Path, every_n_steps: int | None):
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self.stop_signum = 0  # agreed by all ranks at a step's end
        self.pending = False  # save once this step's validation is done
        self.saved_step = -1

    def on_train_start(self, trainer, pl_module) -> None:
        self.stop_signum = 0
        self.pending = False
        install_preemption_handlers(signal.SIGINT)  # a signal received before stays remembered
        self.saved_step = trainer.global_step  # a resumed run's checkpoint holds this step

    def on_fit_end(self, trainer, pl_module) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C interrupts again

    def _signalled(self, trainer, pl_module) -> int:
        """The signal number if any rank received one (all ranks agree)."""
        if trainer.world_size == 1:
            return received_signal()
        import torch
        import torch.distributed as dist

        flag = torch.tensor([received_signal()], device=pl_module.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

    def save(self, trainer) -> None:
        """The checkpoint of the steps done so far, after the logged rows are on disk
        (Lightning's CSV logger buffers 100 steps: a kill after the checkpoint would lose rows
        that a resumed run never logs again). The row of the step just done is logged after
        this point; the checkpoint carries it (``LitModel.last_logged``)."""
        if trainer.global_step == self.saved_step:
            return
        if trainer.logger is not None:
            trainer.logger.save()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(trainer, self.path)
        self.saved_step = trainer.global_step

    def stop(self, trainer, signum: int) -> None:
        self.save(trainer)
        acted_on_signal()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        raise Preempted(signum, trainer.global_step, self.path)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step  # steps done, this one included
        self.stop_signum = self._signalled(trainer, pl_module)
        due = self.every_n_steps and step % self.every_n_steps == 0
        if not (due or self.stop_signum):
            return
        every = trainer.val_check_batch
        # the last step too: Lightning validates after it when max_steps is a multiple of the
        # interval, and a checkpoint written before that validation carried the previous one
        # into a resumed run's results.json (#34)
        if isinstance(every, int) and step % every == 0:
            self.pending = True  # validation runs after this step: save after it
        else:
            self.save(trainer)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self.pending and not trainer.sanity_checking:
            self.pending = False
            self.save(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.stop_signum:  # save: a no-op unless the validation that should save never ran
            self.stop(trainer, self.stop_signum)

    def on_train_end(self, trainer, pl_module) -> None:
        # a signal during the last step: training is complete, stop before evaluating
        signum = self.stop_signum or self._signalled(trainer, pl_module)
        if signum:
            self.stop(trainer, signum)
        if self.pending:
            self.save(trainer)

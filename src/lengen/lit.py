"""The LightningModule, the LightningDataModule adapter around ``TaskData``, and the callback
that writes ``checkpoints/last.ckpt`` periodically and when the run is preempted.

Resumed runs equal uninterrupted ones because nothing in training depends on history that a
checkpoint would not hold: each step's batch is a pure function of (seed, step), and so is the
randomness inside the step (dropout, randomized positions), which is re-seeded at every step.
Lightning restores the weights, optimiser, scheduler and step counter.

Several processes (DDP): ``data.batch_size`` is the global batch. Every rank builds the same
global batch of a step and keeps its rows ``rank::world_size``, so two ranks train on exactly
the data of one device. Validation statistics are summed over ranks before they are logged.
"""

from __future__ import annotations

import itertools
import math
import signal
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from lengen.checkpoints import Preempted
from lengen.checks import TrainingDiverged
from lengen.data.datamodule import TaskData, mix_seed
from lengen.evaluate import batch_stats, loss_sum, summarise


def warmup_cosine(step: int, *, warmup_steps: int, max_steps: int, min_lr_ratio: float) -> float:
    """LR multiplier: linear warmup to 1, then cosine down to min_lr_ratio at max_steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


class LitModel(pl.LightningModule):
    """Next-token / answer-slot cross-entropy on scored tokens; AdamW, warmup + cosine.

    Args:
        model: any lengen model; called as ``model(**batch["inputs"])``.
        optim: ``lr``, ``weight_decay``, ``warmup_steps``, ``min_lr_ratio``, ``betas``.
        max_steps: the horizon of the learning-rate schedule (``trainer.max_steps``).
        config: the run's resolved config, stored in checkpoints to rebuild the model.
        seed: the training seed; with the step (and rank) it seeds each step's randomness.
        compile: run the training forward through ``torch.compile`` (``model.compile``); the
            weights and checkpoints stay those of ``model``; evaluation stays eager.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optim: dict,
        max_steps: int,
        config: dict | None = None,
        seed: int = 0,
        compile: bool = False,
    ):
        super().__init__()
        self.model = model
        self.optim = dict(optim)
        self.max_steps = max_steps
        self.config = config
        self.seed = seed
        self.train_tokens = 0
        # a compiled function, not a module: no second copy of the weights in state_dict
        self._compiled_forward = torch.compile(model.forward) if compile else None

    def training_step(self, batch, batch_idx):
        # Dropout and randomized positions draw from the global RNG. Seeding it from (seed,
        # step, rank) makes each step's draws independent of whatever ran before (validation,
        # a dataloader iterator, a restart), so a resumed run repeats them exactly.
        torch.manual_seed(mix_seed(self.seed, self.global_step, 2, self.global_rank))
        logits = (self._compiled_forward or self.model)(**batch["inputs"])
        summed = loss_sum(logits, batch["targets"])  # one cross-entropy serves loss and stats
        stats = batch_stats(logits, batch["targets"], loss=summed)
        loss = summed / max(stats["tokens"], 1.0)  # mean over scored tokens
        if not math.isfinite(stats["loss_sum"]):  # already on the host: no extra sync
            raise TrainingDiverged(
                f"training diverged at step {self.global_step}: the loss is "
                f"{stats['loss_sum']}; nothing after this step is saved (checkpoints already in "
                f"checkpoints/ are kept); allowed: a lower optim.lr, more optim.warmup_steps, "
                f"trainer.gradient_clip_val, or another seed"
            )
        # tokens of the global batch: every rank trains on an equal share
        shard_tokens = sum(t.numel() for t in batch["inputs"].values())
        self.train_tokens += shard_tokens * self.trainer.world_size
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/accuracy", stats["correct_tokens"] / max(stats["tokens"], 1.0))
        return loss

    def validation_step(self, batch, batch_idx):
        if batch_idx % self.trainer.world_size != self.trainer.global_rank:
            return  # every rank sees every batch and scores its share of them
        stats = batch_stats(self.model(**batch["inputs"]), batch["targets"])
        self._val_stats = {k: self._val_stats.get(k, 0.0) + v for k, v in stats.items()}

    def on_validation_epoch_start(self):
        self._val_stats = {}

    def on_validation_epoch_end(self):
        keys = ("loss_sum", "tokens", "correct_tokens", "exact", "examples")
        local = torch.tensor(
            [self._val_stats.get(k, 0.0) for k in keys], dtype=torch.float64, device=self.device
        )
        total = self.trainer.strategy.reduce(local, reduce_op="sum")  # a no-op on one device
        stats = dict(zip(keys, total.tolist(), strict=True))
        if stats["examples"]:
            metrics = summarise(stats)
            # the values are already global; sync_dist only silences Lightning's DDP warning
            self.log("val/loss", metrics["loss"], prog_bar=True, sync_dist=True)
            self.log("val/accuracy", metrics["accuracy"], prog_bar=True, sync_dist=True)
            self.log("val/exact_match", metrics["exact_match"], sync_dist=True)

    def configure_optimizers(self):
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            # matrices decay; biases, norms and embedding tables do not
            is_matrix = param.ndim >= 2 and "embedding" not in name and ".table." not in name
            (decay if is_matrix else no_decay).append(param)
        groups = [
            {"params": decay, "weight_decay": self.optim.get("weight_decay", 0.0)},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        # fused: one kernel for all parameters (CUDA and, since torch 2.4, CPU: 3x faster steps
        # than the foreach default here). Not under mixed precision: Lightning then refuses
        # gradient clipping with an optimizer that unscales gradients itself, as fused ones do.
        precision = str(self._trainer.precision) if self._trainer is not None else ""
        fused = "mixed" not in precision and all(
            p.device.type in ("cpu", "cuda") for group in groups for p in group["params"]
        )
        optimizer = torch.optim.AdamW(
            groups,
            lr=self.optim["lr"],
            betas=tuple(self.optim.get("betas", (0.9, 0.98))),
            fused=fused or None,
        )
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: warmup_cosine(
                step,
                warmup_steps=self.optim.get("warmup_steps", 0),
                max_steps=self.max_steps,
                min_lr_ratio=self.optim.get("min_lr_ratio", 0.1),
            ),
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint):
        checkpoint["lengen"] = {"config": self.config, "train_tokens": self.train_tokens}

    def on_load_checkpoint(self, checkpoint):
        self.train_tokens = checkpoint.get("lengen", {}).get("train_tokens", 0)


def shard(batch: dict, rank: int, world_size: int) -> dict:
    """This rank's rows ``rank::world_size`` of a global batch."""
    if world_size == 1:
        return batch
    return {
        "inputs": {k: v[rank::world_size] for k, v in batch["inputs"].items()},
        "targets": batch["targets"][rank::world_size],
    }


class _Steps(IterableDataset):
    """The endless stream of training batches, each a pure function of (seed, step).

    With n loader workers, worker w builds steps start + w, start + w + n, …; the DataLoader
    takes one batch from each worker in turn, so the stream is the same as without workers."""

    def __init__(self, data: TaskData, start_step: int = 0, rank: int = 0, world_size: int = 1):
        self.data = data
        self.start_step = start_step
        self.rank = rank
        self.world_size = world_size

    def __iter__(self):
        worker = get_worker_info()
        if worker is None:
            batches = self.data.train_batches(self.start_step)
        else:
            steps = itertools.count(self.start_step + worker.id, worker.num_workers)
            batches = map(self.data.train_batch, steps)
        for batch in batches:
            yield shard(batch, self.rank, self.world_size)


class DataModule(pl.LightningDataModule):
    """Serves ``TaskData`` to Lightning: training stream, in-distribution validation.

    ``num_workers`` (``data.num_workers``) builds training batches in that many processes."""

    def __init__(self, data: TaskData, num_workers: int = 0):
        super().__init__()
        self.data = data
        self.num_workers = num_workers

    def train_dataloader(self):
        # A resumed run's step counter is restored before Lightning asks for the data, so the
        # stream starts at the first step not yet trained.
        trainer = self.trainer
        steps = _Steps(self.data, trainer.global_step, trainer.global_rank, trainer.world_size)
        workers = {"num_workers": self.num_workers, "persistent_workers": self.num_workers > 0}
        return DataLoader(steps, batch_size=None, **workers)

    def val_dataloader(self):
        return DataLoader(self.data.val_batches(), batch_size=None)


#: Signals that stop training with a checkpoint: SIGTERM (kill, most schedulers) and SIGUSR1
#: (SLURM's warning before the time limit, e.g. ``sbatch --signal=USR1@120``).
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


def save_checkpoint(trainer: pl.Trainer, path: Path) -> None:
    """Lightning checkpoint under a temporary name, then renamed into place (rank 0 writes)."""
    tmp = path.with_name(f".{path.name}.tmp")
    trainer.save_checkpoint(tmp, weights_only=False)  # every rank calls it; rank 0 writes
    if trainer.is_global_zero:
        tmp.replace(path)
    trainer.strategy.barrier("lengen.save_checkpoint")


class StepCheckpoint(pl.Callback):
    """``last.ckpt`` every ``every_n_steps`` steps and when a preemption signal arrives.

    A step's checkpoint is written once the step is complete: at the end of the training batch,
    or, on steps followed by validation, once validation is done (so a resumed run neither
    repeats nor skips it). A signal stops training after the next such checkpoint, at the start
    of the following step (once the finished step is logged); a signal during the last step
    stops the run after training, before evaluation.

    The signal handlers replace Lightning's own while training runs (Lightning registers its
    handlers just before ``on_train_start`` and restores the earlier ones at teardown); on SLURM
    this replaces Lightning's auto-requeue on SIGUSR1 too (see docs/scaling.md).
    """

    def __init__(self, path: Path, every_n_steps: int | None):
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self.signum = 0  # set by the handler, at any moment
        self.stop_signum = 0  # agreed by all ranks at a step's end
        self.pending = False  # save once this step's validation is done
        self.saved_step = -1

    def _handle(self, signum, frame) -> None:
        self.signum = signum

    def on_train_start(self, trainer, pl_module) -> None:
        self.signum = self.stop_signum = 0
        self.pending = False
        for signum in PREEMPTION_SIGNALS:
            signal.signal(signum, self._handle)
        self.saved_step = trainer.global_step  # a resumed run's checkpoint holds this step

    def _signalled(self, trainer, pl_module) -> int:
        """The signal number if any rank received one (all ranks agree)."""
        if trainer.world_size == 1:
            return self.signum
        import torch.distributed as dist

        flag = torch.tensor([self.signum], device=pl_module.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

    def save(self, trainer) -> None:
        if trainer.global_step == self.saved_step:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(trainer, self.path)
        self.saved_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step  # steps done, this one included
        self.stop_signum = self._signalled(trainer, pl_module)
        due = self.every_n_steps and step % self.every_n_steps == 0
        if not (due or self.stop_signum):
            return
        every = trainer.val_check_batch
        if isinstance(every, int) and step % every == 0 and step < trainer.max_steps:
            self.pending = True  # validation runs after this step: save after it
        else:
            self.save(trainer)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self.pending and not trainer.sanity_checking:
            self.pending = False
            self.save(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.stop_signum:
            self.save(trainer)  # no-op unless the validation that should save never ran
            raise Preempted(self.stop_signum, trainer.global_step, self.path)

    def on_train_end(self, trainer, pl_module) -> None:
        # a signal during the last step: training is complete, stop before evaluating
        signum = self.stop_signum or self._signalled(trainer, pl_module)
        if signum:
            self.save(trainer)
            raise Preempted(signum, trainer.global_step, self.path)
        if self.pending:
            self.save(trainer)

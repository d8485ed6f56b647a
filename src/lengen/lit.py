"""The LightningModule and the LightningDataModule adapter around a data source; the callback that
writes checkpoints is ``lengen.checkpoints.StepCheckpoint``.

Resumed runs equal uninterrupted ones because nothing in training depends on history that a
checkpoint would not hold: each step's batch is a pure function of (seed, step), and so is the
randomness inside the step (dropout, randomized positions), which is re-seeded at every step.
Lightning restores the weights, optimiser, scheduler and step counter.

The training step leaves its statistics on the device: the loss, token and correct-token sums
of each step wait there (with the step's number) until the host needs them, at a logged row, a
validation, a checkpoint or the end of training (every step on a CPU, where reading them costs
nothing); then one copy brings them all, and a non-finite loss stops the run naming the first
step where it appeared, before anything from after that step is saved. On a GPU the host thus
queues the next steps' kernels while the device runs, instead of waiting on every step.

Several processes (DDP): ``data.batch_size`` is the global batch. Every rank builds the same
global batch of a step and keeps its rows ``rank::world_size``, so two ranks train on exactly
the data of one device. Validation statistics are summed over ranks before they are logged.
"""

from __future__ import annotations

import itertools
import logging
import math
import warnings

import pytorch_lightning as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from lengen.checks import TrainingDiverged
from lengen.data.source import IGNORE, DataSource, mix_seed
from lengen.evaluation.metrics import STAT_KEYS, add_stats, loss_sum, summarise
from lengen.evaluation.metrics import batch_stats as host_batch_stats
from lengen.model.mixers.state import carried_states, restore_carried_states
from lengen.options import OptimConfig
from lengen.schema import node_options


class _DropLitLoggerTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in record.getMessage()


def quiet_known_noise() -> None:
    """Silence three messages pytorch-lightning 2.6.6 prints with torch 2.13 on every run (an
    advert for another logger, a deprecation inside Lightning, and, wherever SLURM is installed,
    advice to prepend ``srun``: lengen's jobs reach SLURM through ``hydra/launcher=slurm``,
    docs/cluster.md), so real warnings stand out."""
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*is deprecated")
    warnings.filterwarnings("ignore", message=r".*The .srun. command is available on your system")
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    if not any(isinstance(f, _DropLitLoggerTip) for f in rank_zero.filters):
        rank_zero.addFilter(_DropLitLoggerTip())


def warmup_cosine(step: int, *, warmup_steps: int, max_steps: int, min_lr_ratio: float) -> float:
    """LR multiplier: linear warmup to 1, then cosine down to min_lr_ratio at max_steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def batch_stats(logits: Tensor, targets: Tensor, loss: Tensor) -> dict[str, Tensor]:
    """A training step's summed statistics, left on the device (no host sync): ``loss`` (the
    step's ``loss_sum``), and the scored and correct tokens of logits (B, T, V) against targets
    (B, T); ``lengen.evaluation.metrics.batch_stats`` is the host version validation uses."""
    scored = targets != IGNORE  # (B, T)
    correct = (logits.detach().argmax(-1) == targets) & scored  # (B, T)
    return {"loss_sum": loss.detach(), "tokens": scored.sum(), "correct_tokens": correct.sum()}


def schedule_multiplier(*, warmup_steps: int, max_steps: int, min_lr_ratio: float):
    """``warmup_cosine`` as the scheduler's per-step function, held at its max_steps value
    after max_steps. Computed at each step (a few float operations), not tabulated: a table
    of max_steps + 1 floats held gigabytes, and took hours to build before the first step, for
    a large ``trainer.max_steps`` (the hostile trial's ES05: 10**12)."""

    def multiplier(step: int) -> float:
        return warmup_cosine(
            min(step, max_steps),
            warmup_steps=warmup_steps,
            max_steps=max_steps,
            min_lr_ratio=min_lr_ratio,
        )

    return multiplier


class LitModel(pl.LightningModule):
    """Next-token / answer-slot cross-entropy on scored tokens; AdamW, warmup + cosine.

    Args:
        model: any lengen model; called as ``model(**batch["inputs"])``.
        optim: ``lr``, ``weight_decay``, ``warmup_steps``, ``min_lr_ratio``, ``betas``: the
            optimiser's typed config, or its keys (missing ones take ``OptimConfig``'s
            defaults, the yaml's).
        max_steps: the horizon of the learning-rate schedule (``trainer.max_steps``).
        config: the run's resolved config, stored in checkpoints to rebuild the model.
        seed: the training seed; with the step (and rank) it seeds each step's randomness.
        compile: run the training forward through ``torch.compile`` (``model.compile``); the
            weights and checkpoints stay those of ``model``; evaluation stays eager. A string
            is torch.compile's ``mode`` (``"reduce-overhead"``: CUDA graphs; scripts/bench.py).
        sync_every: read the training statistics back to the host every this many steps at
            most (module docstring); None: every step on a CPU, else
            ``trainer.log_every_n_steps``. Logged rows, validations, checkpoints and the end
            of training read them whatever the value.
        fused: AdamW's fused kernel; None: wherever it is right (not under fp16's loss scaler).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optim: OptimConfig | dict,
        max_steps: int,
        config: dict | None = None,
        seed: int = 0,
        compile: bool | str = False,
        sync_every: int | None = None,
        fused: bool | None = None,
    ):
        super().__init__()
        self.model = model
        if not isinstance(optim, OptimConfig):
            optim = OptimConfig.from_keys(node_options(dict(optim)))
        self.optim = optim
        self.max_steps = max_steps
        self.config = config
        self.seed = seed
        self.train_tokens = 0
        self.last_validation: dict[str, float] = {}  # the latest in-distribution validation
        self.last_logged: dict = {}  # the training row of the latest step
        self.row_logged = False  # whether Lightning writes that row to the loggers
        # a compiled function, not a module: no second copy of the weights in state_dict
        mode = {"mode": compile} if isinstance(compile, str) else {}
        self._compiled_forward = torch.compile(model.forward, **mode) if compile else None
        self.sync_every = sync_every
        self.fused = fused
        # steps trained since the host last read their statistics: (step, its training row,
        # its stats on the device)
        self._pending: list[tuple[int, dict, dict[str, Tensor]]] = []

    def training_step(self, batch, batch_idx):
        # Dropout and randomized positions draw from the global RNG. Seeding it from (seed,
        # step, rank) makes each step's draws independent of whatever ran before (validation,
        # a dataloader iterator, a restart), so a resumed run repeats them exactly.
        torch.manual_seed(mix_seed(self.seed, self.global_step, 2, self.global_rank))
        logits = (self._compiled_forward or self.model)(**batch["inputs"])
        summed = loss_sum(logits, batch["targets"])  # one cross-entropy serves loss and stats
        stats = batch_stats(logits, batch["targets"], loss=summed)
        # tensors stay as they are; host floats (a test's stand-in for batch_stats) become ones
        stats = {k: torch.as_tensor(v, device=summed.device) for k, v in stats.items()}
        tokens = stats["tokens"].clamp(min=1)
        loss = summed / tokens  # mean over scored tokens
        # tokens of the global batch: every rank trains on an equal share
        # (``positions`` (T, A) of grid tasks is shared by the rows: coordinates, not tokens)
        shard_tokens = sum(t.numel() for k, t in batch["inputs"].items() if k != "positions")
        self.train_tokens += shard_tokens * self.trainer.world_size
        # the training row of this step (progress lines read its loss) and whether Lightning
        # logs it after this step's checkpoint: checkpoints carry only a logged row, since a
        # resumed log that restored a step the uninterrupted run skips (every
        # trainer.log_every_n_steps) would gain a row (#34)
        self.row_logged = self.trainer._logger_connector.should_update_logs  # Lightning's rule
        row = {"epoch": self.current_epoch, "step": self.global_step}
        # on the device until read: the loss as the host computes it (float64 over the count)
        row["train/loss"] = stats["loss_sum"].double() / tokens.double()
        self.last_logged = row
        self._pending.append((self.global_step, row, stats))
        if self.row_logged or self.trainer.progress_bar_callback is not None:
            # float64 first, as the host's division of the counts, then Lightning's float32
            accuracy = (stats["correct_tokens"].double() / tokens.double()).float()
            self.log("train/loss", loss, prog_bar=True)
            self.log("train/accuracy", accuracy)
        if self.row_logged or len(self._pending) >= self._sync_interval():
            self.read_training_stats()
        return loss

    def _sync_interval(self) -> int:
        if self.sync_every is not None:
            return max(1, self.sync_every)
        return 1 if self.device.type == "cpu" else max(1, self.trainer.log_every_n_steps)

    def read_training_stats(self) -> None:
        """Bring the pending steps' statistics to the host in one copy: stop with
        ``TrainingDiverged`` at the first step whose loss is not finite, else turn the latest
        training row into host floats (module docstring)."""
        if not self._pending:
            return
        keys = ("loss_sum", "tokens", "correct_tokens")
        stacked = torch.stack(
            [torch.stack([stats[k].double() for k in keys]) for _, _, stats in self._pending]
        )  # (steps, 3): float64 holds the float32 sums and the counts exactly
        values = stacked.tolist()  # the one host sync
        pending, self._pending = self._pending, []
        for (step, row, _), (loss_value, tokens, correct) in zip(pending, values, strict=True):
            if not math.isfinite(loss_value):
                raise TrainingDiverged(
                    f"training diverged at step {step}: the loss is {loss_value}; nothing "
                    f"after this step is saved (checkpoints already in checkpoints/ are kept); "
                    f"allowed: a lower optim.lr, more optim.warmup_steps, "
                    f"trainer.gradient_clip_val, or another seed"
                )
            row["train/loss"] = loss_value / max(tokens, 1.0)  # as a host float before
            row["train/accuracy"] = correct / max(tokens, 1.0)

    def on_validation_start(self):
        self.read_training_stats()  # a diverged run stops before it validates

    def on_train_end(self):
        self.read_training_stats()

    def validation_step(self, batch, batch_idx):
        if batch_idx % self.trainer.world_size != self.trainer.global_rank:
            return  # every rank sees every batch and scores its share of them
        logits = self.model(**batch["inputs"])
        add_stats(self._val_stats, host_batch_stats(logits, batch["targets"]))

    def on_validation_epoch_start(self):
        self._val_stats = {}

    def on_validation_epoch_end(self):
        local = torch.tensor(
            [self._val_stats.get(k, 0.0) for k in STAT_KEYS],
            dtype=torch.float64,
            device=self.device,
        )
        total = self.trainer.strategy.reduce(local, reduce_op="sum")  # a no-op on one device
        stats = dict(zip(STAT_KEYS, total.tolist(), strict=True))
        if stats["examples"]:
            metrics = summarise(stats)
            self.last_validation = {f"val/{k}": float(v) for k, v in metrics.items()}
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
            {"params": decay, "weight_decay": self.optim.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        # fused: one kernel for all parameters (CUDA and, since torch 2.4, CPU: 3x faster steps
        # than the foreach default here). Not with fp16's loss scaler, whose unscaling a fused
        # step would do itself; under bf16 autocast configure_gradient_clipping clips.
        precision = str(self._trainer.precision) if self._trainer is not None else ""
        fused = self.fused
        if fused is None:
            fused = precision != "16-mixed" and all(
                p.device.type in ("cpu", "cuda") for group in groups for p in group["params"]
            )
        optimizer = torch.optim.AdamW(
            groups,
            lr=self.optim.lr,
            betas=tuple(self.optim.betas),
            fused=fused or None,
        )
        # a closure, not a callable object: LambdaLR would save an object's state in checkpoints
        multiplier = schedule_multiplier(
            warmup_steps=self.optim.warmup_steps,
            max_steps=self.max_steps,
            min_lr_ratio=self.optim.min_lr_ratio,
        )
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def configure_gradient_clipping(
        self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None
    ) -> None:
        # Lightning refuses to clip for a fused optimizer under any autocast, for fp16's loss
        # scaler; bf16 has none, so its gradients are the true ones and are clipped as Lightning
        # clips in fp32 (the same parameters, in the optimiser's order)
        fused = bool(optimizer.defaults.get("fused"))
        if gradient_clip_val and fused and str(self.trainer.precision) == "bf16-mixed":
            params = [p for group in optimizer.param_groups for p in group["params"]]
            if gradient_clip_algorithm == "value":
                torch.nn.utils.clip_grad_value_(params, gradient_clip_val)
            else:
                torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_save_checkpoint(self, checkpoint):
        self.read_training_stats()  # no checkpoint of a diverged run; the row in host floats
        checkpoint["lengen"] = {
            "config": self.config,
            "train_tokens": self.train_tokens,
            # a run resumed after its last validation (killed while evaluating, say) reports it
            "validation": self.last_validation,
            "last_logged": self.last_logged if self.row_logged else {},
            # recurrent layers' states kept between batches (state_init=passing, fitted_noise)
            "recurrent_states": carried_states(self.model),
        }

    def on_load_checkpoint(self, checkpoint):
        state = checkpoint.get("lengen", {})
        self.train_tokens = state.get("train_tokens", 0)
        self.last_validation = state.get("validation", {})
        restore_carried_states(self.model, state.get("recurrent_states", {}))


def shard(batch: dict, rank: int, world_size: int) -> dict:
    """This rank's rows ``rank::world_size`` of a global batch (grid tasks' ``positions``
    (T, A), shared by every row, is kept whole)."""
    if world_size == 1:
        return batch
    return {
        "inputs": {
            k: v if k == "positions" else v[rank::world_size] for k, v in batch["inputs"].items()
        },
        "targets": batch["targets"][rank::world_size],
    }


class _Steps(IterableDataset):
    """The endless stream of training batches, each a pure function of (seed, step).

    With n loader workers, worker w builds steps start + w, start + w + n, …; the DataLoader
    takes one batch from each worker in turn, so the stream is the same as without workers."""

    def __init__(self, data: DataSource, start_step: int = 0, rank: int = 0, world_size: int = 1):
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
    """Serves a data source to Lightning: training stream, in-distribution validation.

    ``num_workers`` (``data.num_workers``) builds training batches in that many processes."""

    def __init__(self, data: DataSource, num_workers: int = 0):
        super().__init__()
        self.data = data
        self.num_workers = num_workers

    def train_dataloader(self):
        # A resumed run's step counter is restored before Lightning asks for the data, so the
        # stream starts at the first step not yet trained.
        trainer = self.trainer
        steps = _Steps(self.data, trainer.global_step, trainer.global_rank, trainer.world_size)
        workers = {"num_workers": self.num_workers, "persistent_workers": self.num_workers > 0}
        # page-locked batches: the copy to a GPU is queued, not staged by the host (a stand-in
        # trainer without a strategy, as tests make, is taken for a CPU one)
        strategy = getattr(trainer, "strategy", None)
        pin = strategy is not None and strategy.root_device.type == "cuda"
        return DataLoader(steps, batch_size=None, pin_memory=pin, **workers)

    def val_dataloader(self):
        return DataLoader(self.data.val_batches(), batch_size=None)


class CriterionStop(pl.Callback):
    """Train to a criterion: stop once in-distribution validation ``val/<metric>`` is at or
    above ``target`` at ``checks`` validations in a row (Lightning's EarlyStopping stops at the
    first; a streak guards against one lucky check). ``trainer.max_steps`` stays the budget and
    the learning-rate horizon. Its state travels in checkpoints, so resumed runs stop alike."""

    def __init__(self, metric: str, target: float, checks: int):
        self.metric = metric
        self.target = target
        self.checks = checks
        self.streak = 0
        self.reached_at_step: int | None = None

    def on_validation_end(self, trainer, pl_module) -> None:
        value = trainer.callback_metrics.get(f"val/{self.metric}")
        if trainer.sanity_checking or self.reached_at_step is not None or value is None:
            return
        self.streak = self.streak + 1 if float(value) >= self.target else 0
        if self.streak >= self.checks:
            self.reached_at_step = trainer.global_step
            trainer.should_stop = True

    def state_dict(self) -> dict:
        return {"streak": self.streak, "reached_at_step": self.reached_at_step}

    def load_state_dict(self, state_dict: dict) -> None:
        self.streak = state_dict["streak"]
        self.reached_at_step = state_dict["reached_at_step"]

    def record(self) -> dict:
        """What results.json says: the criterion, and whether and when it was reached."""
        return {
            "metric": f"val/{self.metric}",
            "target": self.target,
            "checks": self.checks,
            "reached": self.reached_at_step is not None,
            "reached_at_step": self.reached_at_step,
        }

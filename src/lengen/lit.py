"""The LightningModule and the LightningDataModule adapter around ``TaskData``."""

from __future__ import annotations

import math

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, IterableDataset

from lengen.checks import TrainingDiverged
from lengen.data.datamodule import TaskData
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
    """

    def __init__(
        self, model: torch.nn.Module, optim: dict, max_steps: int, config: dict | None = None
    ):
        super().__init__()
        self.model = model
        self.optim = dict(optim)
        self.max_steps = max_steps
        self.config = config
        self.train_tokens = 0

    def training_step(self, batch, batch_idx):
        logits = self.model(**batch["inputs"])
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
        self.train_tokens += sum(t.numel() for t in batch["inputs"].values())
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/accuracy", stats["correct_tokens"] / max(stats["tokens"], 1.0))
        return loss

    def validation_step(self, batch, batch_idx):
        stats = batch_stats(self.model(**batch["inputs"]), batch["targets"])
        self._val_stats = {k: self._val_stats.get(k, 0.0) + v for k, v in stats.items()}

    def on_validation_epoch_start(self):
        self._val_stats = {}

    def on_validation_epoch_end(self):
        if self._val_stats:
            metrics = summarise(self._val_stats)
            self.log("val/loss", metrics["loss"], prog_bar=True)
            self.log("val/accuracy", metrics["accuracy"], prog_bar=True)
            self.log("val/exact_match", metrics["exact_match"])

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
        optimizer = torch.optim.AdamW(
            groups, lr=self.optim["lr"], betas=tuple(self.optim.get("betas", (0.9, 0.98)))
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


class _Steps(IterableDataset):
    """The endless stream of training batches, each a pure function of (seed, step)."""

    def __init__(self, data: TaskData, start_step: int = 0):
        self.data = data
        self.start_step = start_step

    def __iter__(self):
        return self.data.train_batches(self.start_step)


class DataModule(pl.LightningDataModule):
    """Serves ``TaskData`` to Lightning: training stream, in-distribution validation."""

    def __init__(self, data: TaskData):
        super().__init__()
        self.data = data

    def train_dataloader(self):
        return DataLoader(_Steps(self.data), batch_size=None)

    def val_dataloader(self):
        return DataLoader(self.data.val_batches(), batch_size=None)

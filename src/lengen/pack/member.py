"""One member of a pack: a run of its own, with its directory, data, model, logger, criterion
and the files a solo run writes (config, data card, CSV log, checkpoints in Lightning's
format, results, figures, calibration entry)."""

from __future__ import annotations

import contextlib
import time
from types import SimpleNamespace

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig

from lengen.atomic import replace_durably
from lengen.build import instantiate_named
from lengen.checkpoints import write_failure
from lengen.checks import CheckpointWriteError, TrainingDiverged
from lengen.evaluation.metrics import add_stats, batch_stats, summarise
from lengen.lit import CriterionStop
from lengen.rundir import RunDirectory, resolved_config


def as_logged(value: float) -> float:
    """A value as Lightning logs it (``self.log`` holds it as a float32 tensor)."""
    return torch.tensor(float(value), dtype=torch.float32).item()


class Member:
    """A run of the pack: what ``lengen.train.run`` holds for one run, without a trainer."""

    def __init__(self, cfg: DictConfig, directory: RunDirectory, index: int):
        from lengen.build import build

        self.cfg, self.directory, self.index = cfg, directory, index
        self.data, self.model, self.lengths = build(cfg)
        self.resumed = None  # (checkpoint, step, last row) once the directory is owned
        self.state: dict | None = None  # the checkpoint continued from
        self.train_tokens = 0
        self.last_validation: dict[str, float] = {}
        self.last_logged: dict = {}
        self.row_logged = False
        self.validations = 0
        self.criterion = None
        if cfg.trainer.get("criterion_target") is not None:
            trainer = cfg.trainer
            self.criterion = CriterionStop(
                trainer.criterion_metric, trainer.criterion_target, trainer.criterion_checks
            )
        self.logger = None
        self.validation_row: dict = {}
        self.val_batches: list | None = None
        self.notes: list[str] = []
        #: results.json's record of the run it started from (lengen.rundir.init_from)
        self.started_from: dict = {}

    # -- starting --------------------------------------------------------------------------
    def start(self, resumed) -> None:
        """The owned directory's state: a fresh start or its checkpoint; the logger."""
        from lengen.build import position_warnings

        self.resumed = resumed
        self.directory.write_data_card(self.data, self.lengths)
        if resumed is not None:
            from lengen.checkpoints import load_checkpoint, load_weights

            self.state = load_checkpoint(resumed[0], "resume")
            load_weights(self.model, self.state, "resume")
            extra = self.state.get("lengen", {})
            self.train_tokens = extra.get("train_tokens", 0)
            self.last_validation = dict(extra.get("validation", {}))
            criterion = self.state.get("callbacks", {}).get("CriterionStop")
            if self.criterion is not None and criterion is not None:
                self.criterion.load_state_dict(criterion)
            self.validations = self.state.get("lengen", {}).get("pack_validations", 0)
        if self.cfg.init_from:  # fine-tuning, DroPE's route: start from another run's weights
            from lengen.checkpoints import load_checkpoint, load_weights
            from lengen.rundir.init_from import init_from_record

            base = load_checkpoint(self.cfg.init_from, "init_from")
            if resumed is None:
                load_weights(self.model, base, "init_from")
            self.started_from = init_from_record(self.cfg, base)  # results.json's, as solo's
        self.notes = position_warnings(self.model)
        self.logger = instantiate_named(self.cfg.logger, save_dir=str(self.directory.path))
        if self.logger:
            from lengen.loggers import open_csv_log

            open_csv_log(self.logger, resumed)
        if self.logger:
            self.logger.log_hyperparams(resolved_config(self.cfg))

    @property
    def start_step(self) -> int:
        return 0 if self.resumed is None else int(self.resumed[1])

    @property
    def reached(self) -> bool:
        return self.criterion is not None and self.criterion.reached_at_step is not None

    # -- each step ---------------------------------------------------------------------------
    def trained(
        self, step: int, batch: dict, loss: float, mean: float, accuracy: float, logged: bool
    ) -> None:
        """After step ``step`` (0-based) on ``batch``: its tokens, its training row (``loss``
        the float32 mean the solo run logs, ``mean`` the host's, which its checkpoint keeps),
        then the row of the validation after it."""
        self.train_tokens += sum(t.numel() for k, t in batch["inputs"].items() if k != "positions")
        self.last_logged = {"epoch": 0, "step": step}
        self.last_logged |= {"train/loss": mean, "train/accuracy": accuracy}
        self.row_logged = logged
        if self.logger and logged:
            row = {"train/loss": as_logged(loss), "train/accuracy": as_logged(accuracy)}
            self.logger.log_metrics({**row, "epoch": 0}, step=step)
        if self.logger and self.validation_row:
            self.logger.log_metrics({**self.validation_row, "epoch": 0}, step=step)
        self.validation_row = {}

    def diverged(self, step: int, loss: float) -> TrainingDiverged:
        """The solo run's error at this step, recorded in the member's directory."""
        error = TrainingDiverged(
            f"training diverged at step {step}: the loss is {loss}; nothing after this step is "
            f"saved (checkpoints already in checkpoints/ are kept); allowed: a lower optim.lr, "
            f"more optim.warmup_steps, trainer.gradient_clip_val, or another seed"
        )
        self.directory.record_failure(error)
        if self.logger:
            with contextlib.suppress(Exception):
                self.logger.finalize("failed")
        print(f"[{self.directory.path.name}] error: {error}", flush=True)
        return error

    def validate(self, step: int, device: torch.device) -> None:
        """In-distribution validation of the member's own model (loaded with its weights), as
        ``LitModel``'s validation; its rows logged at ``step`` (0-based); the criterion."""
        stats: dict = {}
        if self.val_batches is None:  # drawn once, as Lightning's val_dataloader is
            self.val_batches = self.data.val_batches()
        self.model.eval()
        with torch.inference_mode():
            for batch in self.val_batches:
                inputs = {k: v.to(device) for k, v in batch["inputs"].items()}
                add_stats(stats, batch_stats(self.model(**inputs), batch["targets"].to(device)))
        self.model.train()
        self.validations += 1
        if not stats.get("examples"):
            return
        metrics = summarise(stats)
        self.last_validation = {f"val/{k}": float(v) for k, v in metrics.items()}
        names = ("loss", "accuracy", "exact_match")
        self.validation_row = {f"val/{k}": as_logged(metrics[k]) for k in names}  # see trained
        if self.criterion is not None:  # its own rule, read from a trainer's view of this run
            logged = {f"val/{k}": torch.tensor(as_logged(v)) for k, v in metrics.items()}
            view = SimpleNamespace(
                callback_metrics=logged, sanity_checking=False, global_step=step + 1,
                should_stop=False,
            )  # fmt: skip
            self.criterion.on_validation_end(view, None)

    # -- the checkpoint ----------------------------------------------------------------------
    def checkpoint(self, step: int, optimizer_state: dict, schedule_state: dict):
        """The member's state after ``step`` steps in the layout of a solo run's
        ``checkpoints/last.ckpt`` (Lightning's), so eval.py, ``lengen.load_run`` and a solo
        ``resume=true`` read it; the model must hold the member's weights."""
        callbacks = {"CriterionStop": self.criterion.state_dict()} if self.criterion else {}
        return {
            "epoch": 0,
            "global_step": step,
            "pytorch-lightning_version": pl.__version__,
            "state_dict": {f"model.{k}": v for k, v in self.model.state_dict().items()},
            "loops": lightning_loops(step, self.validations, len(self.val_batches or [])),
            "callbacks": callbacks,
            "optimizer_states": [optimizer_state],
            "lr_schedulers": [schedule_state],
            "lengen": {
                "config": resolved_config(self.cfg),
                "train_tokens": self.train_tokens,
                "validation": self.last_validation,
                "last_logged": self.last_logged if self.row_logged else {},
                "pack_validations": self.validations,
            },
        }

    def save(self, state: dict) -> None:
        """Write the checkpoint under a temporary name, then rename it into place, after the
        logged rows are on disk (as ``StepCheckpoint.save``)."""
        if self.logger:
            self.logger.save()
        path = self.directory.checkpoint
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as handle:
                torch.save(state, handle)
            replace_durably(tmp, path)
        except (OSError, RuntimeError) as error:  # torch's writer: a RuntimeError on a full disk
            if (reason := write_failure(error, path.parent)) is None:
                raise
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise CheckpointWriteError(
                f"checkpoint: writing {path} failed ({reason}); allowed: free "
                f"the disk (or make it writable), then resume=auto with the same sweep"
            ) from None

    # -- the end -----------------------------------------------------------------------------
    def finish(self, step: int, device: torch.device, pack: dict, timing, cost: dict) -> dict:
        """Evaluate the member's own model and write its results, as a solo run does; ``cost``:
        results.json's ``timing`` (the pack's, ``lengen.train.timing_entry``)."""
        from lengen.train import evaluate_and_write, evaluation_progress, finish_logging

        extra = {
            "train_steps": step,
            "criterion": self.criterion.record() if self.criterion else None,
            "world_size": 1,
            "resumed": self.resumed is not None,
            "warnings": self.notes,
            "validation": dict(self.last_validation),
            "timing": cost,
            "pack": pack,
            **self.started_from,
        }
        started = time.monotonic()
        results = evaluate_and_write(
            self.cfg, self.model, self.data, self.lengths, device=device,
            directory=self.directory, train_tokens=self.train_tokens, extra=extra,
            progress=evaluation_progress(self.cfg, self.directory),
        )  # fmt: skip
        if timing is not None:
            timing.finished(time.monotonic() - started)
        finish_logging(self.logger, results, self.directory)
        return results


def lightning_loops(step: int, validations: int, val_batches: int) -> dict:
    """The ``loops`` entry of a Lightning checkpoint after ``step`` steps and ``validations``
    validations of ``val_batches`` batches: what ``Trainer.fit(ckpt_path=...)`` restores the
    step counter from (pytorch-lightning 2.x's layout)."""

    def progress(n: int, processed: bool = True) -> dict:
        counts = {"ready": n, "completed": n, "started": n, "processed": n}
        if not processed:
            counts.pop("processed")
        return counts

    def batches(total: int, current: int, last: bool) -> dict:
        return {"total": progress(total), "current": progress(current), "is_last_batch": last}

    ready = {"ready": step, "completed": step}
    epoch = {"ready": 1, "completed": 0, "started": 1, "processed": 0}
    empty = batches(0, 0, False)
    return {
        "fit_loop": {
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": step},
            "epoch_loop.batch_progress": batches(step, step, False),
            "epoch_loop.scheduler_progress": {"total": ready, "current": dict(ready)},
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.automatic_optimization.optim_progress": {
                "optimizer": {
                    "step": {"total": dict(ready), "current": dict(ready)},
                    "zero_grad": {
                        "total": progress(step, processed=False),
                        "current": progress(step, processed=False),
                    },
                }
            },
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_loop.manual_optimization.optim_step_progress": {
                "total": {"ready": 0, "completed": 0},
                "current": {"ready": 0, "completed": 0},
            },
            "epoch_loop.val_loop.state_dict": {},
            "epoch_loop.val_loop.batch_progress": batches(
                validations * val_batches, val_batches if validations else 0, validations > 0
            ),
            # mid-epoch: a lengen run's one endless epoch has started and not ended
            "epoch_progress": {"total": epoch, "current": dict(epoch)},
        },
        "validate_loop": {"state_dict": {}, "batch_progress": empty},
        "test_loop": {"state_dict": {}, "batch_progress": batches(0, 0, False)},
        "predict_loop": {
            "state_dict": {},
            "batch_progress": {"total": progress(0), "current": progress(0)},
        },
    }

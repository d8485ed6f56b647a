"""lengen's sweeper: Hydra's basic sweeper (every combination of a -m sweep's a,b,c), which
also says what the sweep will run and can skip the combinations that cannot run
(configs/hydra/sweeper/lengen.yaml, which configs/train.yaml selects; docs/cluster.md).

It lives in ``hydra_plugins`` because Hydra instantiates sweepers only from there, and imports
nothing of lengen's at module level: Hydra imports every plugin at every start.

* **The plan.** Before the first job it writes ``<sweep dir>/.jobs/sweep.json`` (how many runs,
  how many run at once, the skipped combinations, when it started, every run's estimate from
  this machine's calibration: ``lengen.sweep_estimate``) and prints one line, then the total
  ("sweep: 8 runs, ≈ 4m10s in all (…)"). Each job reads it at its start to say "run k of N"
  and the time left, from the runs still to go (``lengen.cli.SweepReport``); the report at
  the end says the total time. Jobs in other
  processes (joblib's workers, SLURM jobs) read it from the sweep folder.
* **Skipping** (``hydra.sweeper.skip_invalid=true``): a job that the pre-check refuses
  (``lengen.preflight.check_sweep_jobs``, which train.py runs before Hydra starts; asked here
  again only for a job it did not see) is left out of the list every launcher gets: nothing is
  written for it, no SLURM job is submitted for it. Each is named at the start with its
  one-line refusal, and the report lists them apart from the runs.
* **Packs** (``hydra.sweeper.pack=N``, N > 1): jobs that differ only in keys a pack's members
  may differ in (the seeds) are grouped into packs of at most N (``lengen.sweep_packs``), and
  each pack goes to the launcher as one job, which trains its members together in one process
  (``lengen.pack.train_pack``) into the run directories their single jobs would have. The plan
  counts runs, not jobs ("16 runs in 2 packs"); the pre-check refused a pack that cannot train
  before anything was written (a sweep started without it is refused here, before any job).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf


class LengenSweeper(BasicSweeper):
    def __init__(
        self,
        max_batch_size=None,
        params=None,
        skip_invalid: bool = False,
        pack: int = 1,
        pack_members: str | None = None,  # a pack job's own (lengen.sweep_packs), not the sweep's
    ) -> None:
        super().__init__(max_batch_size, params)
        self.skip_invalid = skip_invalid
        self.pack = pack

    def sweep(self, arguments: list[str]) -> Any:
        """The basic sweeper's sweep over the jobs that are not skipped, plan first."""
        from lengen.cli import SweepReport
        from lengen.preflight import checked_jobs, skip_invalid
        from lengen.rundir.sweep_stop import (
            ForwardSignals,
            remember_folders,
            stopped_by,
            workers_keep_signals,
        )
        from lengen.sweep_estimate import total_line
        from lengen.sweep_packs import pack_size, plan_line, plan_packs

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        parsed = parser.parse_overrides([*self._parse_config(), *arguments])
        jobs = [job for batch in self.split_arguments(parsed, None) for job in batch]
        swept = {o.get_key_element() for o in parsed if o.is_sweep_override()}
        skipped = []
        if skip_invalid(self.skip_invalid):
            jobs, skipped = self._runnable(jobs, swept)
        runs = len(jobs)
        loader = self.hydra_context.config_loader
        jobs, sizes = plan_packs(
            jobs, lambda job: loader.load_sweep_config(self.config, list(job)),
            pack_size(self.pack),
        )  # fmt: skip
        size = self.max_batch_size or len(jobs) or 1
        self.overrides = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        workers = parallel_runs(self.config.hydra.launcher, len(jobs))
        estimates = self._estimates(jobs, sizes)
        SweepReport.write_plan(
            sweep_dir, runs=runs, workers=workers, skipped=skipped, jobs=sizes, estimates=estimates
        )
        remember_folders(sweep_dir)  # a stopped sweep's jobs that never start remove only theirs
        at_once = f", {workers} at a time" if workers > 1 else ", one after another"
        lines = [f"sweep: {plan_line(runs, sizes)}{at_once}, into {sweep_dir}"]
        if skipped:
            lines[0] += f"; {len(skipped)} combination{'s' * (len(skipped) != 1)} skipped"
            lines += [f"sweep: skipped {s['overrides']}: {s['reason']}" for s in skipped]
        if estimates is not None and (total := total_line(estimates, workers)) is not None:
            lines.append(total)  # before the first run: the whole sweep's time
        print("\n".join(lines), flush=True)
        returns = []
        initial_job_idx = 0
        # jobs in joblib's workers: a signal to this process is sent on to them, and the
        # workers keep lengen's handlers from their start (lengen.rundir.sweep_stop)
        launcher = self.config.hydra.launcher
        stopping = contextlib.ExitStack()
        if in_workers(launcher):
            stopping.enter_context(ForwardSignals(sweep_dir))
            if launcher.get("backend") is None:
                stopping.enter_context(workers_keep_signals())
        with stopping:
            while not self.is_done() and not stopped_by(sweep_dir):
                batch = self.get_job_batch()
                if not checked_jobs(batch):  # composed by the pre-check already: not again
                    self.validate_batch_is_legal(batch)
                results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
                for result in results:
                    _ = result.return_value  # a job's exception stops the sweep, as Hydra's
                initial_job_idx += len(batch)
                returns.append(results)
        return returns

    def _estimates(self, jobs, sizes: list[int]) -> list | None:
        """Every run's estimate (``lengen.sweep_estimate.planned_runs``), None where the jobs'
        configs cannot be composed here (their jobs will say why), and for SLURM, whose jobs run
        on other machines than this one's calibration describes: never a reason to stop."""
        from lengen.sweep_estimate import planned_runs

        target = str(self.config.hydra.launcher.get("_target_", "")).lower()
        if "submitit" in target or "slurm" in target:
            return None
        loader = self.hydra_context.config_loader
        try:
            configs = [loader.load_sweep_config(self.config, list(job)) for job in jobs]
            return planned_runs(configs, sizes)
        except Exception:  # noqa: BLE001 - an estimate never stops a sweep
            return None

    def _runnable(self, jobs, swept: set[str]) -> tuple[list, list[dict]]:
        """(the jobs to run, the skipped ones as {"overrides", "reason"}), in sweep order."""
        from lengen.preflight import job_refusal

        cluster = "submitit" in str(self.config.hydra.launcher.get("_target_", ""))
        loader = self.hydra_context.config_loader
        kept, skipped = [], []
        for job in jobs:
            reason = job_refusal(
                job, lambda job=job: loader.load_sweep_config(self.config, list(job)), cluster
            )
            if reason is None:
                kept.append(job)
            else:  # named by the values that vary (all of them where none does)
                shown = [o for o in job if o.partition("=")[0] in swept] or list(job)
                skipped.append({"overrides": " ".join(shown), "reason": reason})
        return kept, skipped


def in_workers(launcher) -> bool:
    """Whether the launcher runs the jobs in worker processes of this one: joblib's with
    ``n_jobs`` other than 1 (-1 counted), however few the runs (one run with n_jobs=2 still
    goes to a worker, where a signal to this process never reached it)."""
    if "joblib" not in str(launcher.get("_target_", "")).lower():
        return False
    import joblib

    return joblib.effective_n_jobs(int(launcher.get("n_jobs") or 1)) > 1


def parallel_runs(launcher, runs: int) -> int:
    """How many runs a launcher config runs at once (for the time left): joblib's ``n_jobs``
    (-1: every core), submitit's ``array_parallelism``, else one."""
    target = str(launcher.get("_target_", ""))
    if "joblib" in target.lower():
        n_jobs = int(launcher.get("n_jobs") or 1)
        if n_jobs < 0:
            import joblib

            n_jobs = joblib.effective_n_jobs(n_jobs)
        at_once = n_jobs
    elif "submitit" in target.lower() or "slurm" in target.lower():
        at_once = int(launcher.get("array_parallelism") or runs or 1)
    else:
        at_once = 1
    return max(1, min(at_once, runs or 1))

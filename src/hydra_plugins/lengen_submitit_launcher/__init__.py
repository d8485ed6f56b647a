"""lengen's SLURM launcher: Hydra's submitit launcher, plus what a sweep needs to outlive
preemption and the time limit (configs/hydra/launcher/slurm.yaml selects it; docs/cluster.md).

It lives in ``hydra_plugins`` because Hydra instantiates launchers only from there.

In the job (``__call__``), a run stopped by a signal has saved its checkpoint (lengen's
``StepCheckpoint``) and exits with 128 + the signal's number:

* SIGTERM (preemption, ``scontrol requeue``, ``scancel``): the job ends without a result, so
  the sweep keeps waiting; when SLURM requeued it, the job runs again and its run continues
  from the checkpoint (``lengen.rundir.requeued_job``). SLURM requeues, not lengen.
* SIGUSR1 (SLURM's warning before the time limit, ``--signal=USR1@<signal_delay_s>``): rank 0
  requeues its own job (``scontrol requeue``) unless it did so ``max_num_timeout`` times
  already; then the run stays interrupted, the job ends with that outcome, and the sweep's
  report lists it (``resume=true`` continues it by hand).

In the sweep (``launch``), every job is waited for: one that ended without a result (killed,
cancelled, out of memory) is named on one line rather than raised, and the sweep's report
(``lengen.cli.SweepReport``) counts every run from its directory.

A pack (``hydra.sweeper.pack``) is one job of the sweep, so one array task: its members train
in that task's process, share its allocation and are requeued, and continue from their
checkpoints, together. A task that ends outside Python's reach leaves a record for each member,
and the report counts each member from its own directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

try:  # the slurm extra; Hydra's plugin scan imports this module whether it is installed or not
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ImportError:  # no launcher then, and no import warning at every start
    SlurmLauncher = object

TIME_LIMIT_EXIT = 128 + signal.SIGUSR1
PREEMPTED_EXIT = 128 + signal.SIGTERM
#: in the job's submitit folder: how often lengen requeued the job after its time limit
REQUEUES = "time_limit_requeues"


class LengenSlurmLauncher(SlurmLauncher):
    # -- in the job ------------------------------------------------------------------------------
    def __call__(self, sweep_overrides, job_dir_key, job_num, job_id, singleton_state):
        import submitit

        from lengen.process import install_preemption_handlers

        # before Hydra composes anything: submitit's own handlers ignore SIGTERM, and SIGUSR1
        # would kill the job before training installs lengen's handlers
        install_preemption_handlers()
        # read before this attempt can change it, so every rank decides alike
        counter = Path(submitit.JobEnvironment().paths.folder) / REQUEUES
        requeues = int(counter.read_text()) if counter.is_file() else 0
        try:
            return super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)
        except SystemExit as stop:
            job = os.environ.get("SLURM_JOB_ID")
            if stop.code == PREEMPTED_EXIT:
                say(
                    f"slurm: job {job} stopped by SIGTERM; if SLURM requeued it (preemption, "
                    f"scontrol requeue), it continues from its checkpoint by itself"
                )
                raise  # no result: the sweep waits for the requeued job (or SLURM's verdict)
            if stop.code == TIME_LIMIT_EXIT and self._requeue(job, requeues, counter):
                raise
            return self._ended(f"exited with status {stop.code} before finishing")

    def _requeue(self, job: str | None, requeues: int, counter: Path) -> bool:
        """Requeue this job after its time limit's warning (rank 0 asks SLURM) unless it was
        requeued ``max_num_timeout`` times already -> whether it was requeued."""
        from lengen.atomic import atomic_write
        from lengen.rundir import is_rank_zero

        limit = int(self.params.get("max_num_timeout") or 0)
        if job is None or requeues >= limit:
            if is_rank_zero():
                say(
                    f"slurm: job {job} not requeued after the time limit: requeued {requeues} "
                    f"times already (hydra.launcher.max_num_timeout={limit}); the run keeps "
                    f"its checkpoint, resume=true with its directory continues it"
                )
            return False
        if is_rank_zero():
            atomic_write(counter, f"{requeues + 1}\n")
            try:
                subprocess.run(["scontrol", "requeue", job], check=True, timeout=60)
            except (OSError, subprocess.SubprocessError) as error:
                say(f"slurm: job {job}: scontrol requeue failed ({error})")
                return False
            say(
                f"slurm: job {job} requeued after the time limit ({requeues + 1} of {limit}); "
                f"it continues from its checkpoint by itself"
            )
        return True

    @staticmethod
    def _ended(why: str) -> JobReturn:
        """The outcome of a job whose run ended by ``sys.exit``: recorded for the sweep's
        report (which reads the run directory first) and returned, so the sweep stops
        waiting for it."""
        import submitit
        from hydra.core.hydra_config import HydraConfig

        from lengen.cli import SweepReport

        outcome = f"failed: {why} (log: {submitit.JobEnvironment().paths.stderr})"
        if HydraConfig.initialized():
            SweepReport.record(HydraConfig.get(), outcome, launcher=True)
        return JobReturn(status=JobStatus.COMPLETED, _return_value=outcome)

    # -- in the sweep ----------------------------------------------------------------------------
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        """Submit the jobs as the submitit launcher does, then wait for every one of them."""
        jobs = self._submit(job_overrides, initial_job_idx)
        try:
            return [
                self._wait(job, overrides, jobs)
                for job, overrides in zip(jobs, job_overrides, strict=True)
            ]
        except KeyboardInterrupt:
            stop_waiting(jobs, signal.SIGINT)

    def _wait(self, job, overrides, jobs) -> JobReturn:
        """The job's result; a job that ended without one is named on one line (the other
        jobs are still waited for), and a signal to the sweep stops the waiting."""
        import submitit

        from lengen.process import received_signal

        while not job.done():
            if received_signal():
                stop_waiting(jobs, received_signal())
            time.sleep(1)
        try:
            return job.results()[0]
        except (submitit.core.utils.UncompletedJobError, submitit.core.utils.FailedJobError) as error:  # fmt: skip
            first = next((line for line in str(error).splitlines() if line.strip()), "")
            shown = " ".join(
                o for o in overrides if not o.startswith("hydra.sweeper.pack_members=")
            )
            if len(shown) < len(" ".join(overrides)):  # a pack's members: named by its first
                shown += " and the rest of its pack"
            say(f"slurm: job {job.job_id} ({shown}) ended without a result: {first}")
            return JobReturn(status=JobStatus.COMPLETED, _return_value="failed")

    def _submit(self, job_overrides, initial_job_idx):
        """The submitit launcher's ``launch`` up to the submission (hydra-submitit-launcher
        1.2.0, which then waits in one expression that stops at the first job's error)."""
        import submitit
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
        from omegaconf import OmegaConf

        params = self.params
        specific_init_keys = {"max_num_timeout"}
        init_params = {"folder": params["submitit_folder"]}
        init_params.update(
            {f"{self._EXECUTOR}_{k}": v for k, v in params.items() if k in specific_init_keys}
        )
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{
                k if k in base else f"{self._EXECUTOR}_{k}": v
                for k, v in params.items()
                if k not in specific_init_keys | {"submitit_folder"}
            }
        )
        os.makedirs(str(self.config.hydra.sweep.dir), exist_ok=True)
        job_params = []
        for index, overrides in enumerate(job_overrides, start=initial_job_idx):
            print(f"\t#{index} : {' '.join(filter_overrides(overrides))}")
            job_params.append(
                (list(overrides), "hydra.sweep.dir", index, f"job_id_for_{index}",
                 Singleton.get_state())
            )  # fmt: skip
        return executor.map_array(self, *zip(*job_params, strict=True))


def stop_waiting(jobs, signum: int) -> None:
    """The sweep's process was asked to stop: it stops, its jobs do not."""
    ids = " ".join(str(job.job_id) for job in jobs)
    say(
        f"sweep: stopped waiting ({signal.Signals(signum).name}); its SLURM jobs go on and "
        f"write their run directories (scancel {ids} stops them)"
    )
    sys.exit(128 + signum)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

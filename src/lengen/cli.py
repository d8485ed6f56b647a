"""What the entry points do with errors: one line for bad input, and sweeps that go on.

Every refusal happens before Hydra writes anything (``lengen.preflight.precheck``, which
train.py calls first): a refused command changes nothing on disk. The few refusals that can
only be made after the build (a text evaluation length beyond the validation split, say) remove
the single run's directory again if Hydra made it for this command
(``preflight.remove_refused_run``). A run that fails later writes ``failed.json`` (the error,
and for crashes the traceback) into its run directory, unless that directory already holds
finished results. In a ``-m`` sweep a failure does not stop the other runs; ``SweepReport``
counts what every run did from its job's own record when the sweep ends (checked against its
run directory) and makes the sweep's exit status non-zero if any run did not finish. Along the way each job says "run k of N" and,
once a run has finished, the sweep's time left (``SweepReport.progress_line``, from the plan
lengen's sweeper writes); combinations skipped with ``hydra.sweeper.skip_invalid=true`` are
listed apart, never counted as runs, and never make the exit status non-zero. A pack's job
(``hydra.sweeper.pack``, ``train_pack_main``) trains several runs in one process: every count,
record and line above is per run, a pack's members each counted from their own directories.

Exit statuses: 2 bad input, 3 training diverged, 4 a checkpoint could not be written (the
previous one is kept) or the results could not be written (the checkpoint kept), 5 evaluation
out of memory, 128 + the signal's number when a signal stopped training with a checkpoint
(143 for SIGTERM, 138 for SIGUSR1; a local sweep stops too: ``lengen.rundir.sweep_stop``) or
the start-up of a run's processes (``lengen.train.watch_start_up``, which exits 2 when they do
not all start in time), 130 for Ctrl-C before the run starts (nothing written).
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lengen.errors import (
    CheckpointWriteError,
    ConfigError,
    EvaluationOutOfMemory,
    Preempted,
    ResultsWriteError,
    RunDirectoryWriteError,
    TrainingDiverged,
)
from lengen.preflight import check_launch, remove_refused_run
from lengen.process import received_signal
from lengen.rundir import RunDirectory
from lengen.rundir.sweep_stop import mark_stopped, remove_unstarted, stopped_by

#: errors that are the user's to fix, printed as one line, and their exit statuses
EXIT_STATUS = {
    ConfigError: 2,
    RunDirectoryWriteError: 2,  # a ConfigError: nothing ran (looked up by exact type)
    TrainingDiverged: 3,
    CheckpointWriteError: 4,
    ResultsWriteError: 4,
    EvaluationOutOfMemory: 5,
}
ONE_LINE = tuple(EXIT_STATUS)


def train_main(cfg: DictConfig) -> str:
    """The body of ``train.py``'s Hydra main -> the job's outcome (a sweep's report counts
    them): ``trained``, ``finished earlier``, ``refused: …`` or ``failed: …``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from lengen.sweep_packs import pack_members
    from lengen.train import run

    hydra = HydraConfig.get()
    sweeping = hydra.mode == RunMode.MULTIRUN
    cluster = "submitit" in hydra.launcher._target_
    try:  # train.py's precheck asked already; a command that bypassed it is asked here
        check_launch(cfg, sweeping, cluster=cluster)
    except ConfigError as error:
        # Lightning starts the other ranks by re-running the command line: the whole sweep
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    # a local sweep stopped by a signal starts no more runs: one marked by another job, or
    # one this process received between runs (kept, so the runs after this one see it too)
    if sweeping and not cluster and (signum := stopped_by(hydra.sweep.dir) or received_signal()):
        mark_stopped(hydra.sweep.dir, signum)
        remove_unstarted(hydra.sweep.dir, hydra.runtime.output_dir)  # Hydra's folder, its log
        return f"not started: the sweep was stopped by {signal.Signals(signum).name}"
    if (members := pack_members(hydra)) is not None:  # one job, several runs (docs/scaling.md)
        return train_pack_main(cfg, hydra, members)
    directory = RunDirectory(hydra.runtime.output_dir)
    done_before = directory.results.is_file()
    try:
        run(cfg)
        return "finished earlier" if done_before else "trained"
    except Preempted as error:  # a signal asked us to stop: stop the sweep too
        directory.record_failure(error)
        return stopped_by_signal(hydra, sweeping and not cluster, error.signum, str(error))
    except KeyboardInterrupt as error:  # Ctrl-C outside training: recorded, not lost
        directory.record_failure(error)
        return stopped_by_signal(hydra, sweeping and not cluster, signal.SIGINT, OUTSIDE_TRAINING)
    except Exception as error:  # noqa: BLE001 - every failure is recorded, then reported
        if not isinstance(error, ConfigError):  # a refusal leaves the directory as it was
            directory.record_failure(error)
        elif not sweeping:  # nor a directory that the refused command created
            remove_refused_run(hydra.runtime.output_dir)
        if isinstance(error, ONE_LINE):  # the user's to fix: one line, no traceback
            print(f"error: {error}", file=sys.stderr)
            if not sweeping:
                sys.exit(EXIT_STATUS[type(error)])
            return f"{'refused' if isinstance(error, ConfigError) else 'failed'}: {error}"
        if not sweeping:
            raise
        traceback.print_exc()
        return f"failed: {type(error).__name__}: {error}"
    finally:
        RunDirectory.release_all()


#: a Ctrl-C outside training, as a run reports it
OUTSIDE_TRAINING = "interrupted by SIGINT (Ctrl-C) outside training; nothing saved"


def stopped_by_signal(hydra: DictConfig, local_sweep: bool, signum: int, line: str) -> str:
    """A signal stopped the job's run (its checkpoint saved where training had begun): the
    line, then exit 128 + the signal; in a local sweep the sweep is marked stopped and the
    job returns ``interrupted: …`` for its record instead (``lengen.rundir.sweep_stop``): an
    exit in one of joblib's workers tore the others down before their checkpoints, and the
    report was never printed."""
    print(line, file=sys.stderr)
    if not local_sweep:
        sys.exit(128 + signum)
    mark_stopped(hydra.sweep.dir, signum)
    return f"interrupted: {line}"


def train_pack_main(cfg: DictConfig, hydra: DictConfig, members: list[dict]) -> list[str]:
    """A pack's job in a ``-m`` sweep (``hydra.sweeper.pack``): its members' configs and run
    directories (``lengen.sweep_packs``), trained together by ``lengen.pack.train_pack`` ->
    each member's outcome, as ``train_main`` says a single run's. A fault of the whole pack is
    recorded in each member's directory that holds no results; a member that failed on its own
    (diverged) says so in its directory, which the outcome reads."""
    from lengen.pack import train_pack
    from lengen.rundir import run_state
    from lengen.rundir.outcomes import failed_stamp, pack_outcomes
    from lengen.sweep_packs import member_configs, member_dirs

    paths = member_dirs(hydra, members)
    directories = [RunDirectory(path) for path in paths]
    local_sweep = "submitit" not in hydra.launcher._target_
    done_before = [directory.results.is_file() for directory in directories]
    stamps = [failed_stamp(directory) for directory in directories]

    def record(error: BaseException) -> list[bool]:
        """The fault of the whole pack in each member's directory, but one whose member left
        the pack on its own meanwhile (a full disk: its failed.json newer than the job's
        start) keeps its own record -> which members left."""
        left = [failed_stamp(d) not in (None, s) for d, s in zip(directories, stamps, strict=True)]
        for directory, gone in zip(directories, left, strict=True):
            if not gone:
                directory.record_failure(error)
        return left

    try:
        configs = member_configs(cfg, members)
        results = train_pack(configs, paths)
        outcomes = []
        for path, before, result in zip(paths, done_before, results, strict=True):
            state, detail = run_state(path)
            if state == "finished":
                outcomes.append("finished earlier" if before else "trained")
            elif isinstance(result, dict) and result.get("error"):  # its own line (a full disk)
                outcomes.append(f"failed: {result['error']}")
            else:
                outcomes.append(f"failed: {detail or 'no results'}")
        return outcomes
    except Preempted as error:  # a signal asked us to stop: stop the sweep too
        left = record(error)
        said = stopped_by_signal(hydra, local_sweep, error.signum, str(error))
        return pack_outcomes(directories, done_before, left, said)
    except KeyboardInterrupt as error:
        left = record(error)
        said = stopped_by_signal(hydra, local_sweep, signal.SIGINT, OUTSIDE_TRAINING)
        return pack_outcomes(directories, done_before, left, said)
    except Exception as error:  # noqa: BLE001 - every failure is recorded, then reported
        # a refusal leaves the directories as they were
        left = [False] * len(directories) if isinstance(error, ConfigError) else record(error)
        if isinstance(error, ONE_LINE):
            print(f"error: {error}", file=sys.stderr)
            said = f"{'refused' if isinstance(error, ConfigError) else 'failed'}: {error}"
        else:
            traceback.print_exc()
            said = f"failed: {type(error).__name__}: {error}"
        outcomes = pack_outcomes(directories, done_before, left, said)
        if isinstance(error, ConfigError) and cfg.get("resume") is False:
            # a finished member is itself a refusal without resume (as a single run's is):
            # it did not 'finish earlier' in this sweep (KB130, docs/trials/kept-back-…)
            outcomes = [said if outcome == "finished earlier" else outcome for outcome in outcomes]
        return outcomes
    finally:
        RunDirectory.release_all()


class SweepReport(Callback):
    """Hydra callback: at the end of a sweep, count what its runs did from their jobs' records,
    say where they are and what to run next, and list the runs that did not finish (exit
    status 1; 128 + the signal where a signal stopped the sweep).

    Jobs may run in other processes (joblib's workers, SLURM jobs), where this object's copy
    sees the job and the sweep's own does not: each job leaves a record per run under
    ``<sweep dir>/.jobs/`` (its run directory, its overrides, and how it ended where it ended
    in Python; a pack's job one per member). A job's own word that it did not finish counts,
    whatever its directory holds; a run counts finished only where its directory holds
    results.json (``lengen.rundir.run_state``); a job with no word is counted from its
    directory (``outcome``)."""

    RECORDS = ".jobs"
    #: the sweep's plan, beside the records (``hydra_plugins.lengen_sweeper`` writes it)
    PLAN = "sweep.json"
    #: a run that did not finish: refused (nothing written), interrupted (a checkpoint kept,
    #: not continued), failed (failed.json, or no word at all), not started (a signal had
    #: stopped the sweep: ``lengen.rundir.sweep_stop``)
    UNFINISHED = ("refused", "interrupted", "failed", "not started")

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        import shutil

        from lengen.rundir import hold_sweep

        sweep_dir = Path(config.hydra.sweep.dir)
        try:  # train.py's pre-check asked already; a sweep started otherwise is asked here
            hold_sweep(sweep_dir)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)
        # a sweep run again into its folder reports its own jobs, not the earlier ones
        shutil.rmtree(sweep_dir / self.RECORDS, ignore_errors=True)

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        import threading

        from lengen.process import inherit_closed_output, install_preemption_handlers

        # a job in another process never ran train.py's __main__, which installs these: a
        # signal before training would otherwise kill it unrecorded (only the main thread may);
        # and its output streams were the sweep's, closed perhaps (then: the job's train.log)
        if threading.current_thread() is threading.main_thread():
            install_preemption_handlers()
            inherit_closed_output()
        self.record(config.hydra, None)
        if stopped_by(config.hydra.sweep.dir) or received_signal():
            return  # this job will not train (train_main): "run k of N, ≈ … left" would mislead
        if (line := self.progress_line(config.hydra)) is not None:
            print(line, flush=True)

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        from hydra.core.utils import JobStatus

        if job_return.status == JobStatus.COMPLETED:
            value = job_return.return_value  # a pack's job: one outcome per member
            self.record(
                config.hydra, list(map(str, value)) if isinstance(value, list) else str(value)
            )
        else:  # an exception escaped the job
            self.record(config.hydra, f"failed: {job_return._return_value!r}")

    @classmethod
    def record(
        cls, hydra: DictConfig, outcome: str | list[str] | None, *, launcher: bool = False
    ) -> None:
        """Write the job's records from its ``hydra`` config node (rank 0 of a multi-process
        job writes; a launcher records how a job ended outside Python's reach, ``launcher``):
        one per run, ``<sweep dir>/.jobs/<run number - 1>.json``, so a pack's job writes one per
        member (``outcome``: one for all, or a list with each member's). A record carries the
        job's overrides, which name it where jobs share a folder."""
        import json
        import os

        from hydra.types import RunMode

        from lengen.atomic import atomic_write
        from lengen.rundir import is_rank_zero
        from lengen.sweep_packs import member_dirs, pack_members

        if not is_rank_zero() or hydra.mode != RunMode.MULTIRUN:  # a single run has no report
            return
        folder = Path(hydra.sweep.dir) / cls.RECORDS
        first = cls.first_run(cls.read_plan(hydra.sweep.dir), int(hydra.job.num))
        members = pack_members(hydra)
        run_dirs = (
            [Path(hydra.runtime.output_dir)] if members is None else member_dirs(hydra, members)
        )
        outcomes = outcome if isinstance(outcome, list) else [outcome] * len(run_dirs)
        task = hydra.get("overrides", {}).get("task") or []
        overrides = [str(o) for o in task if not str(o).startswith("hydra.sweeper.pack_members")]
        folder.mkdir(parents=True, exist_ok=True)
        for index, (run_dir, said) in enumerate(zip(run_dirs, outcomes, strict=True)):
            path = folder / f"{first + index}.json"
            record = {"run_dir": str(run_dir), "outcome": said, "overrides": overrides}
            if launcher:  # the process's end, not the run's word: its directory decides
                record["launcher"] = True
            if members is not None:  # its wall time is the pack's, shared by its members
                record["pack"] = len(members)
            if said is None:  # the job starts; a signal to the sweep is sent on to its pid
                record["started"], record["pid"] = time.time(), os.getpid()
            else:  # the job ends: its wall time, for the sweep's time left
                started = cls._read(path).get("started")
                if isinstance(started, int | float):
                    record["started"], record["wall_s"] = started, time.time() - started
            atomic_write(path, json.dumps(record) + "\n")

    @staticmethod
    def first_run(plan: dict, job_num: int) -> int:
        """The number (from 0) of a job's first run: the runs of the jobs before it (packs
        count their members; the plan lists each job's), or the job's number without a plan."""
        sizes = plan.get("jobs")
        if isinstance(sizes, list) and all(isinstance(n, int) for n in sizes):
            return sum(sizes[:job_num]) + max(0, job_num - len(sizes))
        return job_num

    # -- the plan, and the time left -------------------------------------------------------------
    @classmethod
    def write_plan(
        cls,
        sweep_dir: Path,
        *,
        runs: int,
        workers: int,
        skipped: list[dict],
        jobs: list[int] | None = None,
        estimates: list | None = None,
    ) -> None:
        """The sweep's plan, before its first job: the runs it will start, how many jobs at
        once, the combinations it skips ({"overrides", "reason"} each), the runs of each job
        (``jobs``: 1 each, a pack's its members; default one run per job) and each run's
        estimate (``lengen.sweep_estimate.planned_runs``; None: no time left from them)."""
        import json

        from lengen.atomic import atomic_write

        plan = {"runs": runs, "workers": workers, "skipped": skipped, "started": time.time()}
        plan["jobs"] = list(jobs) if jobs is not None else [1] * runs
        if estimates is not None:
            plan["estimates"] = list(estimates)
        atomic_write(Path(sweep_dir) / cls.RECORDS / cls.PLAN, json.dumps(plan) + "\n")

    @classmethod
    def read_plan(cls, sweep_dir: Path) -> dict:
        """The plan ``write_plan`` wrote; {} where there is none (another sweeper)."""
        plan = cls._read(Path(sweep_dir) / cls.RECORDS / cls.PLAN)
        return plan if isinstance(plan.get("runs"), int) else {}

    @staticmethod
    def _read(path: Path) -> dict:
        import json

        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    @classmethod
    def job_records(cls, sweep_dir: Path) -> list[Path]:
        """The jobs' records, by job number."""
        paths = (Path(sweep_dir) / cls.RECORDS).glob("*.json")
        return sorted((p for p in paths if p.stem.isdigit()), key=lambda p: int(p.stem))

    @classmethod
    def progress_line(cls, hydra: DictConfig) -> str | None:
        """``sweep: run k of N (<run folder>)`` (a pack's job: ``runs k–l of N (a pack of m:
        <first folder> … <last folder>)``), how many runs have finished and the time left
        (``lengen.sweep_estimate.time_left``: the runs still to go, each by its estimate as
        the finished runs of its mechanism corrected it). None outside a sweep of lengen's
        sweeper."""
        from hydra.types import RunMode

        from lengen.progress import duration
        from lengen.sweep_estimate import time_left
        from lengen.sweep_packs import member_dirs, pack_members

        if hydra.mode != RunMode.MULTIRUN:
            return None
        sweep_dir = Path(hydra.sweep.dir)
        plan = cls.read_plan(sweep_dir)
        if not plan:
            return None
        runs, number = plan["runs"], cls.first_run(plan, int(hydra.job.num)) + 1
        members = pack_members(hydra)
        if members is None:
            line = f"sweep: run {number} of {runs} ({Path(hydra.runtime.output_dir).name})"
        else:
            names = [path.name for path in member_dirs(hydra, members)]
            shown = ", ".join(names) if len(names) <= 2 else f"{names[0]} … {names[-1]}"
            line = (
                f"sweep: runs {number}–{number + len(names) - 1} of {runs} "
                f"(a pack of {len(names)}: {shown})"
            )
        records = {int(path.stem): cls._read(path) for path in cls.job_records(sweep_dir)}
        if (left := time_left(plan, records)) is not None:
            finished, seconds = left
            line += f"; {finished} finished," if finished else ";"
            line += f" ≈ {duration(seconds)} left"
        return line

    @classmethod
    def outcome(cls, record: dict) -> tuple[str, str]:
        """(kind, detail) of one run: its job's own word first, then its run directory. A job
        that says it was refused, failed or was interrupted did not finish, whatever the
        directory holds (two jobs given one directory: the second's refusal is no success for
        finding the first's results). A run counts finished only where its directory holds
        results; a job that left no word (killed, or ended outside Python: a launcher's
        record) is counted from its directory alone."""
        from lengen.rundir import run_state

        state, detail = run_state(Path(record["run_dir"]))
        returned = record.get("outcome") or ""
        kind, _, said = returned.partition(": ")
        if kind in cls.UNFINISHED and not record.get("launcher"):
            return kind, said
        if state == "finished":
            if returned == "finished earlier":
                return "finished earlier", ""
            return ("continued from a checkpoint" if detail == "continued" else "trained"), ""
        if kind == "refused":  # a refusal writes nothing into the run directory
            return "refused", said
        if state in ("interrupted", "failed"):
            return state, detail
        return "failed", said or returned or "no results, and the job left no word (killed?)"

    @staticmethod
    def job_name(record: dict, records: list[dict]) -> str:
        """A run's name in the report: its folder's, and its job's overrides where other jobs
        wrote into that folder too."""
        name = Path(record["run_dir"]).name
        if sum(r.get("run_dir") == record["run_dir"] for r in records) > 1:
            name += f" ({' '.join(record.get('overrides') or []) or 'no overrides'})"
        return name

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from lengen.rundir import release_sweep

        try:
            self.report(Path(config.hydra.sweep.dir))
        finally:
            release_sweep(Path(config.hydra.sweep.dir))

    def report(self, sweep_dir: Path) -> None:
        """Print the sweep's counts and the runs that did not finish (exit status 1 if any)."""
        import json

        from lengen.progress import duration

        records = []
        for path in self.job_records(sweep_dir):
            try:
                records.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                records.append({"run_dir": str(path), "outcome": "failed: unreadable record"})
        outcomes = [(self.job_name(r, records), *self.outcome(r)) for r in records]
        kinds = [kind for _, kind, _ in outcomes]
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
        plan = self.read_plan(sweep_dir)
        took = f"; took {duration(time.time() - plan['started'])}" if "started" in plan else ""
        runs = f"{len(outcomes)} run{'s' * (len(outcomes) != 1)}"  # "1 run", "0 runs", "2 runs"
        lines = [f"\nsweep: {runs} ({counts or 'none'}) in {sweep_dir}{took}"]
        # skipped at the user's request (hydra.sweeper.skip_invalid=true): no run, no failure
        skipped = plan.get("skipped") or []
        if skipped:
            lines.append(
                f"{len(skipped)} combination{'s' * (len(skipped) != 1)} skipped "
                f"(hydra.sweeper.skip_invalid=true; nothing written for them):"
            )
            lines += [f"  {s['overrides']}: {s['reason']}" for s in skipped]
        signum = stopped_by(sweep_dir)  # the runs it stopped kept their checkpoints
        if not signum:  # a stopped sweep is continued first (its line below), not aggregated
            lines.append(
                f"next: python scripts/aggregate.py {sweep_dir} && python scripts/plot.py "
                f"{sweep_dir}"
            )
        print("\n".join(lines))
        bad = [(name, kind, detail) for name, kind, detail in outcomes if kind in self.UNFINISHED]
        if not outcomes:
            print(f"error: no job of the sweep reported back ({sweep_dir / self.RECORDS})",
                  file=sys.stderr)  # fmt: skip
            sys.exit(1)
        if bad:
            lines = [f"{len(bad)} of {len(outcomes)} runs refused or failed (did not finish):"]
            lines += [
                f"  {name}: {kind}: {(detail or '?').splitlines()[0]}" for name, kind, detail in bad
            ]
            print("\n".join(lines), file=sys.stderr)
        if signum:
            print(
                f"sweep: stopped by {signal.Signals(signum).name}; continue it with the same "
                f"command and resume=auto",
                file=sys.stderr,
            )
            sys.exit(128 + signum)
        if bad:
            sys.exit(1)

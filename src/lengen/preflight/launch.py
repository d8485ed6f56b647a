"""Where the run writes (no file in the way, no name too long, a writable folder, not inside
the config root or another run's directory), the run directory's own rules that need no
config (``check_results_file``), how its processes start (``check_launch``), and undoing what
Hydra created for a run refused only after it wrote (``remove_refused_run``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from lengen.caches import unwritable_reason
from lengen.config import CONFIG_DIR, ROOT
from lengen.errors import ConfigError
from lengen.preflight.values import processes
from lengen.process import start_timeout
from lengen.rundir import LOCK, RunDirectory

# -- a refusal after Hydra wrote: undone ------------------------------------------------------------
#: the top folder a single run's directory creates (nothing was there when precheck looked),
#: or "default" (the default directory, new by its nonce); None: it existed. ``parent``: with
#: the default directory, the first of its parent folders that was missing (a fresh working
#: directory has no results/runs/), or None
_NEW_RUN_FOLDER: dict[str, Path | str | None] = {"path": None, "parent": None}
#: where configs/hydra/default.yaml's hydra.run.dir puts a single run (tests/test_preflight.py
#: reads the yaml to check it)
DEFAULT_RUNS_FOLDER = Path("results") / "runs"


def _first_missing(path: str) -> Path | None:
    target = Path(path).expanduser().absolute()
    if target.exists():
        return None
    while not target.parent.exists() and target.parent != target:
        target = target.parent
    return target


def remove_refused_run(output_dir: str | Path) -> None:
    """A refusal that only the built run can make (a text corpus shorter than an evaluation
    length, a checkpoint whose shapes differ) comes after Hydra created the run directory and
    its log: remove what this command created, so a refused command leaves nothing, as one
    refused by precheck does. Only a folder precheck saw missing is removed, and only while no
    other process holds its run lock."""
    import shutil

    output_dir = Path(output_dir).absolute()
    new = _NEW_RUN_FOLDER["path"]
    top = output_dir if new == "default" else new
    parent = _NEW_RUN_FOLDER["parent"] if new == "default" else None
    if not isinstance(top, Path) or not top.is_dir() or not output_dir.is_relative_to(top):
        return
    RunDirectory.release_all()
    if RunDirectory(output_dir).in_use():  # another process started there meanwhile
        return
    shutil.rmtree(top, ignore_errors=True)
    if isinstance(parent, Path) and output_dir.is_relative_to(parent.absolute()):
        # results/runs/ (and results/) that this command made for the default directory: removed
        # while empty only, so a run another command started there meanwhile stays
        for folder in output_dir.parents:
            if not folder.is_relative_to(parent.absolute()):
                break
            with contextlib.suppress(OSError):
                folder.rmdir()


# -- where the run writes, and how its processes start -------------------------------------------
def check_output_dir(key: str, path: str) -> None:
    """A directory the run can make or write (``unwritable_reason``), asked before Hydra makes
    it, which would fail with a traceback; not inside the config root (a run's config.yaml
    there would be read as a config) nor inside another run's directory (aggregation would
    see one run in the other). An existing directory's own rules are ``lengen.rundir``'s."""
    reason = unwritable_reason(path)
    if reason is not None:
        separator = " " if reason.startswith("is ") else ": "
        raise ConfigError(
            f"{key}={path}{separator}{reason}; allowed: a directory path in a writable folder"
        )
    target = Path(path).expanduser().resolve()
    for configs in {CONFIG_DIR.resolve(), (ROOT / "configs").resolve()}:
        if target == configs or configs in target.parents:
            raise ConfigError(
                f"{key}={path} is inside the config folder {configs}; allowed: a directory "
                "outside it (results/ by default)"
            )
    # a run's own directory may be given again (resume); a sweep's jobs would land inside it
    folders = [*([] if key.startswith("hydra.run.dir") else [target]), *target.parents]
    for folder in folders:
        if (folder / LOCK).is_file() and (folder / "config.yaml").is_file():  # a run's
            relation = "is" if folder == target else "is inside"
            raise ConfigError(
                f"{key}={path} {relation} the run directory {folder}; allowed: a directory "
                "outside any run's (a sibling of it, say)"
            )


def check_results_file(results: Path) -> None:
    """A ``results.json`` that is not a readable JSON object (a directory, a truncated write
    by a tool of the user's) is neither a finished run nor an unfinished one: say so."""
    if not results.exists() and not results.is_symlink():
        return
    problem = None
    if not results.is_file():
        problem = "is not a file"
    else:
        try:
            if not isinstance(json.loads(results.read_text()), dict):
                problem = "holds no JSON object"
        except (OSError, UnicodeDecodeError, ValueError) as error:
            problem = f"cannot be read ({type(error).__name__})"
    if problem is not None:
        raise ConfigError(
            f"hydra.run.dir: {results} {problem}, so the run is neither finished nor "
            f"resumable; allowed: another hydra.run.dir, or move that file away yourself"
        )


#: the variables a cluster launcher or torchrun sets for the nodes of a multi-node run
NODE_VARIABLES = ("SLURM_NTASKS", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "GROUP_RANK")


def check_launch(cfg: DictConfig, sweeping: bool, cluster: bool) -> None:
    """Runs of several processes start only where something starts them: Lightning starts a
    node's other ranks by re-running the command line (in a local -m sweep: the whole sweep),
    and waits, ignoring signals, for nodes nobody starts. ``cluster``: a launcher that starts
    each run's processes itself (submitit's)."""
    import os

    nodes = cfg.trainer.get("num_nodes", 1)
    started = cluster or any(os.environ.get(v) for v in NODE_VARIABLES)
    if isinstance(nodes, int) and nodes > 1 and not started:
        if os.environ.get("SLURM_JOB_ID"):  # inside a job (salloc, sbatch) but not srun's task
            raise ConfigError(
                f"trainer.num_nodes={nodes}: SLURM_JOB_ID={os.environ['SLURM_JOB_ID']} is set "
                f"but SLURM_NTASKS is missing, so this command was not started as the job's "
                f"tasks and nothing starts the other nodes; allowed: srun python train.py … "
                f"inside the job (one task per device), or trainer.num_nodes=1 here"
            )
        raise ConfigError(
            f"trainer.num_nodes={nodes}: nothing here starts the other nodes (no SLURM job, "
            f"no torchrun); allowed: trainer.num_nodes=1 here, or a job on several nodes "
            f"(srun, or -m hydra/launcher=slurm; docs/scaling.md)"
        )
    if not cluster and processes(cfg.trainer) == 1 and nodes == 1:
        check_single_process_variables()
    if not cluster and (processes(cfg.trainer) != 1 or (isinstance(nodes, int) and nodes > 1)):
        check_process_variables(cfg.trainer)
        try:  # how long the processes wait for each other to start (lengen.train)
            start_timeout()
        except ValueError as error:
            raise ConfigError(str(error)) from None
    if sweeping and not cluster and processes(cfg.trainer) != 1:
        raise ConfigError(
            f"trainer.devices={cfg.trainer.devices} (several processes per run) cannot run "
            f"inside a local -m sweep; allowed: trainer.devices=1 in local sweeps, or "
            f"hydra/launcher=slurm, which starts each run's processes itself (docs/scaling.md)"
        )


#: what srun gives each task of a SLURM job, which Lightning reads for the task's rank once
#: SLURM_NTASKS says the run is a SLURM job's (``lightning_fabric``'s SLURMEnvironment)
SLURM_TASK_VARIABLES = ("SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")


def check_process_variables(trainer: DictConfig) -> None:
    """A run of several processes that something else starts (srun, torchrun) learns its rank
    from the environment: the variables Lightning reads must all be there and count the
    processes the trainer asks for. Where they do not, a process crashed at start-up
    (``KeyError('SLURM_NODEID')`` with SLURM_JOB_ID and SLURM_NTASKS but no srun) or waited
    for ranks that can never come."""
    import os

    wanted = processes(trainer)
    shape = f"trainer.devices × trainer.num_nodes = {wanted} processes"
    interactive = os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive")  # as Lightning
    if os.environ.get("SLURM_NTASKS") and not interactive:
        missing = [name for name in SLURM_TASK_VARIABLES if not os.environ.get(name)]
        if os.environ["SLURM_NTASKS"].strip() == "1":  # Lightning asks for it with more tasks
            missing = [name for name in missing if name != "SLURM_NTASKS_PER_NODE"]
        if missing:
            raise ConfigError(
                f"trainer.num_nodes={trainer.get('num_nodes', 1)}: this is a SLURM job "
                f"(SLURM_NTASKS={os.environ['SLURM_NTASKS']}) but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set, which srun gives each task: "
                f"the command was not started by srun; allowed: srun python train.py … inside "
                f"the job (one task per device), or trainer.num_nodes=1 trainer.devices=1"
            )
        counted, name = os.environ["SLURM_NTASKS"], "SLURM_NTASKS"
    elif os.environ.get("WORLD_SIZE"):
        counted, name = os.environ["WORLD_SIZE"], "WORLD_SIZE"
    else:
        return
    if wanted is not None and counted.strip() != str(wanted):
        raise ConfigError(
            f"{name}={counted} in the environment, but {shape}: the ranks would wait for "
            f"processes that never start; allowed: the trainer's shape of the job that started "
            f"this command (trainer.devices = tasks per node, trainer.num_nodes = nodes)"
        )


#: the variables that say which rank of a job this process is (``lengen.rundir.is_rank_zero``
#: reads them, and Lightning's ``rank_zero_only`` as well)
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK")


def check_single_process_variables() -> None:
    """A run of one process started where a launcher's variables say there are several
    (torchrun's ``WORLD_SIZE``, an sbatch script's ``SLURM_NTASKS``) or that this process is
    not the first (a stray ``LOCAL_RANK=1``): each process would train the run alone into one
    directory, and one whose rank is not 0 wrote no config.yaml, data card or logs yet exited 0
    with a results.json (KB45b, KB47); with ``SLURM_NTASKS=4`` Lightning refused the command
    only once the run directory was written (KB46). docs/trials/kept-back-2026-12-02.md."""
    import os

    shape = "trainer.devices × trainer.num_nodes = 1 process"
    interactive = os.environ.get("SLURM_JOB_NAME") in ("bash", "interactive")  # as Lightning
    counts = [("WORLD_SIZE", os.environ.get("WORLD_SIZE", "").strip())]
    if not interactive:
        counts.append(("SLURM_NTASKS", os.environ.get("SLURM_NTASKS", "").strip()))
    for name, count in counts:
        if count not in ("", "1"):
            raise ConfigError(
                f"{name}={count} in the environment, but {shape}: each of the job's processes "
                f"would train this one run alone, into one hydra.run.dir; allowed: the "
                f"trainer's shape of the job that started this command (trainer.devices = "
                f"tasks per node, trainer.num_nodes = nodes), or a command started outside it "
                f"(unset {name})"
            )
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value not in ("", "0") and not (name == "SLURM_PROCID" and interactive):
            raise ConfigError(
                f"{name}={value} in the environment says this process is not the first of its "
                f"job, but {shape}: it would train with no config.yaml, data card or logs "
                f"written; allowed: unset {name} (env -u {name} python train.py …), or the "
                f"trainer's shape of the job that started this command"
            )


def _submitit(choice: str, config_dirs: Sequence[Path]) -> bool:
    """Whether ``hydra/launcher=<choice>`` is submitit's (ours, configs/hydra/launcher/slurm.yaml,
    extends it), which starts each run's processes on the cluster."""
    if "submitit" in choice:
        return True
    for folder in config_dirs:
        path = folder / "hydra" / "launcher" / f"{choice}.yaml"
        if path.is_file():
            return "submitit" in path.read_text()
    return False

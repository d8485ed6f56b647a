"""Logger factories; each writes inside the run directory, never the current directory.

The logger yamls point their ``_target_`` here; the run passes ``save_dir``. Each factory takes
its yaml's keys as keywords and consumes them as its typed config (``factory.Options``, in
``lengen.options``: ``LoggerConfig``, ``WandbConfig``), the class the early checks build from
the composed yaml before anything imports torch (``lengen.preflight``). A resumed run's
CSV log continues where its checkpoint left off (``continue_csv_log``): Lightning's CSV logger
would delete it; a run started again at step 0 replaces an earlier attempt's quietly
(``open_csv_log``).
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

from lengen.atomic import atomic_write
from lengen.options import WANDB_MODES, LoggerConfig, WandbConfig


def csv(save_dir: str, **keys):
    """Lightning's CSV logger: ``<run dir>/logs/metrics.csv`` (no options)."""
    csv.Options.from_keys(keys, owner="csv")
    from pytorch_lightning.loggers import CSVLogger

    return CSVLogger(save_dir=save_dir, name="logs", version="")


csv.Options = LoggerConfig


def open_csv_log(logger, resumed) -> None:
    """The run's CSV log, made before its first row. A resumed run's (``resumed``: the
    checkpoint's (path, step, last row)) continues where its checkpoint left off
    (``continue_csv_log``). A run that starts at step 0 (``resumed`` None) in a folder holding
    an earlier attempt's ``logs/`` (stopped before its first checkpoint, started again by
    resume=auto: the re-run's SN12b) replaces them, as Lightning's CSV logger does, without its
    warning, a site-packages path saying the files will be deleted: starting again is what
    resume=auto was asked for, and nothing of a step the run keeps is lost."""
    from pytorch_lightning.loggers import CSVLogger

    if resumed is not None:
        continue_csv_log(logger, resumed[1], resumed[2])
    elif isinstance(logger, CSVLogger):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Experiment logs directory")
            _ = logger.experiment  # made now, under the filter


def continue_csv_log(logger, step: int, last_row: dict | None = None) -> None:
    """Keep an interrupted run's CSV log up to ``step``, which Lightning's CSV logger would
    delete when it starts; the resumed run appends to it (a step logged after the checkpoint
    and before a crash is dropped, so no step appears twice). ``last_row``, the training row
    of the checkpoint's own step (logged just after it was written), is restored if a kill
    kept it off the disk. Other loggers are left alone; call it on rank 0 only (one writer)."""
    import csv

    from pytorch_lightning.loggers import CSVLogger

    if not isinstance(logger, CSVLogger):
        return  # wandb: the resumed part is a new wandb run
    path = Path(logger.log_dir) / "metrics.csv"
    if not path.is_file():  # stopped before its first row: logs/ holds only hparams.yaml
        with warnings.catch_warnings():  # the same warning, with nothing to delete
            warnings.simplefilter("ignore")
            _ = logger.experiment  # made now, under the filter
        return
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        keys = list(reader.fieldnames or [])
        rows = [row for row in reader if row.get("step") and int(row["step"]) < step]
    if (
        last_row
        and last_row["step"] == step - 1
        and not any(int(row["step"]) == step - 1 and row.get("train/loss") for row in rows)
    ):
        keys = list(dict.fromkeys([*keys, *last_row]))
        rows.append({key: str(value) for key, value in last_row.items()})
    with warnings.catch_warnings():  # its warning that it deletes the file: we put it back
        warnings.simplefilter("ignore")
        writer = logger.experiment
    writer.metrics_keys = sorted(keys)  # later rows merge their columns with these
    text = io.StringIO(newline="")  # csv's own \r\n line ends, as Lightning writes them
    out = csv.DictWriter(text, fieldnames=writer.metrics_keys)
    out.writeheader()
    out.writerows(rows)
    atomic_write(path, text.getvalue())  # a kill mid-write must not cut the log short


def none(save_dir: str, **keys):
    """No logger (no options)."""
    none.Options.from_keys(keys, owner="none")
    return False


none.Options = LoggerConfig


def wandb(save_dir: str, **keys):
    """Weights & Biases, offline unless ``mode`` (or ``WANDB_MODE``) says otherwise; ``keys``:
    ``project``, ``group``, ``run_name``, ``mode`` (``WandbConfig``).

    Everything lands in ``<run dir>/wandb/``: the run in ``offline-run-*/`` (its ``run-*.wandb``
    is what ``wandb sync <that folder>`` uploads) and wandb's cache, config and staging folders
    beside it, unless ``WANDB_CACHE_DIR`` / ``WANDB_CONFIG_DIR`` / ``WANDB_DATA_DIR`` say
    otherwise. The wandb run ends (is flushed to disk) once the results are logged, or when
    training fails. Runs of one ``-m`` sweep share a group (the sweep folder's name) unless
    ``group`` is set.
    """
    cfg = wandb.Options.from_keys(keys, owner="wandb")
    mode = wandb_mode(cfg)
    for variable, path in wandb_paths(save_dir).items():
        _point(variable, path)
    os.environ["WANDB_MODE"] = mode
    group = cfg.group or sweep_name()
    _end_previous_run()
    logger = wandb_run_logger_class()(
        save_dir=save_dir,
        project=cfg.project,
        group=group,
        name=cfg.run_name,
        offline=mode == "offline",
        mode=mode,
        # wandb puts a run in <dir>/.wandb instead of <dir>/wandb whenever <dir>/.wandb exists,
        # deciding anew each time it computes a path: pin it to wandb/
        settings={"use_dot_wandb": False},
    )
    _LAST_LOGGER[:] = [logger]
    return logger


wandb.Options = WandbConfig


def wandb_mode(cfg: WandbConfig) -> str:
    """The mode a wandb run starts in: ``logger.mode``, else ``WANDB_MODE``, else offline."""
    # "dryrun": wandb's old name for offline, which Lightning writes into WANDB_MODE (so the
    # next run of a sweep finds it there)
    mode = cfg.mode or os.environ.get("WANDB_MODE", "").replace("dryrun", "offline") or "offline"
    if mode not in WANDB_MODES:  # logger.mode is checked: this is the environment's
        raise ValueError(
            f"WANDB_MODE must be one of {', '.join(WANDB_MODES)} (read where logger.mode is "
            f"null); got {mode!r}"
        )
    return mode


#: the W&B server an online run talks to, unless ``WANDB_BASE_URL`` names another
WANDB_SERVER = "https://api.wandb.ai"
#: seconds the pre-check waits for the server: wandb itself waits 90 s, then fails mid-start
WANDB_CONNECT_SECONDS = 5.0


def wandb_start_refusal(cfg: WandbConfig) -> str | None:
    """Why an online wandb run cannot start here -> one line naming the key and how to run
    offline; None when it can, or when it is not online. No credentials (``WANDB_API_KEY``,
    ``WANDB_IDENTITY_TOKEN_FILE``, or ``wandb login``'s .netrc entry for the server: where
    wandb looks) or a server that does not answer (one TCP connection, at most
    ``WANDB_CONNECT_SECONDS``) would end the run in wandb's traceback after its run directory
    was made; ``lengen.preflight.resources`` asks this first. Torch-free."""
    import socket
    from urllib.parse import urlsplit

    mode = wandb_mode(cfg)
    if mode != "online":
        return None
    key = "logger.mode=online" if cfg.mode else "WANDB_MODE=online"
    offline = (
        "allowed: logger.mode=offline or WANDB_MODE=offline (the run is kept in "
        "<run dir>/wandb/offline-run-*; `wandb sync` that folder uploads it later)"
    )
    server = os.environ.get("WANDB_BASE_URL") or WANDB_SERVER
    url = urlsplit(server)
    if not url.hostname:
        return f"WANDB_BASE_URL={server}: no server address; allowed: a URL such as {WANDB_SERVER}"
    if not _wandb_credentials(url.netloc):
        return (
            f"logger=wandb {key}: no W&B credentials here (WANDB_API_KEY, or `wandb login`'s "
            f"entry for {url.netloc} in {_netrc_path()}); {offline}"
        )
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        socket.create_connection((url.hostname, port), timeout=WANDB_CONNECT_SECONDS).close()
    except (OSError, ValueError) as error:  # ValueError: a port that is no number
        return f"logger=wandb {key}: the W&B server {server} cannot be reached ({error}); {offline}"
    return None


def _wandb_credentials(netloc: str) -> bool:
    """Whether wandb would find credentials for the server at ``netloc`` (its own order)."""
    import netrc

    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        entry = netrc.netrc(_netrc_path()).authenticators(netloc)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


def _netrc_path() -> Path:
    """The .netrc wandb reads: ``$NETRC``, else ~/.netrc (or ~/_netrc where only it exists)."""
    if os.environ.get("NETRC"):
        return Path(os.environ["NETRC"]).expanduser()
    unix, windows = Path("~/.netrc").expanduser(), Path("~/_netrc").expanduser()
    return windows if windows.exists() and not unix.exists() else unix


def wandb_paths(save_dir: str) -> dict[str, Path]:
    """Where wandb writes for a run in ``save_dir``: all of it under ``<save_dir>/wandb``.

    ``WANDB_DIR`` is the folder that holds ``wandb/``; wandb's service logs go under the cache
    folder. None of these may be a ``.wandb`` folder inside the run directory: wandb would then
    move part of the run there (see ``wandb``).
    """
    root = Path(save_dir)
    return {
        "WANDB_DIR": root,
        "WANDB_CACHE_DIR": root / "wandb" / "cache",
        "WANDB_CONFIG_DIR": root / "wandb" / "config",
        "WANDB_DATA_DIR": root / "wandb" / "data",
    }


#: values this module put into os.environ: replaced by the next run of a sweep, while a value
#: the user set is kept
_OURS: dict[str, str] = {}
#: the last wandb logger made in this process: if a failure left its run open, it is ended
#: before the next run of a sweep starts (Lightning would log the new run into the open one)
_LAST_LOGGER: list = []


def _point(variable: str, path: Path) -> None:
    current = os.environ.get(variable)
    if current is None or current == _OURS.get(variable):
        os.environ[variable] = _OURS[variable] = str(path)


def _end_previous_run() -> None:
    while _LAST_LOGGER:
        _LAST_LOGGER.pop().end_run(exit_code=1)  # a no-op for a run that ended normally


def wandb_run_logger_class():
    """``WandbRunLogger``: Lightning's ``WandbLogger`` that can end its wandb run. Built on first
    use (importing Lightning takes seconds) and kept as this module's attribute, where pickle
    finds it."""
    if "WandbRunLogger" in globals():
        return globals()["WandbRunLogger"]
    from pytorch_lightning.loggers import WandbLogger

    class WandbRunLogger(WandbLogger):
        """``WandbLogger`` whose wandb run ends with the lengen run.

        Lightning never calls ``wandb.finish()``; left to wandb's exit hook, the run's last
        records race the shutdown of wandb's service (``HandleAbandonedError`` in debug.log), and
        in a ``-m`` sweep the next run would log into the still-open one.
        """

        def end_run(self, exit_code: int = 0) -> None:
            """Finish the wandb run (flush it to ``run-*.wandb``); a no-op when none is open."""
            if self._experiment is not None:  # finishing twice is a no-op
                self._experiment.finish(exit_code=exit_code)

        def finalize(self, status: str) -> None:
            super().finalize(status)
            if status == "failed":  # Lightning's hook when training raises
                self.end_run(exit_code=1)

    WandbRunLogger.__module__, WandbRunLogger.__qualname__ = __name__, "WandbRunLogger"
    globals()["WandbRunLogger"] = WandbRunLogger
    return WandbRunLogger


def __getattr__(name: str):
    if name == "WandbRunLogger":
        return wandb_run_logger_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sweep_name() -> str | None:
    """The folder name of the -m sweep this run belongs to, so wandb groups its runs."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return Path(HydraConfig.get().sweep.dir).name


def log_results(logger, rows: list[dict], plot_path: Path | None) -> None:
    """Send the per-length table and the plot to loggers that take tables (wandb), then end
    the wandb run: these are the last things a run logs, and a finished run is on disk (its
    ``run-*.wandb`` complete) before the process, or the next run of a sweep, goes on.

    The CSV logger keeps training curves only; per-length numbers live in results.json.
    """
    if not logger or not hasattr(logger, "log_table"):
        return
    columns = list(rows[0]) if rows else []
    logger.log_table(
        key="eval/extrapolation", columns=columns, data=[[row[c] for c in columns] for row in rows]
    )
    if plot_path is not None and hasattr(logger, "log_image"):
        logger.log_image(key="eval/extrapolation_plot", images=[str(plot_path)])
    if hasattr(logger, "end_run"):
        logger.end_run()

"""Re-evaluate a finished run: ``python eval.py run=<run dir> [tag=…] [key=value …]``.

The run's ``config.yaml`` is loaded, the overrides applied to it (keys must already exist) and
checked before torch is imported, the model rebuilt and loaded from ``checkpoints/last.ckpt``
as ``lengen.load_run`` does (``lengen.api.rebuild_run``), and ``results.<tag>.json`` (plus its
plot) written beside the original, which is never touched.
"""

from __future__ import annotations

import collections
import datetime as dt
import io
import os
import pickle
import zipfile
from collections.abc import Sequence
from pathlib import Path

from lengen.caches import cache_refusal
from lengen.checks import ConfigError
from lengen.config import GROUPS
from lengen.preflight import check_components, check_resources, validate
from lengen.rundir import load_config, stored_config_refusal

#: model keys that set the shapes of the weights (or how they are split into heads)
MODEL_SHAPE = tuple(
    f"model.{key}"
    for key in ("d_model", "n_layers", "n_heads", "d_ff", "n_decoder_layers", "tie_embeddings")
)


def parse_arguments(arguments: Sequence[str]) -> tuple[Path, str | None, list[str]]:
    run_dir, tag, overrides = None, None, []
    for argument in arguments:
        key, sep, value = argument.partition("=")
        if not sep:
            raise ConfigError(
                f"{argument}: expected key=value (did the shell split a value with spaces? "
                f"quote it); allowed: run=<dir>, tag=<name>, and config overrides such as "
                f"eval.lengths=[32,64]"
            )
        if key == "run":
            run_dir = Path(value)
        elif key == "tag":
            tag = value
        elif key.lstrip("+~") in GROUPS or key.endswith(("._target_", ".name")):
            # another model, encoding or task in the same weights would be labelled as this run
            raise ConfigError(
                f"{key}={value}: eval.py re-evaluates the run's own model, encoding and task; "
                f"allowed: options of them (e.g. pe.scaling=yarn, eval.lengths=[64,128], "
                f"eval.decoding=greedy)"
            )
        elif key.lstrip("+~") in MODEL_SHAPE:
            # found here, not after torch loaded the weights (seconds later)
            raise ConfigError(
                f"{key}={value}: builds a different model than the checkpoint holds (the run's "
                f"sizes); allowed: options that keep them (e.g. model.attention, pe.scaling)"
            )
        else:
            overrides.append(argument)
    if run_dir is None:
        raise ConfigError(
            "run: missing; allowed: run=<run dir> holding config.yaml and checkpoints/last.ckpt"
        )
    return run_dir, tag, overrides


def trained_verdict(run_dir) -> dict | None:
    """Whether the run learned, as its own results.json says (None where it cannot tell): a
    re-evaluation keeps it, since its overrides may move accuracy at the training length."""
    import json

    try:
        verdict = json.loads((Path(run_dir) / "results.json").read_text()).get("learned")
    except (OSError, ValueError, AttributeError):
        return None
    return verdict if isinstance(verdict, dict) and "learned" in verdict else None


#: the longest tag, in UTF-8 bytes: the longest file it names (a temporary
#: ``.attention_diagnostics.<tag>-<n>.json.<random>.tmp``) stays within 255 bytes
MAX_TAG_BYTES = 200


def check_tag(tag: str | None) -> str:
    """The tag asked for (or a timestamp), refused unless it is a plain name short enough for
    every file it names."""
    base = tag or "eval-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    if not base.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"tag={base!r}: allowed: letters, digits, '-', '_' and '.'")
    if len(base.encode()) > MAX_TAG_BYTES:  # found now, not by the write after the evaluation
        raise ConfigError(
            f"tag={base[:20]}…: {len(base.encode())} bytes long; allowed: at most "
            f"{MAX_TAG_BYTES} bytes (the file names it makes stay within 255)"
        )
    return base


def reservation(run_dir: Path, tag: str) -> Path:
    return run_dir / f".results.{tag}.reserved"


#: reservation path -> the descriptor whose flock holds it, for this process's life
_HELD: dict[Path, int] = {}


def reserve_tag(run_dir: Path, base: str) -> str:
    """The first of ``base``, ``base-1``, … that names no results file and no other evaluation
    in progress, reserved for this process: ``reservation``'s file, held by an exclusive flock
    (two eval.py asking for one tag at once get two names, and neither writes over the
    other). The caller releases it (``release_tag``) when its results are written. Why a lock
    and not the file's existence: a process that dies without unwinding (SIGKILL, a native
    library's exit under a memory limit: E13b) leaves the file, and the kernel releases only
    the lock, so its tag is free again instead of taken for good (E13c)."""
    candidate, counter = base, 1
    while True:
        if not (run_dir / f"results.{candidate}.json").exists():
            held = _hold(reservation(run_dir, candidate))
            # a holder that finished meanwhile wrote its results before it let go
            if held is not None and not (run_dir / f"results.{candidate}.json").exists():
                _HELD[reservation(run_dir, candidate)] = held
                return candidate
            if held is not None:
                os.close(held)
        candidate, counter = f"{base}-{counter}", counter + 1


def _hold(path: Path) -> int | None:
    """A descriptor of ``path`` (created if missing) holding its exclusive flock, or None when
    a live process holds it (or its holder removed it between the open and the lock)."""
    import fcntl

    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(descriptor).st_ino == os.stat(path).st_ino:
            return descriptor
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(descriptor)
    return None


def release_tag(run_dir: Path, tag: str) -> None:
    """Remove this process's reservation of ``tag``, then let its lock go."""
    path = reservation(run_dir, tag)
    path.unlink(missing_ok=True)
    if (descriptor := _HELD.pop(path, None)) is not None:
        os.close(descriptor)


class _Placeholder:
    """What a tensor, storage or class of a checkpoint is read as by ``peek_checkpoint``."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass


class _PlainUnpickler(pickle.Unpickler):
    """Reads the plain values of a pickle (dicts, lists, strings, numbers) and nothing else:
    every class or function it names is a ``_Placeholder``, so no code of the file's runs."""

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        return _Placeholder

    def persistent_load(self, pid):
        return None  # a tensor's storage: not read


def peek_checkpoint(file: Path) -> dict | None:
    """The plain entries of a checkpoint written by ``torch.save`` (a zip archive holding
    ``<name>/data.pkl``), read without torch, so eval.py's checks of a checkpoint take a
    fraction of a second -> None where the file cannot be read so (torch.load then decides)."""
    try:
        with zipfile.ZipFile(file) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")]
            if len(names) != 1:
                return None
            state = _PlainUnpickler(io.BytesIO(archive.read(names[0]))).load()
    except Exception:  # noqa: BLE001 - any surprise: leave the verdict to torch.load
        return None
    return state if isinstance(state, dict) else None


def check_checkpoint(run_dir: Path) -> None:
    """The run's checkpoint, before torch is imported: a file cut short, or one trained with
    another config than the directory's (two runs' checkpoints swapped), is refused now."""
    file = run_dir / "checkpoints" / "last.ckpt"
    if not file.is_file():
        return  # said by the loader, which names the file
    if not zipfile.is_zipfile(file):
        raise ConfigError(
            f"run={run_dir}: checkpoints/last.ckpt is not a complete PyTorch checkpoint (cut "
            f"short?); allowed: a run directory whose checkpoint was written in full"
        )
    state = peek_checkpoint(file)
    refusal = stored_config_refusal(run_dir, state) if state is not None else None
    if refusal is not None:
        raise ConfigError(refusal)


#: length extensions that are RoPE as trained at factor 1 (dynamic NTK still scales past the
#: training length at 1: Hugging Face's formula)
FACTOR_ONE_IS_NOTHING = ("pi", "ntk", "yarn")


def check_scaling_factor(cfg, overrides: Sequence[str]) -> None:
    """Refuse a length extension asked for without its factor when the run's factor is 1: it
    would score RoPE as trained under the extension's name. A factor given explicitly (1
    included) stands."""
    keys = {override.partition("=")[0].lstrip("+~") for override in overrides}
    scaling = cfg.pe.get("scaling")
    if ("pe.scaling" in keys and "pe.scaling_factor" not in keys
            and scaling in FACTOR_ONE_IS_NOTHING and cfg.pe.get("scaling_factor") == 1):  # fmt: skip
        raise ConfigError(
            f"pe.scaling={scaling} needs pe.scaling_factor: at the run's 1.0 it is RoPE as "
            f"trained; allowed: pe.scaling_factor > 1 (e.g. 4 for 4x the training length), "
            f"or 1 given explicitly"
        )


def evaluate_run(arguments: Sequence[str]) -> dict:
    # the command line and the run directory are checked before torch or Lightning is imported
    run_dir, tag, overrides = parse_arguments(arguments)
    tag = check_tag(tag)
    if (refusal := cache_refusal()) is not None:
        raise ConfigError(refusal)
    cfg = load_config(run_dir, overrides)
    if not (run_dir / "results.json").is_file():  # its last.ckpt is a mid-training state
        raise ConfigError(
            f"run={run_dir}: the run never finished (no results.json); allowed: a finished run "
            f"directory, or finish this one first with resume=true hydra.run.dir={run_dir}"
        )
    validate(cfg)
    check_scaling_factor(cfg, overrides)
    if not os.access(run_dir, os.W_OK):  # found now, not after the whole evaluation
        raise ConfigError(f"run={run_dir}: the directory is not writable; allowed: a writable run")
    check_resources(cfg)
    check_components(cfg)  # the encoding's and data's checks of the overrides, without torch
    check_checkpoint(run_dir)
    from lengen.api import rebuild_run
    from lengen.checkpoints import NonFiniteCheckpoint
    from lengen.progress import progress_mode
    from lengen.rundir import RunDirectory
    from lengen.train import evaluate_and_write

    try:
        run = rebuild_run(run_dir, cfg, weights_key=f"overrides {overrides}")
    except NonFiniteCheckpoint as error:  # the run's, whatever the overrides (CK01)
        raise ConfigError(f"run={run_dir}: {error.problem}") from None
    from functools import partial

    import torch

    from lengen.estimate_bound import check_reevaluation_time
    from lengen.model.looped import evaluation_passes

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # hours of evaluation are refused unasked, before a tag is reserved (O15's eval.py form)
    passes = partial(evaluation_passes, run.model)  # a looped model's loops (KB23)
    line = check_reevaluation_time(cfg, run.model, run.data, run.lengths, device.type, passes)
    print(line, flush=True)
    tag = reserve_tag(run_dir, tag)
    try:
        return evaluate_and_write(
            cfg,
            run.model,
            run.data,
            run.lengths,
            device=device,
            directory=RunDirectory(run_dir),
            tag=tag,
            train_tokens=run.train_tokens,
            progress=(progress_mode(True), Path(run_dir).name),  # bars on a terminal, else lines
            extra={
                "overrides": list(overrides),
                "tag": tag,
                "source": "checkpoints/last.ckpt",
                "train_steps": run.train_steps,
                "trained_verdict": trained_verdict(run_dir),
            },
        )
    finally:
        release_tag(run_dir, tag)

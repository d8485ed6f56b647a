"""How long a run will take, before it starts: this machine's calibration and the estimate line.

Before training, a run prints one line with its expected wall time, training steps × the time
of a step + evaluation + start-up (``Estimate.line``). The times come from this machine's
calibration file (``lengen.caches.calibration_file``), which every finished run updates with
what it measured (``lengen.progress.StepTimer``: the time between steps, validations
included, from runs of at least ``MIN_TIMED_STEPS`` steps; the evaluation's wall time;
Lightning's start-up), keyed by the machine (device, CPU or GPU model, threads, processes) and
placed by the FLOPs of a step (``train_step_flops``) or of the evaluation (``eval_flops``): a
size measured before gives its own time; another size is read between the two nearest measured
ones (log-log), or from the nearest (``interpolate``). With nothing measured here yet, the line
says it is a rough guess from the FLOP count at an assumed speed.

**By mechanism.** FLOPs do not say what a step costs: PaTH's step took 1.5× RoPE's at nearly
the same FLOPs, and reading one from the other missed by −48 % (issue #52). So every time is
recorded twice, under the FLOPs alone and under the run's mechanism (``mechanism_key``: the
encoding's class and the model's, e.g. ``RoPE · DecoderOnly``, and the model options that
change a step's cost where they are not at their defaults, ``· mixer=gla · loops=2``), and an estimate reads its own
mechanism's entries where this machine has any, the FLOPs-only ones otherwise; the line says
which (``from RoPE · DecoderOnly runs`` / ``by FLOPs alone: no … run measured here yet``).

**Under load.** A shared machine's other work slows every step: a time measured while the
machine's 1-minute load average per core (``machine_load``) was L is taken as
max(1, L) × the quiet machine's time (``contention``: with more runnable threads than cores,
each gets cores / load of a core). A time is recorded as its quiet equivalent (measured /
contention, with the contention kept beside it), so a run timed beside a test suite no longer
tells a quiet machine's next run 1 h 14 min; an estimate is the quiet time × the contention at
the moment it is made, and says so where that is above 1 (``× 1.8 for the load now``).
``LENGEN_MACHINE_LOAD`` replaces the measured load per core (a container whose load average is
its host's; the test suite sets 0, a quiet machine). Reading and updating the file costs
milliseconds and touches no random generator of the run.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from lengen.estimate_curve import beside, interpolate
from lengen.estimate_entries import sound_entries, sound_entry, upgraded

#: observations kept per machine and kind (the newest): enough to span a project's sizes
KEPT = 40
#: a process that trained fewer steps calibrates no step time: it timed its warm-up and its
#: validations (a test's run validates every few steps) more than its steps, and such times,
#: once the largest measured, made the estimate of a larger run 321 h instead of hours
MIN_TIMED_STEPS = 100
#: the calibration file's format: files of another are read as empty and replaced at the next
#: record (version 1 kept the short runs' step times; version 2 the times as measured, under
#: whatever load, where version 3 keeps their quiet equivalents and the contention; version 4
#: counts a looped model's passes in its evaluation's FLOPs, and a version-3 file is read as
#: version 4 without its looped mechanisms' evaluation entries, ``upgraded``)
FORMAT = 4
#: assumed speeds where nothing was measured on the machine yet (the line says "rough"): a
#: small model on a CPU reaches ~half of the matmul peak (docs/benchmarks.md), a GPU far more;
#: the start-up is Lightning's (trainer set-up, sanity validation)
ROUGH_FLOPS_PER_SECOND = {"cpu": 20e9, "cuda": 20e12, "mps": 2e12}
ROUGH_START_SECONDS = 3.0
#: and per evaluation length: its diagnostics and figure, more than its FLOPs on small models
ROUGH_SECONDS_PER_LENGTH = 2.0
#: the environment variable that replaces the measured load per core (module docstring)
LOAD_VARIABLE = "LENGEN_MACHINE_LOAD"
#: below this contention the line says nothing of the load (the load average's own noise)
QUIET = 1.05


def duration(seconds: float) -> str:
    """12s, 3m05s, 2h07m: short enough to scan in a column of lines."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def machine_load() -> float:
    """The machine's 1-minute load average per core (runnable threads per core this process
    may use), or ``LENGEN_MACHINE_LOAD`` where set; 0 where the platform has no load average."""
    given = os.environ.get(LOAD_VARIABLE, "")
    with contextlib.suppress(ValueError):
        if given:
            return max(0.0, float(given))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        return os.getloadavg()[0] / max(1, cores)
    except (AttributeError, OSError):
        return 0.0


def contention(load: float | None) -> float:
    """How many times slower than on a quiet machine a step runs at ``load`` runnable threads
    per core: max(1, load) (None: 1, nothing known)."""
    return 1.0 if load is None else max(1.0, float(load))


#: the model's options that change what a step costs at the same FLOPs (a recurrent mixer, K
#: loops of the blocks, Canon's convolutions, the block options): each one set away from its
#: default is named in the key (``· mixer=gla``); at their defaults the key is as it was before
#: they existed, so calibration files written then still read. Their defaults are the run ids'
#: (``lengen.identity.IMPLIED_BEFORE``): the values at which the model is the one before them
MECHANISM_OPTIONS = (
    "mixer",
    "mixers",
    "loops",
    "loop_rule",
    "canon",
    "attn_gate",
    "attn_sinks",
    "kv_bias",
    "qk_norm",
    "attn_fn",
)


def mechanism_key(cfg) -> str | None:
    """What a step costs besides its FLOPs: ``<encoding class> · <model class>`` from the
    config's ``pe._target_`` and ``model._target_`` (e.g. ``RoPE · DecoderOnly``), plus the
    attention kernel where one is forced (``model.attention``) and each of
    ``MECHANISM_OPTIONS`` not at its default (``RoPE · DecoderOnly · mixer=gla · loops=2``);
    None without both targets."""
    from lengen.identity import IMPLIED_BEFORE

    pe, model = cfg.get("pe") or {}, cfg.get("model") or {}
    targets = [str(node.get("_target_") or "") for node in (pe, model)]
    if not all(targets):
        return None
    parts = [target.rpartition(".")[2] for target in targets]
    attention = model.get("attention")
    if attention not in (None, "auto"):
        parts.append(f"attention={attention}")
    for name in MECHANISM_OPTIONS:
        value, default = _option(model, name), _shown(IMPLIED_BEFORE[f"model.{name}"])
        if name in model and value != default:
            parts.append(f"{name}={value}")
    return " · ".join(parts)


def _option(model, name: str) -> str:
    """``model.<name>`` as the key writes it; Canon's points as sorted letters (``[C, A]`` and
    ``AC`` are one setting, as ``lengen.model.canon_config.canon_points`` reads them: its rule
    is not needed here, this layer is below the model's, and the pre-check has applied it)."""
    value = model.get(name)
    if name == "canon":  # the one option with two spellings of one value
        if value is None:
            value = ""
        elif hasattr(value, "__iter__") and all(isinstance(item, str) for item in value):
            value = "".join(sorted("".join(value)))
    return _shown(value)


def _shown(value) -> str:
    """An option's value as the key writes it: ``gla``, ``[gla,attention]``, ``true``, and a
    mixer with options as ``gated_deltanet(negative_eigenvalues=true)`` (``{mixer: gla}``
    alone is ``gla``), so that equal settings written either way give one key."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, str | int | float):
        return str(value)
    if hasattr(value, "items"):  # a mapping: a mixer with its options
        items = {str(k): v for k, v in value.items()}
        name = _shown(items.pop("mixer", "?"))
        options = ",".join(f"{k}={_shown(v)}" for k, v in sorted(items.items()))
        return f"{name}({options})" if options else name
    return "[" + ",".join(_shown(item) for item in value) + "]"  # a list: mixers, canon's letters


def train_step_flops(n_params: int, n_layers: int, d_model: int, batch: int, tokens: int) -> float:
    """FLOPs of one training step (forward and backward) of ``batch`` sequences of ``tokens``:
    6 per parameter and token (Kaplan et al. 2020) plus the attention's scores and mixing,
    12 · layers · d_model · tokens² per sequence. A size measure for the calibration, which
    turns it into seconds: constant factors cancel."""
    return float(batch) * (6 * n_params * tokens + 12 * n_layers * d_model * tokens**2)


def eval_flops(
    n_params: int,
    n_layers: int,
    d_model: int,
    samples: int,
    tokens: list[int],
    passes: Callable[[int], int] | None = None,
) -> float:
    """FLOPs of evaluating ``samples`` sequences at each of ``tokens`` (forward only), each
    ``passes(t)`` times the one-pass cost (a looped model's loops, ``lengen.model.looped.
    evaluation_passes``; 1 without)."""

    def one(t: int) -> float:
        return samples * (2 * n_params * t + 4 * n_layers * d_model * t**2)

    return float(sum(one(t) * (passes(t) if passes is not None else 1) for t in tokens))


def machine_key(device: str, world_size: int = 1, threads: int | None = None) -> str:
    """What a calibration is valid for: the device type and model, torch's threads (CPU;
    ``threads``: those a run elsewhere will use, default this process's) and the run's
    processes."""
    import torch

    from lengen.provenance import cpu_model

    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        threads = torch.get_num_threads() if threads is None else threads
        name = f"{cpu_model()} · {threads} thread{'s' * (threads != 1)}"
    return f"{device} · {name}" + (f" · {world_size} processes" if world_size > 1 else "")


class Estimate:
    """A run's expected wall time from the machine's calibration file (the module docstring
    says how). ``record`` adds what a finished run measured. ``mechanism``: the run's
    ``mechanism_key`` (None: FLOPs alone, and the line does not mention it); ``load``: the load
    per core to assume now (default: ``machine_load()``, read once)."""

    #: the kinds of entry kept per mechanism as well as by FLOPs alone (start-up is Lightning's)
    KEYED = ("train", "train pack", "eval ")

    def __init__(
        self,
        path: str | Path,
        machine: str,
        device: str,
        mechanism: str | None = None,
        load: float | None = None,
    ) -> None:
        self.path, self.machine, self.device = Path(path), machine, device
        self.mechanism = mechanism
        self.load = machine_load() if load is None else load
        self.calibration, self.damaged = sound_entries(self._read())

    def _read(self) -> dict:
        try:
            data = upgraded(json.loads(self.path.read_text()))
            if not isinstance(data, dict) or data.get("version") != FORMAT:
                return {}
            machine = data["machines"].get(self.machine, {})
            return machine if isinstance(machine, dict) else {}
        except (OSError, ValueError, KeyError, AttributeError):
            return {}

    def _view(self) -> tuple[dict, set[str]]:
        """The calibration as this run's mechanism reads it -> (kind -> entries, the kinds read
        from its own mechanism's entries): those where it has any, the FLOPs-only ones else."""
        view = {k: v for k, v in self.calibration.items() if " · " not in k}
        own = set()
        suffix = f" · {self.mechanism}"
        for kind, entries in self.calibration.items():
            if self.mechanism and kind.endswith(suffix) and entries:
                view[kind[: -len(suffix)]] = entries
                own.add(kind[: -len(suffix)])
        return view, own

    def parts(
        self,
        steps: int,
        step_flops: float,
        evaluation: float,
        protocol: str,
        lengths: int = 1,
        members: int = 1,
    ) -> dict:
        """The estimate's parts, each in seconds at the load now: ``step``, ``evaluate``,
        ``start``, ``total``; ``guessed`` (the parts not measured here) and ``own`` (those read
        from this mechanism's entries). Arguments as ``line``'s."""
        view, own = self._view()
        flops_only = {k: v for k, v in self.calibration.items() if " · " not in k}
        if members > 1:
            step = pack_step(view, step_flops, members)
            step_kind = "train pack" if view.get("train pack") else "train"
        else:
            step = beside(view.get("train", []), flops_only.get("train", []), step_flops)
            step_kind = "train"
        # per evaluation length: a length costs its figure and checks besides its FLOPs
        kind = f"eval {protocol}"
        per_length = beside(view.get(kind, []), flops_only.get(kind, []), evaluation / lengths)
        evaluate = None if per_length is None else per_length * lengths * members
        starts = [s[0] if isinstance(s, list) else s for s in view.get("start", [])]
        start = sorted(starts)[len(starts) // 2] if starts else None
        measured = {"steps": step is not None, "evaluation": evaluate is not None}
        own_kinds = {"steps": step_kind, "evaluation": f"eval {protocol}"}
        guessed = [
            part
            for part, value in (
                ("steps", step),
                (f"{protocol} evaluation", evaluate),
                ("start-up", start),
            )
            if value is None
        ]
        speed = ROUGH_FLOPS_PER_SECOND.get(self.device, ROUGH_FLOPS_PER_SECOND["cpu"])
        step = members * step_flops / speed if step is None else step
        if evaluate is None:
            evaluate = members * (evaluation / speed + ROUGH_SECONDS_PER_LENGTH * lengths)
        start = ROUGH_START_SECONDS if start is None else start
        slower = contention(self.load)  # the calibration holds quiet times (module docstring)
        step, evaluate, start = step * slower, evaluate * slower, start * slower
        return {
            "step": step,
            "evaluate": evaluate,
            "start": start,
            "total": start + steps * step + evaluate,
            "guessed": guessed,
            "measured": [part for part, known in measured.items() if known],
            "own": [part for part, kind in own_kinds.items() if measured[part] and kind in own],
            "contention": slower,
            "speed": speed,
        }

    def line(
        self,
        steps: int,
        step_flops: float,
        evaluation: float,
        protocol: str,
        lengths: int = 1,
        members: int = 1,
    ) -> str:
        """One line: the total, how it splits, and whether it is calibrated here. ``evaluation``:
        the evaluation's FLOPs over its ``lengths`` lengths. ``members`` > 1: a pack of that many
        runs (``step_flops`` and ``evaluation`` one member's), which trains them all in one
        step: steps × one pack step's time (``pack_step``), not members × a run's, then
        evaluates each member."""
        parts = self.parts(steps, step_flops, evaluation, protocol, lengths, members)
        step, evaluate, start, guessed = (
            parts[k] for k in ("step", "evaluate", "start", "guessed")
        )
        speed = parts["speed"]
        # every finished run records its evaluation, a long enough one its step time too
        runs = max(
            (len(v) for k, v in self.calibration.items() if isinstance(v, list) and " · " not in k),
            default=0,
        )
        a_step = "a pack step" if members > 1 else ""
        split = (
            f"{steps:,} steps × {_seconds(step)}{' ' * bool(a_step)}{a_step} + evaluation "
            f"{duration(evaluate)} + start-up {duration(start)}"
        )
        if len(guessed) == 3:
            how = (
                f"rough: {step_flops / 1e9:.3g} GFLOP a step at an assumed {speed / 1e9:g} "
                f"GFLOP/s where nothing is measured on this machine yet; finished runs calibrate "
                f"it ({self.path})"
            )
        elif guessed:
            how = (
                f"partly rough: {' and '.join(guessed)} not yet measured on this machine (a FLOP "
                f"count at an assumed {speed / 1e9:g} GFLOP/s), the rest calibrated by {runs} "
                f"finished run{'s' * (runs != 1)}"
            )
        else:
            how = f"calibrated on this machine by {runs} finished run{'s' * (runs != 1)}"
        if members > 1 and "steps" not in guessed and not self.calibration.get("train pack"):
            how += "; no pack measured here yet: its step read from single runs of its FLOPs"
        how += self._mechanism_note(parts)
        if parts["contention"] >= QUIET:
            how += f"; × {parts['contention']:.2g} for the load now ({self.load:.2g} a core)"
        if self.damaged:
            how += (
                f"; {self.damaged} damaged calibration entr{'ies' if self.damaged > 1 else 'y'} "
                f"(NaN, inf, negative or absurd) left out of {self.path}"
            )
        whole = f"for the pack of {members} runs " if members > 1 else ""
        return f"estimate: ≈ {duration(parts['total'])} {whole}({split}; {how})"

    def _mechanism_note(self, parts: dict) -> str:
        """Which entries the measured parts came from: this mechanism's or the FLOPs alone."""
        measured = parts["measured"]
        if not self.mechanism or not measured:
            return ""
        own = [p for p in measured if p in parts["own"]]
        flops_only = [p for p in measured if p not in own]
        if not flops_only:
            return f"; {' and '.join(own)} from {self.mechanism} runs"
        if not own:
            return f"; by FLOPs alone: no {self.mechanism} run measured here yet"
        return f"; {own[0]} from {self.mechanism} runs, {flops_only[0]} by FLOPs alone"

    def record(
        self,
        step_flops: float,
        step_seconds: float | None,
        evaluation: float,
        eval_seconds: float,
        protocol: str,
        start_seconds: float | None,
        lengths: int = 1,
        members: int = 1,
        load: float | None = None,
    ) -> None:
        """Add a finished run's measurements to the file (written atomically; a run that
        could not write it loses nothing but the calibration): the seconds of a step at its
        FLOPs, of an evaluation length at its mean FLOPs, and the start-up, each as its quiet
        equivalent at ``load`` (the load per core while they were measured; default the load
        now), under the FLOPs alone and, with a mechanism, under it too. A pack of ``members``
        runs (> 1; ``step_flops`` one member's) records its step apart, as ``train pack`` at
        the pack's FLOPs (``pack_step``); ``evaluation`` and ``eval_seconds`` are then one
        member's."""
        from lengen.atomic import atomic_write

        try:
            data = upgraded(json.loads(self.path.read_text())) if self.path.is_file() else {}
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict) or data.get("version") != FORMAT:
            data = {"version": FORMAT, "machines": {}}
        if not isinstance(data.get("machines"), dict):
            data["machines"] = {}
        machine = data["machines"].setdefault(self.machine, {})
        if not isinstance(machine, dict):  # damaged: this machine's calibration starts again
            machine = data["machines"][self.machine] = {}
        slower = contention(machine_load() if load is None else load)
        quiet = round(slower, 3)  # kept beside each time: what it was divided by
        train = "train pack" if members > 1 else "train"
        new = {
            train: [members * step_flops, step_seconds / slower, quiet] if step_seconds else None,
            f"eval {protocol}": [evaluation / lengths, eval_seconds / lengths / slower, quiet]
            if evaluation > 0 and lengths > 0
            else None,
            "start": [start_seconds / slower, quiet]
            if start_seconds is not None and start_seconds >= 0
            else None,
        }
        for kind, value in new.items():
            if value is None:
                continue
            keyed = self.mechanism and kind.startswith(self.KEYED)
            for name in [kind, f"{kind} · {self.mechanism}"] if keyed else [kind]:
                entries = machine.get(name)
                kept = (
                    [e for e in entries if sound_entry(name, e)]
                    if isinstance(entries, list)
                    else []
                )
                machine[name] = [*kept, value][-KEPT:]
        with contextlib.suppress(OSError):
            atomic_write(self.path, json.dumps(data, indent=1) + "\n")


def pack_step(calibration: dict, step_flops: float, members: int) -> float | None:
    """Seconds of one step of a pack of ``members`` runs of ``step_flops`` each: from the packs
    measured on this machine (``train pack``, placed by the pack's FLOPs, members ×
    ``step_flops``); with none, from single runs' steps at the pack's FLOPs (a stand-in: one
    large model's matmuls and a pack's batched small ones differ in speed, either way; the
    line says so); None with neither."""
    flops = members * step_flops
    packed = interpolate(calibration.get("train pack", []), flops)
    return packed if packed is not None else interpolate(calibration.get("train", []), flops)


def _seconds(value: float) -> str:
    """A step's time: 0.042 s, 1.3 s."""
    return f"{value:.2g} s" if value < 10 else duration(value)

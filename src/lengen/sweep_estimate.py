"""A sweep's time: its total before the first run, and the time left from the runs still to go.

Before its first job, lengen's sweeper asks ``planned_runs`` for every run's estimate: each
job's config is built as the pre-check builds one it does not know (``build(meta=True)``:
shapes, no weights), and the machine's calibration (``lengen.estimate.Estimate``, keyed by the
run's mechanism and the threads the job will use, ``job_threads``) turns its steps, FLOPs and
evaluation into seconds, as the run's own line will. A pack's job is one estimate (steps × one pack step, plus every member's evaluation),
shared by its members. Configs that differ only in their seeds cost the same: built once.
Building stops after ``BUDGET_SECONDS`` (a text corpus tokenised on first use, a thousand
jobs): the runs not reached have no estimate, and the total says how many it covers.

Each job's "run k of N" line then says the time left (``time_left``): the sum over the runs
not finished (this one included) of their estimates, each × the ratio measured / estimated
of the finished runs of the same mechanism (the encoding's cost the calibration did not know,
and the machine's load since), or of all finished runs where none of its mechanism has
finished, over the runs at once. A sweep whose plan has no estimates (another sweeper's plan,
an older one) keeps the former rule: the finished runs' mean wall time × the runs left.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

#: seconds the plan may spend building the runs' models for their estimates (module docstring)
BUDGET_SECONDS = 20.0


def planned_device(cfg: DictConfig) -> tuple[str, int]:
    """(device type, processes) a run of ``cfg`` will train on, as its trainer will choose:
    ``trainer.accelerator`` (auto: a GPU where torch sees one), devices × nodes where given as
    numbers (else one process)."""
    import torch

    accelerator = str(cfg.trainer.get("accelerator") or "auto").lower()
    if accelerator in ("gpu", "cuda"):
        device = "cuda"
    elif accelerator == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        device = accelerator if accelerator in ("cpu", "mps") else "cpu"
    devices, nodes = cfg.trainer.get("devices"), cfg.trainer.get("num_nodes") or 1
    processes = devices * nodes if isinstance(devices, int) and isinstance(nodes, int) else 1
    return device, max(1, processes)


def job_threads(cfg: DictConfig) -> int | None:
    """The torch threads a job of ``cfg`` will train with where its launcher sets them
    (``hydra.job.env_set.OMP_NUM_THREADS``, which ``lengen.train.use_thread_setting`` applies
    in the job: hydra/launcher=local's one thread per run); None: this process's, as its jobs
    inherit them. The sweep's own process keeps torch's default (a thread per core), and its
    estimates once read that machine's calibration instead of the jobs': a rough 13m14s for a
    run whose own line, from the one-thread entries, said 33m06s."""
    threads = str(OmegaConf.select(cfg, "hydra.job.env_set.OMP_NUM_THREADS", default="") or "")
    return int(threads) if threads.isdigit() and int(threads) > 0 else None


def run_parts(cfg: DictConfig, members: int | None = None) -> tuple[dict, str | None]:
    """(``Estimate.parts`` of one job, its mechanism): built on the meta device (shapes, no
    weights) and asked of this machine's calibration as the run asks it once built. ``members``:
    a pack's job (the whole pack's step); None: one run's, as ``lengen.pack.timing`` bounds
    each member."""
    from functools import partial

    import torch

    from lengen.build import build
    from lengen.caches import calibration_file
    from lengen.estimate import Estimate, eval_flops, machine_key, mechanism_key, train_step_flops
    from lengen.model.looped import evaluation_passes

    with torch.random.fork_rng(devices=[]):  # build seeds torch: the sweep's state is kept
        data, model, lengths = build(cfg, meta=True)
    device, processes = planned_device(cfg)
    mechanism = mechanism_key(cfg)
    machine = machine_key(device, processes, job_threads(cfg))
    estimate = Estimate(calibration_file(), machine, device, mechanism)
    n_params = sum(p.numel() for p in model.parameters())
    sizes = (n_params, int(cfg.model.n_layers), int(cfg.model.d_model))
    step = train_step_flops(*sizes, data.batch_size, data.sequence_length(data.train_len))
    samples = int(cfg.eval.get("samples") or 1)
    evaluation = eval_flops(
        *sizes,
        samples,
        [data.sequence_length(n) for n in lengths],
        passes=partial(evaluation_passes, model),
    )
    protocol = str(cfg.eval.get("decoding") or "teacher_forced")
    keywords = {} if members is None else {"members": members}
    steps = int(cfg.trainer.max_steps)
    return estimate.parts(steps, step, evaluation, protocol, len(lengths), **keywords), mechanism


def run_estimate(cfg: DictConfig, members: int = 1) -> dict:
    """One job's estimate -> {"seconds", "mechanism", "rough"}: its wall time at the load now
    (a pack of ``members``: the whole pack's), whose mechanism's runs correct it later, and
    whether any part is a rough guess (nothing of it measured here)."""
    parts, mechanism = run_parts(cfg, members)
    return {"seconds": parts["total"], "mechanism": mechanism, "rough": bool(parts["guessed"])}


def check_pack_evaluation(cfg: DictConfig) -> None:
    """Refuse (ConfigError, ``lengen.estimate_bound``) a pack whose members' evaluation their
    solo runs would refuse: over ``LENGEN_MAX_EVAL_HOURS`` and over their training. Asked by
    the pre-check of a pack sweep before Hydra writes anything (``lengen.preflight.packs``), of
    one member (its packmates differ only in seeds and learning rate: the same cost). It needs
    torch: the calibration is keyed by torch's threads and read by the built model's parameter
    count and the data source's sequence lengths (the meta build gives both without weights).
    No estimate (a build that fails: its job says why): nothing to bound."""
    from lengen.estimate_bound import check_evaluation_time

    try:
        parts, _ = run_parts(cfg)
    except Exception:  # noqa: BLE001 - no estimate: nothing to bound, as a solo run
        return
    check_evaluation_time(cfg, parts, int(cfg.trainer.max_steps))


def _cost_key(cfg: DictConfig) -> str:
    """What a run's cost depends on: its config without hydra and the seeds."""
    values = OmegaConf.to_container(
        OmegaConf.masked_copy(cfg, [k for k in cfg if k not in ("hydra", "seed")]), resolve=False
    )
    if isinstance(values.get("data"), dict):
        values["data"].pop("seed", None)
    return repr(values)


def planned_runs(configs: Sequence[DictConfig], sizes: Sequence[int]) -> list[dict | None]:
    """Every run's estimate, in run order (a pack's job: its members', each an equal share of
    the pack's) -> a list of {"seconds", "mechanism", "rough"}, None where none was made
    (the budget spent, or a job whose build fails: its job will say why)."""
    started, known, runs = time.monotonic(), {}, []
    for cfg, members in zip(configs, sizes, strict=True):
        key = (_cost_key(cfg), members)
        if key not in known and time.monotonic() - started < BUDGET_SECONDS:
            try:
                known[key] = run_estimate(cfg, members)
            except Exception:  # noqa: BLE001 - an estimate never stops a sweep
                known[key] = None
        job = known.get(key)
        share = None if job is None else {**job, "seconds": job["seconds"] / members}
        runs += [share] * members
    return runs


def total_line(estimates: Sequence[dict | None], workers: int) -> str | None:
    """``sweep: 8 runs, ≈ 4m10s in all (…)`` from the plan's estimates over ``workers`` runs at
    once; None where no run has one."""
    from lengen.estimate import duration

    known = [e for e in estimates if e is not None]
    if not known:
        return None
    runs = len(estimates)
    total = sum(e["seconds"] for e in known) / max(1, workers)
    notes = []
    if len(known) < runs:
        notes.append(f"{len(known)} of {runs} runs estimated")
    rough = sum(1 for e in known if e["rough"])
    if rough:
        notes.append(f"{rough} of {len(known)} runs partly rough: not all measured here yet")
    else:
        notes.append("calibrated on this machine")
    at_once = f", {workers} at a time" if workers > 1 else ""
    return f"sweep: {runs} run{'s' * (runs != 1)}, ≈ {duration(total)} in all{at_once} ({'; '.join(notes)})"


def time_left(plan: dict, records: dict[int, dict]) -> tuple[int, float] | None:
    """(runs finished, seconds left) from the sweep's ``plan`` and its jobs' ``records`` (by
    run number from 0; an ended one has its ``outcome`` and ``wall_s``, a pack member's the
    pack's, shared by its ``pack`` members): the module docstring's rule, over the runs with no
    outcome yet. None where nothing can be said yet."""
    runs, workers = int(plan.get("runs") or 0), max(1, int(plan.get("workers") or 1))
    kinds = {number: outcome_kind(r) for number, r in records.items()}
    # only a run that trained to its end measures its estimate: one interrupted after minutes,
    # refused at once or skipped as finished earlier would make every run to go look short
    walls = {
        number: r["wall_s"] / max(1, int(r.get("pack") or 1))
        for number, r in records.items()
        if isinstance(r.get("wall_s"), int | float) and kinds[number] == "trained"
    }
    ended = {number for number, kind in kinds.items() if kind is not None}  # none of them to go
    done = sum(kind in FINISHED for kind in kinds.values())
    estimates = plan.get("estimates")
    if not isinstance(estimates, list) or len(estimates) != runs or not any(estimates):
        if not walls:
            return None
        mean = sum(walls.values()) / len(walls)
        return done, mean * max(runs - len(ended), 0) / workers
    measured: dict[str | None, list[float]] = {}  # mechanism -> [sum of walls, sum of estimates]
    for number, wall in walls.items():
        planned = estimates[number] if number < runs else None
        if planned and planned.get("seconds"):
            for key in (planned.get("mechanism"), "all runs"):
                sums = measured.setdefault(key, [0.0, 0.0])
                sums[0], sums[1] = sums[0] + wall, sums[1] + planned["seconds"]
    pooled = measured.get("all runs")
    mean_wall = sum(walls.values()) / len(walls) if walls else None
    left = 0.0
    for number in range(runs):
        if number in ended:
            continue
        planned = estimates[number]
        if planned is None:  # no estimate: the finished runs' mean, else nothing to say
            if mean_wall is None:
                return None
            left += mean_wall
            continue
        sums = measured.get(planned.get("mechanism")) or pooled
        ratio = sums[0] / sums[1] if sums and sums[1] > 0 else 1.0
        left += planned["seconds"] * ratio
    return done, left / workers


#: the outcomes of runs that finished (lengen.cli.train_main's words before any colon)
FINISHED = ("trained", "finished earlier")


def outcome_kind(record: dict) -> str | None:
    """A job record's outcome, its word before any colon (``trained``, ``finished earlier``,
    ``interrupted``, ``not started``, ``refused``, ``failed``); None while the run goes on. A
    record with a wall time and no outcome (written before outcomes were recorded) trained."""
    outcome = record.get("outcome")
    if outcome is None:
        return "trained" if isinstance(record.get("wall_s"), int | float) else None
    return str(outcome).split(":", 1)[0].strip()

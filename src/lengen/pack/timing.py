"""A pack's time, as a solo run's: the estimate printed before its first step, the clock of its
steps, and each member's entry in this machine's calibration (``lengen.estimate``): the pack's
step recorded once (``train pack``, by its first member), every member's evaluation. Each
member's evaluation is bounded by ``LENGEN_MAX_EVAL_HOURS`` as its solo run's
(``check_evaluation_bound``)."""

from __future__ import annotations

import inspect
import math
import time

from lengen.pack.member import Member
from lengen.progress import LOAD_EVERY, machine_load


class PackTimer:
    """``lengen.progress.StepTimer``'s clock for a pack: the seconds of a pack step, and the
    machine's load every ``LOAD_EVERY`` seconds."""

    def __init__(self) -> None:
        self.first: tuple[int, float] | None = None
        self.last: tuple[int, float] | None = None
        self.loads: list[float] = []
        self._sampled = -math.inf

    def tick(self, step: int) -> None:
        now = (step, time.monotonic())
        self.first = self.first or now
        self.last = now
        if now[1] - self._sampled >= LOAD_EVERY:
            self.loads.append(machine_load())
            self._sampled = now[1]

    def mean_load(self) -> float | None:
        """The mean load per core sampled while the pack trained; None before any step."""
        return sum(self.loads) / len(self.loads) if self.loads else None

    def steps(self) -> int:
        return 0 if self.first is None else self.last[0] - self.first[0] + 1

    def step_seconds(self) -> float | None:
        from lengen.progress import MIN_TIMED_STEPS

        if self.first is None or self.steps() < MIN_TIMED_STEPS:
            return None
        return (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])


def member_costs(member: Member, device):
    """(Estimate, one member's step FLOPs, its evaluation FLOPs, protocol): what this machine's
    calibration is asked and told, as ``RunTiming`` does for a solo run."""
    from functools import partial

    from lengen.caches import calibration_file
    from lengen.estimate import mechanism_key
    from lengen.model.looped import evaluation_passes
    from lengen.progress import Estimate, eval_flops, machine_key, train_step_flops

    cfg, data, model = member.cfg, member.data, member.model
    # keyed by the mechanism too, as a solo run's (lengen.train): FLOPs alone miss PaTH's step
    machine = machine_key(device.type, 1)
    estimate = Estimate(calibration_file(), machine, device.type, mechanism_key(cfg))
    n_params = sum(p.numel() for p in model.parameters())
    sizes = (n_params, int(cfg.model.n_layers), int(cfg.model.d_model))
    step = train_step_flops(*sizes, data.batch_size, data.sequence_length(data.train_len))
    samples = int(cfg.eval.get("samples") or 1)
    lengths = [data.sequence_length(n) for n in member.lengths]
    evaluation = eval_flops(*sizes, samples, lengths, passes=partial(evaluation_passes, model))
    return estimate, step, evaluation, str(cfg.eval.get("decoding") or "teacher_forced")


def check_evaluation_bound(members: list[Member], device) -> None:
    """Refuse (ConfigError, before any member's directory is written) a pack with a member
    whose evaluation its solo run would refuse (``lengen.estimate_bound``): estimated past
    ``LENGEN_MAX_EVAL_HOURS`` and past its training, as ``RunTiming.start`` asks, with the
    member's own steps to come (a pack's step is shared, its evaluations are each member's)."""
    from lengen.estimate_bound import check_evaluation_time

    for member in members:
        try:
            estimate, step, evaluation, protocol = member_costs(member, device)
            steps = int(member.cfg.trainer.max_steps)  # a resumed member: fewer, so a longer
            # bound than its solo run's would be; the checkpoint is not read before this check
            parts = estimate.parts(steps, step, evaluation, protocol, len(member.lengths))
        except Exception:  # noqa: BLE001 - no estimate: nothing to bound, as a solo run
            continue
        check_evaluation_time(member.cfg, parts, steps)


def print_estimate(member: Member, device, steps: int, size: int) -> None:
    """The pack's wall-time estimate, printed before its first step as a solo run prints its
    own: ``steps`` × one pack step of ``size`` members, plus every member's evaluation."""
    try:
        estimate, step, evaluation, protocol = member_costs(member, device)
        lengths = len(member.lengths)
        line = estimate.line(steps, step, evaluation, protocol, lengths, members=size)
    except Exception as error:  # noqa: BLE001 - an estimate never stops a run
        line = f"estimate: none ({type(error).__name__}: {error})"
    if member.cfg.trainer.get("criterion_target") is not None:
        line += "; at most: the criterion may stop training sooner"
    print(line, flush=True)


def member_timing(member: Member, device, timer: PackTimer, size: int, first: bool, started):
    """The member's entry in this machine's calibration (``RunTiming``): its evaluation and,
    for the pack's first member only, the pack's step time (``train pack``) and start-up."""
    try:
        estimate, step, evaluation, protocol = member_costs(member, device)
    except Exception:  # noqa: BLE001 - an estimate never stops a run
        return None
    timing = MemberTiming(estimate, timer, step, evaluation, protocol, len(member.lengths))
    timing.members, timing.first = size, first
    timing.fit_seconds = time.monotonic() - started
    return timing


class MemberTiming:
    """``RunTiming.finished`` for a member: the pack's step is recorded once (by its first
    member, as a pack of ``members``: ``Estimate.record``'s ``members``), the evaluation by
    every member."""

    def __init__(self, estimate, timer, step_flops, eval_flops, protocol, lengths):
        self.estimate, self.timer = estimate, timer
        self.step_flops, self.eval_flops, self.protocol = step_flops, eval_flops, protocol
        self.lengths = lengths
        self.members, self.first, self.fit_seconds = 1, True, None

    def finished(self, eval_seconds: float) -> None:
        step = self.timer.step_seconds() if self.first else None
        start = None
        if step is not None and self.fit_seconds is not None:
            start = max(0.0, self.fit_seconds - self.timer.steps() * step)
        keywords = {}
        if "members" in inspect.signature(self.estimate.record).parameters:
            keywords["members"] = self.members
        elif step is not None:  # a calibration without packs: the member's share of a step
            step = step / self.members
        self.estimate.record(
            self.step_flops, step, self.eval_flops, eval_seconds, self.protocol, start,
            self.lengths, **keywords,
        )  # fmt: skip

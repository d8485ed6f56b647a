"""``train_pack``: train a pack's members together, write each member's run directory as a
solo run writes it. The loop is lengen's own (no Lightning trainer): one step is every active
member's batch, gradient, clipping and AdamW update at once (``lengen.pack.stack``); the
validations, logs, checkpoints and results are each member's (``lengen.pack.member``), at the
steps and in the formats a solo run has them.

What a member gets that a solo run does not: ``results.json`` says ``"pack": {"size": N,
"index": i, "members": [run folders]}``. A member that diverges returns ``{"error": <the solo
run's one line>, "type": "TrainingDiverged"}`` in its place (its directory holds failed.json,
as a solo run's would); a fault of the whole pack raises the usual error (``ConfigError``
before anything is written, ``Preempted`` after the members' checkpoints are saved, ...).
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from lengen.data.source import IGNORE, mix_seed
from lengen.errors import (
    CheckpointWriteError,
    ConfigError,
    Preempted,
    ResultsWriteError,
    RunDirectoryWriteError,
)
from lengen.pack.member import Member
from lengen.pack.stack import StackedModels
from lengen.pack.timing import PackTimer, check_evaluation_bound, member_timing, print_estimate
from lengen.packable import PACK_KEY, PACKABLE_KEYS, pack_refusal, pack_signature, step_draws
from lengen.process import acted_on_signal, install_preemption_handlers, received_signal
from lengen.rundir import RunDirectory


def train_pack(cfgs: Sequence[DictConfig], run_dirs: Sequence[str | Path]) -> list[dict]:
    """Train ``cfgs`` (configs equal but for ``PACKABLE_KEYS``) together in this process, each
    into its run directory -> each member's results dict, in order (see the module docstring).

    resume=auto: members already finished are skipped (their results returned); interrupted
    ones continue from their checkpoints. A list of one trains as the solo run does (by
    ``lengen.train.run`` itself where the pack cannot train its config)."""
    from lengen.preflight import validate

    cfgs, paths = list(cfgs), [Path(path) for path in run_dirs]
    if not cfgs or len(cfgs) != len(paths):
        raise ConfigError(f"{PACK_KEY}: a pack needs one run directory per member")
    if len(cfgs) == 1 and pack_refusal(cfgs[0]) is not None:  # dropout, DDP, …: run() trains it
        from lengen.train import run

        return [run(cfgs[0], paths[0])]
    checked = [validate(cfg) for cfg in cfgs]
    check_members(cfgs, paths)
    check_reseeding(cfgs[0], pack_device(cfgs[0]))
    directories = [RunDirectory(path) for path in paths]
    results: list = [
        directory.finished(cfg) for directory, cfg in zip(directories, cfgs, strict=True)
    ]
    todo = [index for index, result in enumerate(results) if result is None]
    if not todo:
        return results
    for index in todo:  # every member may start (or continue) where it is asked to, or none does
        directories[index].check_start(cfgs[index])
    members = [Member(cfgs[i], directories[i], i) for i in todo]  # builds: checks before writes
    check_evaluation_bound(members, pack_device(cfgs[0]))  # hours of evaluation unasked: refused
    pack = {"size": len(cfgs), "members": [path.name for path in paths]}
    with contextlib.ExitStack() as owned:
        started = []
        for member in members:  # each directory locked while the pack runs
            try:
                member.start(owned.enter_context(member.directory.owned(member.cfg)))
            except (OSError, RunDirectoryWriteError) as error:  # its own folder: it alone fails
                results[member.index] = left_pack(member, error)
                continue
            started.append(member)
        if not (members := started):
            return results
        owned.enter_context(member_logs([member.directory.path for member in members]))
        device = pack_device(cfgs[0])
        prepare(members, device)
        for cohort in cohorts(members):
            run = PackRun(cohort, checked[cohort[0].index].optim, device, pack)
            for index, outcome in run.train().items():
                results[index] = outcome
    from lengen.train import signal_after_training  # a solo run's line (SR7), a pack's words

    signal_after_training(finished_line([results[index] for index in todo]))
    return results


def finished_line(outcomes: list) -> str:
    """What a signal remembered after the pack's training let finish (``lengen.train.
    signal_after_training``'s words for a pack): the members' evaluations, and how many of
    them wrote results.json (a member that left has its own error line above)."""
    written = sum(1 for outcome in outcomes if isinstance(outcome, dict) and "error" not in outcome)
    if written == len(outcomes):
        return (
            f"the final evaluation of the pack's {written} runs was finished and their "
            "results.json written (the runs are complete; nothing to resume)"
        )
    return (
        f"the pack's final evaluations were finished: {written} of its {len(outcomes)} runs "
        "wrote results.json (those are complete; the others' errors are above)"
    )


@contextlib.contextmanager
def member_logs(paths: Sequence[Path]):
    """Each member's ``train.log``, as Hydra's job log gives a solo run its own: the process's
    log records (Lightning's lines) go to every member's file while the pack trains. Hydra's own
    handler already writes the pack job's folder (the first member's); that file is left to it."""
    import logging

    from lengen.logs import RoutineFilter

    root = logging.getLogger()
    taken = {
        Path(handler.baseFilename).resolve()
        for handler in root.handlers
        if isinstance(handler, logging.FileHandler)
    }
    handlers = []
    for path in paths:
        log = (path / "train.log").resolve()
        if log in taken:
            continue
        handler = logging.FileHandler(log, mode="a", encoding="utf-8")
        handler.setFormatter(
            logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
        )
        handler.addFilter(RoutineFilter())  # as Hydra's train.log handler (configs/hydra)
        root.addHandler(handler)
        handlers.append(handler)
    try:
        yield
    finally:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()


def check_members(cfgs: list[DictConfig], paths: list[Path]) -> None:
    """A pack's members may differ only in ``PACKABLE_KEYS``, write distinct directories, and
    train in a pack at all (``pack_refusal``); ConfigError (nothing written) otherwise."""
    if len(cfgs) > 1 and (refusal := pack_refusal(cfgs[0])) is not None:
        raise ConfigError(refusal)
    first = pack_signature(cfgs[0])
    for cfg in cfgs[1:]:
        if pack_signature(cfg) != first:
            raise ConfigError(
                f"{PACK_KEY}: the members' configs differ in more than the packable keys "
                f"({', '.join(PACKABLE_KEYS)}); allowed: members that differ only in those"
            )
    resolved = [path.resolve() for path in paths]
    if len(set(resolved)) != len(resolved):
        raise ConfigError(f"{PACK_KEY}: two members of one pack would write one run directory")


def check_reseeding(cfg: DictConfig, device: torch.device) -> None:
    """A step's draws (``step_draws``: dropout, randomized positions, a random start offset)
    pack where members train one after another (``LOOPED``), each reseeded as its solo run's
    step (``PackRun.step``); a vmapped pack draws one generator for all: refused (ConfigError,
    nothing written), as ``pack_refusal`` refuses them for other accelerators."""
    draws = step_draws(cfg)
    if draws and not LOOPED.get(device.type, False):
        raise ConfigError(
            f"{draws[0]} cannot train in a pack ({PACK_KEY} > 1) on {device.type}: its members "
            f"are vmapped, so their random draws would come from one generator; allowed: "
            f"trainer.accelerator=cpu, or {PACK_KEY}=1"
        )


def pack_device(cfg: DictConfig) -> torch.device:
    """The device Lightning's ``trainer.accelerator`` would choose for one process."""
    accelerator = str(cfg.trainer.get("accelerator", "auto"))
    if accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
        return torch.device("cuda", 0)
    if accelerator in ("gpu", "cuda"):
        raise ConfigError(f"trainer.accelerator={accelerator}: no GPU here; allowed: cpu or auto")
    return torch.device("cpu")


def prepare(members: list[Member], device: torch.device) -> None:
    """What ``make_trainer`` does before training: threads, quiet warnings, the model on its
    device (in training mode), its attention kernel checked for that device."""
    from lengen.lit import quiet_known_noise
    from lengen.train import use_thread_setting

    quiet_known_noise()
    # SDPA has no batching rule on the CPU: vmap runs it member by member (correct, and the
    # attention is a small part of a small model's step); said once per process, not per run
    warnings.filterwarnings("ignore", message=r".*not yet implemented the batching rule for")
    use_thread_setting()
    for member in members:
        member.model.to(device).train()
    try:
        members[0].model.check_kernel(device.type, training=True)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def cohorts(members: list[Member]) -> list[list[Member]]:
    """Members that continue from one step train together; an interrupted pack's members
    normally share it (checkpoints are written for all at once)."""
    by_step: dict[int, list[Member]] = {}
    for member in members:
        by_step.setdefault(member.start_step, []).append(member)
    return [by_step[step] for step in sorted(by_step)]


def stack_batches(batches: list[dict], causal: bool, device: torch.device):
    """The members' batches as one -> (inputs {name: (M, B, T)}, targets (M, B, T), scored
    tokens (M,) float32, each at least 1).

    Members draw their own lengths; a causal model's batches are right-padded to the longest
    (PAD tokens, unscored targets, positions repeating the last or −1 rows on grids): no scored
    position sees them. Other models' batches must have one shape (``pack_refusal``)."""
    longest = max(batch["targets"].shape[1] for batch in batches)
    names = list(batches[0]["inputs"])
    if not causal and any(
        len({tuple(b["inputs"][name].shape) for b in batches}) > 1 for name in names
    ):
        raise ConfigError(
            "data.curriculum: the members' batches differ in length and the model is not "
            "causal; allowed: data.curriculum=fixed, or hydra.sweeper.pack=1"
        )

    def padded(name: str, tensor: torch.Tensor) -> torch.Tensor:
        extra = longest - (tensor.shape[0] if name == "positions" else tensor.shape[1])
        if extra <= 0:
            return tensor
        if name == "positions" and tensor.ndim == 1:  # (T,): the last position again
            return torch.cat([tensor, tensor[-1:].expand(extra)])
        if name == "positions":  # (T, A): rows without a grid position
            return torch.cat([tensor, tensor.new_full((extra, tensor.shape[1]), -1)])
        return F.pad(tensor, (0, extra), value=IGNORE if name == "targets" else 0)

    inputs = {
        name: torch.stack([padded(name, b["inputs"][name]) for b in batches]).to(device)
        for name in names
    }
    targets = torch.stack([padded("targets", b["targets"]) for b in batches]).to(device)
    scored = [max(float((b["targets"] != IGNORE).sum()), 1.0) for b in batches]
    return inputs, targets, torch.tensor(scored, dtype=torch.float32, device=device)


#: device types whose packs train their members one after another in the pack's step
#: (``StackedModels._looped``) rather than in one vmapped call: a CPU, where a step is arithmetic
#: and vmap's batched products run slower than the members' own (docs/benchmarks.md, "CPU pack");
#: a GPU keeps vmap, where one call for all members is what fills the device
LOOPED = {"cpu": True}

#: threads that train a looped pack's members at once (``stack.MemberThreads``: each with one
#: intra-op thread of torch's); 1: members one after another with torch's own threads, as a
#: solo run; never more than torch's threads (``OMP_NUM_THREADS``). Not raised by default: whether members side by side on 2 cores beat a member
#: spread over them is for a quiet machine's benchmark to say (``scripts/bench_pack.py
#: --member-threads 2``), and a member on one thread sums as a one-thread solo run does
MEMBER_THREADS = {"cpu": 1}

#: what one more vmapped call costs, in padded member-lengths (``length_groups``): on a CPU,
#: where a step's time is its arithmetic, about one member at the pack's mean length (a call's
#: dispatch work); on a GPU, where a small model's step is launch-bound, more calls never pay
GROUP_COST = {"cpu": 1.0}


def length_groups(lengths: list[int], cost: float) -> list[list[int]]:
    """The members (indices) in groups of similar length, each trained by one vmapped call
    padded to its longest: the grouping (of members sorted by length) that minimises the padded
    work, sum of |group| x its longest, plus ``cost`` x the mean length per extra call. Members
    draw their own lengths, and one call for all would pad every member to the step's longest
    (with uniform lengths 1…16 and 8 members, ~1.8x the arithmetic of their own lengths)."""
    if cost == math.inf or len(set(lengths)) == 1:
        return [list(range(len(lengths)))]  # one call, the stack's own order: no gathering
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sorted_lengths = [lengths[i] for i in order]
    overhead = cost * sum(lengths) / len(lengths)
    best = [0.0] + [math.inf] * len(order)  # best[j]: the first j members grouped
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        for start in range(end):  # a group of members start … end-1, padded to the last
            total = best[start] + overhead + (end - start) * sorted_lengths[end - 1]
            if total < best[end]:
                best[end], cut[end] = total, start
    groups, end = [], len(order)
    while end:
        groups.append(order[cut[end] : end])
        end = cut[end]
    return groups[::-1]


class PackRun:
    """The training of one cohort: members that start from one step."""

    def __init__(self, members: list[Member], optim, device: torch.device, pack: dict):
        self.members, self.optim, self.device, self.pack = members, optim, device, pack
        trainer = members[0].cfg.trainer
        self.max_steps = int(trainer.max_steps)
        interval = int(trainer.val_check_interval)
        self.val_every = min(interval, self.max_steps)  # at least once, at the end (make_trainer)
        self.save_every = trainer.get("checkpoint_every_n_steps")
        self.log_every = int(trainer.get("log_every_n_steps", 50))
        self.clip = (trainer.get("gradient_clip_val"), trainer.get("gradient_clip_algorithm"))
        self.bf16 = str(trainer.get("precision", "32-true")) == "bf16-mixed"
        self.group_cost = GROUP_COST.get(device.type, math.inf)
        self.looped = LOOPED.get(device.type, False)
        #: dropout, random positions (``step_draws``): each member's forward draws from the
        #: global generator seeded as its solo run's step seeds it (``LitModel.training_step``)
        self.reseeds = bool(step_draws(members[0].cfg))
        # no more member threads than torch's own (OMP_NUM_THREADS): a sweep's lanes of one
        # thread each keep one core a lane
        threads = min(MEMBER_THREADS.get(device.type, 1), torch.get_num_threads())
        threads = threads if self.looped else 1
        self.member_threads = 1 if self.reseeds else threads  # one generator: no threads
        self.timer = PackTimer()
        self.outcomes: dict[int, dict] = {}
        self.started = time.monotonic()

    def train(self) -> dict[int, dict]:
        """Train until every member finished or left -> {member index: results or error}."""
        step = self.members[0].start_step
        done = [m for m in self.members if m.reached or step >= self.max_steps]
        for member in done:  # interrupted while being evaluated: evaluate only
            self.finish(member, step, len(self.members))
        active = [m for m in self.members if m not in done]
        if not active:
            return self.outcomes
        lrs = [float(m.cfg.optim.lr) for m in active]  # optim.lr may differ (PACKABLE_KEYS)
        models = [m.model for m in active]
        stacked = StackedModels(
            models, self.optim, lrs, self.max_steps, self.device, looped=self.looped,
            threads=self.member_threads,
        )  # fmt: skip
        if step > 0:
            states = [m.state["optimizer_states"][0] for m in active]
            stacked.load_states(states, [m.state["lr_schedulers"][0] for m in active])
        size = len(active)
        print_estimate(active[0], self.device, self.max_steps - step, size)
        causal = getattr(active[0].model, "causal", False) is True
        install_preemption_handlers(signal.SIGINT)  # a signal received before stays remembered
        try:
            while active and step < self.max_steps:
                active = self.step(stacked, active, step, causal, size)
                step += 1
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C interrupts again
            stacked.close()
        return self.outcomes

    def step(self, stacked: StackedModels, active: list[Member], step: int, causal: bool, size):
        """Step ``step`` (0-based) of every active member -> the members still active."""
        batches = [member.data.train_batch(step) for member in active]
        if self.reseeds:  # stack row i is active[i]; rank 0, as a one-process solo run
            stacked.reseed = lambda i: torch.manual_seed(mix_seed(active[i].cfg.seed, step, 2, 0))
        results = torch.zeros(4, len(active), device=self.device)  # mean, sum, correct, tokens
        lengths = [batch["targets"].shape[1] for batch in batches]
        if self.looped:  # one member a call, at its own length: nothing padded
            groups = [[i] for i in range(len(active))]
        else:
            groups = length_groups(lengths, self.group_cost if causal else math.inf)
        for group in groups:
            inputs, targets, tokens = stack_batches(
                [batches[i] for i in group], causal, self.device
            )
            with self.precision():
                mean, summed, correct = stacked.gradients(inputs, targets, tokens, group)
            index = torch.tensor(group, device=self.device)
            found = torch.stack([mean.float(), summed.float(), correct.float(), tokens])
            results.index_copy_(1, index, found)
        means, sums, corrects, scored = results.tolist()  # the step's one sync with the host
        leaving = [i for i, loss in enumerate(sums) if not math.isfinite(loss)]
        for i in leaving:
            error = active[i].diverged(step, sums[i])
            self.outcomes[active[i].index] = {"error": str(error), "type": "TrainingDiverged"}
        if leaving:
            stacked.discard(leaving)
        stacked.clip(*self.clip)
        stacked.step()
        done = step + 1
        self.timer.tick(done)
        staying = [i for i in range(len(active)) if i not in leaving]
        validating = done % self.val_every == 0
        for i in staying:
            member = active[i]
            if validating:
                stacked.load_member(i, member.model)
                with self.precision():
                    member.validate(step, self.device)
            logged = done % self.log_every == 0 or member.reached
            accuracy = corrects[i] / max(scored[i], 1.0)
            member.trained(step, batches[i], means[i], sums[i] / scored[i], accuracy, logged)
        self.progress(done, [sums[i] / scored[i] for i in staying], active)
        signum = received_signal()
        finishing = [i for i in staying if active[i].reached or done >= self.max_steps]
        due = self.save_every and done % self.save_every == 0
        saving = staying if (due or signum) else finishing
        unsaved = []  # a member whose checkpoint cannot be written leaves; the others go on
        for i in saving:
            if not validating:
                stacked.load_member(i, active[i].model)
            state = active[i].checkpoint(
                done, stacked.member_optimizer_state(i), stacked.member_schedule_state(i)
            )
            try:
                active[i].save(state)
            except (CheckpointWriteError, OSError) as error:  # full disk: the CSV log too
                self.leave(active[i], error)
                unsaved.append(i)
        staying = [i for i in staying if i not in unsaved]
        finishing = [i for i in finishing if i not in unsaved]
        if signum:
            acted_on_signal()
            raise Preempted(
                signum, done, active[staying[0]].directory.checkpoint if staying else ""
            )
        for i in finishing:
            self.finish(active[i], done, size)
        gone = set(leaving) | set(finishing) | set(unsaved)
        if gone:
            keep = [i for i in range(len(active)) if i not in gone]
            if keep:
                stacked.select(keep)
            active = [active[i] for i in keep]
        return active

    def precision(self):
        """Lightning's ``trainer.precision=bf16-mixed``: bf16 autocast around the training and
        validation forwards (the weights, gradients and AdamW stay fp32); else nothing."""
        if self.bf16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def progress(self, done: int, losses: list[float], active: list[Member]) -> None:
        """A progress line every ``every_n_steps`` steps (lines or bars asked for)."""
        from lengen.progress import every_n_steps, progress_mode, step_line

        cfg = active[0].cfg
        if progress_mode(cfg.trainer.get("enable_progress_bar", True)) == "off":
            return
        if done % every_n_steps(self.max_steps) and done != self.max_steps:
            return
        rate = done / max(time.monotonic() - self.started, 1e-9)
        names = [m.directory.path.name for m in active]
        label = f"pack of {len(active)}: {names[0]}" + (f" … {names[-1]}" if len(names) > 1 else "")
        loss = sum(losses) / len(losses) if losses else None
        print(step_line(label, done, self.max_steps, loss, rate), flush=True)

    def finish(self, member: Member, step: int, size: int) -> None:
        """Evaluate a member that finished training and write its run directory."""
        if step > 0:  # the global generator as a solo run leaves it (seeded at each step)
            torch.manual_seed(mix_seed(member.cfg.seed, step - 1, 2, 0))
        pack = {**self.pack, "index": member.index}
        first = member is self.members[0]
        timing = member_timing(member, self.device, self.timer, size, first, self.started)
        from lengen.train import timing_entry

        # the pack's cost, as far as this member: from the pack's start to the end of its
        # training, the evaluations of members that finished before it included
        cost = timing_entry(time.monotonic() - self.started, self.timer.steps(),
                            self.timer.step_seconds(), self.timer.mean_load(), members=size)  # fmt: skip
        try:
            self.outcomes[member.index] = member.finish(step, self.device, pack, timing, cost)
        except (ResultsWriteError, OSError) as error:  # its disk full: the others still finish
            self.leave(member, error)

    def leave(self, member: Member, error: BaseException) -> None:
        """``left_pack`` in training: the member's outcome is its error."""
        self.outcomes[member.index] = left_pack(member, error)


def left_pack(member: Member, error: BaseException) -> dict:
    """A member whose own files cannot be written (a full disk, a read-only folder) leaves
    the pack as a failed run -> its outcome ({"error", "type"}): said in one line and in its
    failed.json where that can be written (its last checkpoint kept, so ``resume=auto``
    continues it); the other members train and finish: their results are not lost with it."""
    if isinstance(error, OSError):  # a log, card or config written outside the usual guards
        error = CheckpointWriteError(
            f"writing into {member.directory.path} failed ({error.strerror or error}); "
            f"allowed: free the disk (or make it writable), then resume=auto with the same "
            f"sweep"
        )
    line = str(error).splitlines()[0] if str(error) else type(error).__name__
    member.directory.record_failure(error)
    if member.logger:
        with contextlib.suppress(Exception):
            member.logger.finalize("failed")
    print(f"[{member.directory.path.name}] error: {line}", flush=True)
    return {"error": line, "type": type(error).__name__}

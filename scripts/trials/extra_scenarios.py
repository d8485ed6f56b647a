"""The scenarios ``rerun_hostile_extra.py`` runs: the hostile trial's (2026-11-28) cases that need
a signal at a moment, a signal then resume, two commands at once, a pipe, or a folder changed
while a run writes into it.

Moments come from the run's own lines (``trainer.enable_progress_bar=lines``: a line every
ceil(max_steps / 20) steps, one per validation, "trained to step N …; evaluating", and a sweep's
"sweep: run k of N"), so the load of the machine does not move them. Where the trial ran
``$REF`` with ``enable_progress_bar=false``, ``$REF_LINES`` is ``$REF`` with progress lines:
a presentation key, that changes neither the run's numbers nor its identity (``lengen.identity``),
and every run a comparison pairs uses it alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Step:
    """One command of a scenario (``rerun_hostile_extra`` docstring)."""

    id: str
    command: str
    on: tuple[str, str] = ()  # (regex on an output line, action)
    background: bool = False
    until: str = ""  # a background step: the next starts once a line matches ('' at once)
    shell: bool = False  # a bash line (pipes, redirections, set-up)
    env: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # paths (relative to the scenario's folder) reported after
    limit: int = 0


@dataclass
class Scenario:
    id: str
    cases: str  # the trial's case IDs it re-runs
    what: str
    steps: list[Step]
    compare: list[tuple[str, str]] = field(default_factory=list)  # (undisturbed, disturbed)
    cleanup: list[str] = field(default_factory=list)  # bash, before (leftovers) and after


#: what a stopped, resumed or finished run leaves, reported per step
RUN_FILES = ("run/checkpoints/last.ckpt", "run/failed.json", "run/results.json")
#: the trial's 2nd checkpoint of a $REF run (every 5 steps): validation at step 10 follows it
SECOND_CKPT = r"validation at step 10:"


def signal_resume(sid: str, options: str, sig: str, resume: str = "auto") -> Scenario:
    """SR1–SR6, S01: the undisturbed run, the run signalled after its 2nd checkpoint, its
    resume in the same folder; the finished two compared."""
    base = f"train.py $REF_LINES {options}".strip()
    return Scenario(
        id=sid,
        cases=f"{sid}, {sid}r" if sid.startswith("SR") else "S01, S01b",
        what=f"{options or 'pe=rope (default)'}: SIG{sig} after the 2nd checkpoint, then "
        f"resume={resume}, against the undisturbed run",
        steps=[
            Step(f"{sid}-ref", f"{base} hydra.run.dir=$W/ref"),
            Step(sid, f"{base} hydra.run.dir=$W/run", on=(SECOND_CKPT, sig), files=RUN_FILES),
            Step(f"{sid}r", f"{base} resume={resume} hydra.run.dir=$W/run", files=RUN_FILES),
        ],
        compare=[("ref", "run")],
    )


#: K06 / K07's text run: the record cuts the command short after these options; the rest is
#: $REF's sizes (the trial's $TXR is not spelled out in the record)
TXR = (
    "train.py data=text data.files.train=$W/small.txt data.tokenizer=char data.len=16 "
    "eval.lengths=[16,32] trainer.max_steps=60 trainer.val_check_interval=20 "
    "trainer.checkpoint_every_n_steps=10 data.batch_size=8 data.val_samples=16 eval.samples=16 "
    "optim.warmup_steps=5 trainer.enable_progress_bar=lines model.dropout=0.1 "
    "trainer.log_every_n_steps=5 model.d_model=32 model.d_ff=64 eval.plot_formats=[png]"
)
SMALL = "cat $REPO/README.md $REPO/docs/*.md | head -c 200000 > small.txt"
SWEEP = "train.py -m debug=fast eval.lengths=[8]"

SCENARIOS = {
    s.id: s
    for s in (
        signal_resume("SR1", "pe=fox", "TERM"),
        signal_resume("SR2", "pe=stick_breaking", "INT"),
        signal_resume("SR3", "pe=path_fox", "KILL"),
        signal_resume("SR4", "pe=rnope_swa model.n_layers=4 pe.ssmax=true", "USR1"),
        signal_resume(
            "SR5", "pe=pope data=flip_flop data.len=16 data.min_len=4 eval.lengths=[16,32]", "TERM"
        ),
        signal_resume("SR6", "pe=dape data=indirect_indexing eval.lengths=[16,32]", "TERM"),
        signal_resume("S01", "", "TERM", resume="true"),
        Scenario(
            "SR7",
            "SR7",
            "pe=stick_breaking: SIGTERM once training ended and the final evaluation began",
            [
                Step("SR7-ref", "train.py $REF_LINES pe=stick_breaking hydra.run.dir=$W/ref"),
                Step(
                    "SR7",
                    "train.py $REF_LINES pe=stick_breaking hydra.run.dir=$W/run",
                    on=(r"trained to step 30\b.*evaluating", "TERM"),
                    files=RUN_FILES,
                ),
            ],
            compare=[("ref", "run")],
        ),
        Scenario(
            "TXT",
            "K06, K06b, K07",
            "text, data.num_workers=2: SIGTERM after the 2nd checkpoint, resume with "
            "num_workers=0 (K06b); SIGKILL after the 2nd checkpoint, resume=true at once (K07)",
            [
                Step("small.txt", SMALL, shell=True),
                Step("TXT-ref", f"{TXR} data.num_workers=2 hydra.run.dir=$W/ref"),
                Step(
                    "K06",
                    f"{TXR} data.num_workers=2 hydra.run.dir=$W/k06",
                    on=(r"validation at step 20:", "TERM"),
                    files=("k06/checkpoints/last.ckpt", "k06/failed.json"),
                ),
                Step(
                    "K06b",
                    f"{TXR} data.num_workers=0 resume=true hydra.run.dir=$W/k06",
                    files=("k06/results.json",),
                ),
                Step(
                    "K07-kill",
                    f"{TXR} data.num_workers=2 hydra.run.dir=$W/k07",
                    on=(r"validation at step 20:", "KILL"),
                    files=("k07/checkpoints/last.ckpt",),
                ),
                Step(
                    "K07",
                    f"{TXR} data.num_workers=2 resume=true hydra.run.dir=$W/k07",
                    files=("k07/results.json",),
                ),
            ],
            compare=[("ref", "k06"), ("ref", "k07")],
        ),
        Scenario(
            "SN11",
            "SN11a, SN11b, SN11c",
            "sweep A into a folder; while it runs, sweep B into the same folder, then a single "
            "run into a run directory inside it",
            [
                Step(
                    "SN11a",
                    f"{SWEEP} seed=0,1 hydra.sweep.dir=$W/sw",
                    background=True,
                    until=r"sweep: run 1 of 2",
                ),
                Step("SN11b", f"{SWEEP} seed=2,3 hydra.sweep.dir=$W/sw"),
                Step("SN11c", "train.py debug=fast eval.lengths=[8] hydra.run.dir=$W/sw/mine"),
            ],
        ),
        Scenario(
            "SN33",
            "SN33a, SN33b",
            "sweep A into folder F; while it runs, sweep B into a symlink to F",
            [
                Step("link", "mkdir real && ln -s real link", shell=True),
                Step(
                    "SN33a",
                    f"{SWEEP} seed=0,1 hydra.sweep.dir=$W/real",
                    background=True,
                    until=r"sweep: run 1 of 2",
                ),
                Step("SN33b", f"{SWEEP} seed=2 hydra.sweep.dir=$W/link"),
            ],
        ),
        Scenario(
            "SN27",
            "SN27a, SN27b",
            "two sweeps at once into two folders",
            [
                Step(
                    "SN27a",
                    f"{SWEEP} seed=0 hydra.sweep.dir=$W/x",
                    background=True,
                    until=r"sweep: run 1 of 1",
                ),
                Step("SN27b", f"{SWEEP} seed=0 hydra.sweep.dir=$W/y"),
            ],
        ),
        Scenario(
            "SN28",
            "SN28a, SN28b",
            "two sweeps started at once with the default sweep folder",
            [
                Step("SN28a", f"{SWEEP} seed=0", background=True),
                Step("SN28b", f"{SWEEP} seed=1"),
            ],
        ),
        Scenario(
            "SN12",
            "SN12a, SN12b",
            "a sweep's process group SIGKILLed as its first run starts training, then the same "
            "sweep with resume=auto at once",
            [
                Step(
                    "SN12a",
                    f"{SWEEP} seed=0,1 hydra.sweep.dir=$W/sw",
                    # its first run's estimate line: that run is built and about to train
                    # (debug=fast prints no progress lines)
                    on=(r"^\[.*\] estimate:", "gKILL"),
                ),
                Step("SN12b", f"{SWEEP} seed=0,1 resume=auto hydra.sweep.dir=$W/sw"),
            ],
        ),
        Scenario(
            "SW2",
            "SW2b",
            "SIGTERM to a rope,alibi $REF sweep in its 2nd run (SW2), then resume=auto (SW2b)",
            [
                Step(
                    "SW2",
                    "train.py -m pe=rope,alibi $REF_LINES hydra.sweep.dir=$W/sw",
                    on=(r"alibi.*\] step 6/30", "TERM"),
                ),
                Step(
                    "SW2b", "train.py -m pe=rope,alibi $REF_LINES resume=auto hydra.sweep.dir=$W/sw"
                ),
            ],
        ),
        Scenario(
            "E16",
            "E16",
            "two eval.py at once on one finished run with the same tag",
            [
                Step("fin", "train.py debug=fast eval.lengths=[8] hydra.run.dir=$W/run"),
                Step(
                    "E16a",
                    "eval.py run=$W/run tag=same eval.lengths=[8,16]",
                    background=True,
                ),
                Step(
                    "E16b",
                    "eval.py run=$W/run tag=same eval.lengths=[8,32]",
                    files=("run/results.same.json", "run/results.same-1.json"),
                ),
            ],
        ),
        Scenario(
            "ES01",
            "ES01",
            "stdout a pipe whose reader has gone (| true)",
            [
                Step(
                    "ES01",
                    "$P $REPO/train.py debug=fast eval.lengths=[8] hydra.run.dir=$W/run | true; "
                    "exit ${PIPESTATUS[0]}",
                    shell=True,
                    files=("run/results.json",),
                ),
            ],
        ),
        Scenario(
            "ES12",
            "ES12",
            "train.py … | head -1",
            [
                Step(
                    "ES12",
                    "$P $REPO/train.py debug=fast 'eval.lengths=[8]' trainer.enable_progress_bar=lines "
                    "hydra.run.dir=$W/run | head -1; exit ${PIPESTATUS[0]}",
                    shell=True,
                    files=("run/results.json",),
                ),
            ],
        ),
        Scenario(
            "ES05",
            "ES05",
            "trainer.max_steps=10**12: SIGTERM once its estimate line is printed",
            [
                Step(
                    "ES05",
                    "train.py debug=fast eval.lengths=[8] trainer.max_steps=1000000000000 "
                    "trainer.checkpoint_every_n_steps=3 trainer.val_check_interval=3 "
                    "trainer.enable_progress_bar=lines hydra.run.dir=$W/run",
                    on=(r"^estimate:", "TERM"),
                    files=RUN_FILES,
                    limit=90,  # at cec204b it never stops, and its memory grows (for_B)
                ),
            ],
        ),
        Scenario(
            "M09b",
            "M09b",
            "trainer.num_nodes=2 on one machine, SIGTERM at its first line (if it waits)",
            [
                Step(
                    "M09b",
                    "train.py debug=fast eval.lengths=[8] trainer.num_nodes=2 "
                    "trainer.accelerator=cpu hydra.run.dir=$W/run",
                    on=(r"Initializing distributed", "TERM"),
                    files=("run",),
                ),
            ],
        ),
        Scenario(
            "S07",
            "S07",
            "SIGINT 1.0 s after start, while Python imports (no line marks that moment)",
            [
                Step(
                    "S07",
                    "train.py trainer.max_steps=60 trainer.val_check_interval=20 "
                    "trainer.checkpoint_every_n_steps=10 data.batch_size=16 data.val_samples=32 "
                    "eval.samples=32 eval.lengths=[8,16,32] optim.warmup_steps=5 "
                    "hydra.run.dir=$W/run",
                    on=("after:1.0", "INT"),
                    files=("run",),
                ),
            ],
        ),
        Scenario(
            "S08",
            "S08",
            "$REF: SIGINT once the run's config.yaml exists (before fit)",
            [
                Step(
                    "S08",
                    "train.py $REF hydra.run.dir=$W/run",
                    on=("file:run/config.yaml", "INT"),
                    files=RUN_FILES,
                ),
            ],
        ),
        Scenario(
            "SN32",
            "SN32b",
            "aggregate.py on SN32's sweep (hydra.sweep.subdir=s${seed} over pe=rope,alibi)",
            [
                Step(
                    "SN32",
                    "train.py -m debug=fast eval.lengths=[8] pe=rope,alibi "
                    "'hydra.sweep.subdir=s${seed}' resume=auto hydra.sweep.dir=$W/sw",
                    files=("sw",),
                ),
                Step("SN32b", "scripts/aggregate.py $W/sw"),
            ],
        ),
    )
}

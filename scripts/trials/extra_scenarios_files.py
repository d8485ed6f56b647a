"""The scenarios of ``rerun_hostile_extra.py`` about files and folders changed while a run writes:
a disk filled mid-run (then resumed), checkpoints/ made read-only, ``TMPDIR`` watched or tiny,
the cache on a full disk, and folders with spaces and unicode. Moments as in
``extra_scenarios``; the mounts are tmpfs or bind mounts inside the scenario's folder, each
unmounted by its clean-up (as root, as the trial ran).
"""

from __future__ import annotations

from extra_scenarios import RUN_FILES, Scenario, Step

#: a 12 MB tmpfs at $W/t (the trial's full disk), and its filling by dd
TMPFS = "mkdir -p t && mount -t tmpfs -o size=12m tmpfs t"
FILL = "sh:dd if=/dev/zero of=t/fill bs=64k >/dev/null 2>&1; ls t/run/checkpoints > filled.ls"
#: checkpoints/ bind-mounted onto itself, then read-only (retried while a write holds it)
RO_CKPT = (
    "sh:mount --bind run/checkpoints run/checkpoints && for i in $(seq 100); do "
    "mount -o remount,ro,bind run/checkpoints && break; sleep .01; done"
)

SCENARIOS = {
    s.id: s
    for s in (
        Scenario(
            "UP03",
            "UP03, UP03b",
            "stick_breaking on a 12 MB tmpfs filled once the final checkpoint exists (debug=fast "
            "prints no progress lines, and writes its only checkpoint when training ends); "
            "resume=true after "
            "the filler is removed; against an undisturbed run",
            [
                Step("tmpfs", TMPFS, shell=True),
                Step(
                    "UP03",
                    "train.py debug=fast pe=stick_breaking eval.lengths=[8,16,32] "
                    "hydra.run.dir=$W/t/run",
                    on=("file:t/run/checkpoints/last.ckpt", FILL),
                    files=("t/run/checkpoints/last.ckpt", "t/run/results.json"),
                ),
                Step("free", "rm -f t/fill", shell=True),
                Step(
                    "UP03b",
                    "train.py debug=fast pe=stick_breaking eval.lengths=[8,16,32] resume=true "
                    "hydra.run.dir=$W/t/run",
                    files=("t/run/results.json", "t/run/accuracy_by_position.png"),
                ),
                Step(
                    "UP03-ref",
                    "train.py debug=fast pe=stick_breaking eval.lengths=[8,16,32] "
                    "hydra.run.dir=$W/ref",
                ),
            ],
            compare=[("ref", "t/run")],
            cleanup=["umount t 2>/dev/null || true"],
        ),
        Scenario(
            "D10",
            "D10",
            "$REF: checkpoints/ remounted read-only after the first checkpoint",
            [
                Step(
                    "D10",
                    "train.py $REF_LINES hydra.run.dir=$W/run",
                    on=(r"step 6/30", RO_CKPT),
                    files=RUN_FILES,
                ),
            ],
            cleanup=["umount run/checkpoints 2>/dev/null || true"],
        ),
        Scenario(
            "TMP1",
            "TMP1",
            "TMPDIR watched (an empty folder) while a run checkpoints every step",
            [
                Step("tmpdir", "mkdir tmpw", shell=True),
                Step(
                    "TMP1",
                    "train.py debug=fast eval.lengths=[8] trainer.max_steps=30 "
                    "trainer.checkpoint_every_n_steps=1 hydra.run.dir=$W/run",
                    env={"TMPDIR": "$W/tmpw"},
                    files=("run/results.json",),
                ),
                Step("TMPDIR-empty", 'test -z "$(ls -A tmpw)"', shell=True),
            ],
        ),
        Scenario(
            "TMP2",
            "TMP2",
            "SIGKILL while checkpoints/.last.ckpt.tmp exists beside a last.ckpt (TMPDIR watched), "
            "then resume=true",
            [
                Step("tmpdir", "mkdir tmpw", shell=True),
                Step(
                    "TMP2-kill",
                    "train.py $REF trainer.checkpoint_every_n_steps=2 hydra.run.dir=$W/run",
                    env={"TMPDIR": "$W/tmpw"},
                    # a later write than the first: a checkpoint is there to resume from
                    on=("file:run/checkpoints/last.ckpt&run/checkpoints/.last.ckpt.tmp", "KILL"),
                    files=("run/checkpoints/.last.ckpt.tmp", "run/checkpoints/last.ckpt"),
                ),
                Step(
                    "TMP2",
                    "train.py $REF trainer.checkpoint_every_n_steps=2 resume=true hydra.run.dir=$W/run",
                    env={"TMPDIR": "$W/tmpw"},
                    files=("run/checkpoints/.last.ckpt.tmp", "run/results.json"),
                ),
                Step("TMPDIR-empty", 'test -z "$(ls -A tmpw)"', shell=True),
            ],
        ),
        Scenario(
            "DF04",
            "DF04",
            "TMPDIR on a 2 MB tmpfs, the run folder on the big disk",
            [
                Step("tmpfs", "mkdir -p tmpw && mount -t tmpfs -o size=2m tmpfs tmpw", shell=True),
                Step(
                    "DF04",
                    "train.py $REF hydra.run.dir=$W/run",
                    env={"TMPDIR": "$W/tmpw"},
                    files=("run/results.json",),
                ),
            ],
            cleanup=["umount tmpw 2>/dev/null || true"],
        ),
        Scenario(
            "UP04",
            "UP04",
            "LENGEN_CACHE_DIR on a full 1 MB tmpfs (calibration, font cache)",
            [
                Step(
                    "tmpfs",
                    "mkdir -p c && mount -t tmpfs -o size=1m tmpfs c && "
                    "(dd if=/dev/zero of=c/fill bs=64k >/dev/null 2>&1 || true)",
                    shell=True,
                ),
                Step(
                    "UP04",
                    "train.py debug=fast pe=fox eval.lengths=[8] hydra.run.dir=$W/run",
                    env={"LENGEN_CACHE_DIR": "$W/c"},
                    files=("run/results.json",),
                ),
            ],
            cleanup=["umount c 2>/dev/null || true"],
        ),
        Scenario(
            "DF02",
            "DF02",
            "the disk filled near the last step, before the only checkpoint, and kept full",
            [
                Step("tmpfs", TMPFS, shell=True),
                Step(
                    "DF02",
                    "train.py trainer.max_steps=60 trainer.checkpoint_every_n_steps=null "
                    "trainer.val_check_interval=60 model.d_model=32 model.d_ff=64 data.batch_size=16 "
                    "eval.lengths=[8,16] eval.samples=64 trainer.enable_progress_bar=lines "
                    "hydra.run.dir=$W/t/run",
                    on=(r"\] step 5[4-8]/60", FILL),
                    files=(
                        "t/run/checkpoints/last.ckpt",
                        "t/run/failed.json",
                        "t/run/results.json",
                    ),
                ),
            ],
            cleanup=["umount t 2>/dev/null || true"],
        ),
        Scenario(
            "DF03",
            "DF03b",
            "DF03's stand-in (debug=fast, no periodic checkpoint) on a tmpfs filled once the "
            "final checkpoint exists, then resume=true once the filler is removed",
            [
                Step("tmpfs", TMPFS, shell=True),
                Step(
                    "DF03",
                    "train.py debug=fast eval.lengths=[8,16] trainer.checkpoint_every_n_steps=null "
                    "hydra.run.dir=$W/t/run",
                    on=("file:t/run/checkpoints/last.ckpt", FILL),
                    files=("t/run/checkpoints/last.ckpt", "t/run/results.json"),
                ),
                Step("free", "rm -f t/fill", shell=True),
                Step(
                    "DF03b",
                    "train.py debug=fast eval.lengths=[8,16] trainer.checkpoint_every_n_steps=null "
                    "resume=true hydra.run.dir=$W/t/run",
                    files=("t/run/results.json",),
                ),
            ],
            cleanup=["umount t 2>/dev/null || true"],
        ),
        Scenario(
            "U01b",
            "U01b, U01c",
            "hydra.run.dir with spaces and unicode, Hydra-quoted; then the same again",
            [
                Step(
                    "U01b",
                    "train.py debug=fast eval.lengths=[8] \"hydra.run.dir='$W/my run ü 😀'\"",
                ),
                Step(
                    "U01c",
                    "train.py debug=fast eval.lengths=[8] \"hydra.run.dir='$W/my run ü 😀'\"",
                ),
            ],
        ),
        Scenario(
            "UP01",
            "UP01, UP01b, UP01c, UP01d",
            "pe=fox into a quoted unicode folder with spaces; eval.py, plot.py attention and "
            "aggregate.py on it",
            [
                Step(
                    "UP01",
                    "train.py debug=fast eval.lengths=[8,16] pe=fox "
                    "\"hydra.run.dir='$W/sw dir ü 😀/run ✓'\"",
                ),
                Step("UP01b", "eval.py 'run=$W/sw dir ü 😀/run ✓' eval.lengths=[8,32] tag=u"),
                Step("UP01c", "scripts/plot.py attention '$W/sw dir ü 😀/run ✓' --length 8"),
                Step("UP01d", "scripts/aggregate.py '$W/sw dir ü 😀'"),
            ],
        ),
    )
}

"""What the hostile trial's cases need beyond their table command (scripts/trials/rerun_hostile.py).

The table gives a command per case; some cases also need an environment (faked SLURM or
torchrun variables), a fixture (a finished run, a damaged copy of one, a small text file), a
signal at a moment, a full disk or a memory limit. ``FIXTURES`` are bash scripts run once in
``<tmp>/adv/fx`` ($P: the interpreter, $REPO: the checkout, $FX: the fixture folder);
``SETUPS`` says per case ID what it needs, or why it cannot be re-run here (``skip``).
Where the trial used a 6 GB memory cgroup, this uses an address-space limit (``limit_as_gb``,
as its own case PA15b did): enough to keep a size case from taking the shared machine's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: a finished debug=fast run's command, ending in its run directory
FAST_RUN = "$P $REPO/train.py debug=fast 'eval.lengths=[8]' trainer.enable_progress_bar=false"
#: the trial's $REF run, interrupted by SIGTERM once its first checkpoint exists
INTERRUPTED = """
$P $REPO/train.py $REF hydra.run.dir=$FX/interrupted > interrupted.out 2>&1 &
pid=$!
until [ -f $FX/interrupted/checkpoints/last.ckpt ] || ! kill -0 $pid 2>/dev/null; do sleep .1; done
kill -TERM $pid; wait $pid || true
test -f $FX/interrupted/checkpoints/last.ckpt && test ! -f $FX/interrupted/results.json
"""
#: results.json damaged in place, by a Python one-liner's argument: the JSON path's first key
#: named ``key`` (anywhere in the tree) set to ``value``
DAMAGE = """$P - "$1" "$2" "$3" <<'EOF'
import json, sys
path, key, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
data = json.load(open(path))
def walk(node):
    if isinstance(node, dict):
        if key in node:
            node[key] = value
            return True
        return any(walk(v) for v in node.values())
    if isinstance(node, list):
        return any(walk(v) for v in node)
    return False
assert walk(data), key
json.dump(data, open(path, "w"))
EOF
"""

FIXTURES = {
    "small": "cat $REPO/README.md $REPO/docs/*.md | head -c 200000 > small.txt",
    "td": 'mkdir -p td && $P -c "print(chr(10) * 4999)" > td/newlines.txt && mkfifo td/fifo.txt',
    "fin": f"{FAST_RUN} hydra.run.dir=$FX/fin > fin.out 2>&1 && test -f fin/results.json",
    "e13b": f"{FAST_RUN} hydra.run.dir=$FX/e13b > e13b.out 2>&1 && test -f e13b/results.json",
    "fox_nan": f"""{FAST_RUN} pe=fox hydra.run.dir=$FX/fox_nan > fox_nan.out 2>&1
$P - <<'EOF'
import torch
path = "fox_nan/checkpoints/last.ckpt"
ckpt = torch.load(path, map_location="cpu", weights_only=False)
for k, v in ckpt["state_dict"].items():
    if v.is_floating_point():
        v.fill_(float("nan"))
torch.save(ckpt, path)
EOF
""",
    "nsweep": "$P $REPO/train.py -m debug=fast 'eval.lengths=[8]' pe=fox,path,stick_breaking,rnope "
    "trainer.enable_progress_bar=false hydra.sweep.dir=$FX/nsweep > nsweep.out 2>&1",
    # the trial's damaged copy: results.json truncated (fox), config.yaml truncated (path),
    # diagnostics a string (stick_breaking), exact_match=inf and accuracy=-5.0 (rnope)
    "nsw_bad": f"""damage() {{ {DAMAGE} }}
test -f .built-nsweep && cp -a nsweep nsw_bad
r=$(ls -d nsw_bad/*_fox_*); head -c 40 $r/results.json > $r/r && mv $r/r $r/results.json
r=$(ls -d nsw_bad/*_path_*); head -c 40 $r/config.yaml > $r/c && mv $r/c $r/config.yaml
r=$(ls -d nsw_bad/*_stick_breaking_*); damage $r/results.json attention_diagnostics '"damaged"'
r=$(ls -d nsw_bad/*_rnope_*); damage $r/results.json exact_match Infinity; damage $r/results.json accuracy -5.0
""",
    "sweep_sw8": "$P $REPO/train.py -m pe=rope,alibi seed=0,1 debug=fast 'eval.lengths=[8,16]' "
    "trainer.enable_progress_bar=false hydra.sweep.dir=$FX/sweep_sw8 > sw8.out 2>&1\n"
    "r=$(ls -d sweep_sw8/*alibi*seed1*); echo '{broken' > $r/results.json",
    "e13c": "test -f .built-fin && cp -a fin e13c && touch e13c/.results.x.reserved",
    "afile": "echo 'a file' > afile",
    # read-only folders: each bind-mounted onto itself, then remounted read-only (as root; the
    # trial's `mount -o remount,ro,bind`); `umount` them when done (the harness does not)
    "ro": """mkdir -p romnt/cache romnt/.cache rodir rosweep
test -f .built-nsweep && test -f .built-fin
cp -a nsweep sweep_ro && cp -a $(ls -d nsweep/*_fox_*) ro_fox && cp -a fin ro_run
for d in romnt rodir rosweep sweep_ro ro_fox ro_run; do mount --bind $d $d && mount -o remount,ro,bind $d; done
""",
    "interrupted": INTERRUPTED,
    "rs06": "test -f .built-interrupted && cp -a interrupted rs06 && rm rs06/config.yaml",
    "rs09": "test -f .built-interrupted && cp -a interrupted rs09 && : > rs09/config.yaml",
    "sl08": "test -f .built-interrupted && cp -a interrupted sl08 && printf '\\xff\\xfe\\x00bad' > sl08/.slurm_job",
    # the trial's other copies of a finished (fin) and an interrupted ($REF) run, made as its
    # cases describe them (2026-12-02 re-run)
    "fin1": "test -f .built-fin && cp -a fin fin1",
    "d04": "test -f .built-fin && cp -a fin d04",
    "rs12": "test -f .built-fin && cp -a fin rs12 && echo '{broken' > rs12/results.json",
    "rs13": "test -f .built-fin && cp -a fin rs13 && rm rs13/results.json && mkdir rs13/results.json",
    "sr01": "test -f .built-fin && cp -a fin sr01 && printf '{\\n  garbage\\n' > sr01/results.json",
    "sweep": "test -f .built-fin && mkdir -p sweep && cp -a fin sweep/fin",
    "alibi_fin": f"{FAST_RUN} pe=alibi hydra.run.dir=$FX/alibi_fin > alibi_fin.out 2>&1",
    "swapped": "test -f .built-fin && test -f .built-alibi_fin && cp -a fin swapped && "
    "cp alibi_fin/checkpoints/last.ckpt swapped/checkpoints/last.ckpt",
    "int": "test -f .built-interrupted && cp -a interrupted int",
    "rs01": "test -f .built-interrupted && cp -a interrupted rs01 && "
    "sed -i 's/^  d_model: 32$/  d_model: 16/' rs01/config.yaml && grep -q 'd_model: 16' rs01/config.yaml",
    "rs03": "test -f .built-interrupted && cp -a interrupted rs03 && "
    "head -c 100 rs03/checkpoints/last.ckpt > c && mv c rs03/checkpoints/last.ckpt",
    "rs08": "test -f .built-interrupted && cp -a interrupted rs08 && echo 'bad: [unclosed' >> rs08/config.yaml",
    "rs10": "test -f .built-interrupted && cp -a interrupted rs10 && rm rs10/checkpoints/last.ckpt && "
    "mkdir rs10/checkpoints/last.ckpt",
    "rs11": "test -f .built-interrupted && cp -a interrupted rs11",
    "sl07": "test -f .built-interrupted && cp -a interrupted sl07",
    # the text cases' files (X01-X07, T05): one character, a 30 MB single line, JSON lines, a
    # folder, an empty file, NUL bytes; a corpus for the BPE cache cases (CC1, CC2)
    "td2": """mkdir -p td/adir && printf a > td/onechar.txt && : > td/empty.txt
head -c 30000000 /dev/zero | tr '\\0' a > td/huge1line.txt
printf 'abc\\0\\0\\0def\\n%.0s' $(seq 200) > td/binary.txt
for i in $(seq 300); do echo '{"text": "line '$i' of a small json lines corpus"}'; done > td/s.jsonl
cat $REPO/README.md $REPO/docs/*.md | head -c 300000 > td/corpus.txt
""",
    # the trial's sweep of rnope_swa, pope and dape (its names' hashes differ here: the cases
    # find their run with ls), and copies of nsweep's fox and path runs damaged as AN20, AN21,
    # CK03 and G13 say
    "nsweep2": "$P $REPO/train.py -m debug=fast 'eval.lengths=[8]' pe=rnope_swa,pope,dape "
    "trainer.enable_progress_bar=false hydra.sweep.dir=$FX/nsweep2 > nsweep2.out 2>&1",
    "fox_trunc": "test -f .built-nsweep && cp -a $(ls -d nsweep/*_fox_*) fox_trunc && "
    "f=fox_trunc/checkpoints/last.ckpt && head -c $(( $(stat -c %s $f) / 2 )) $f > x && mv x $f",
    "path_cfg": "test -f .built-nsweep && cp -a $(ls -d nsweep/*_path_*) path_cfg && "
    "head -c 40 path_cfg/config.yaml > x && printf ':\\n  - [' >> x && mv x path_cfg/config.yaml",
    "fox_swap": "test -f .built-nsweep && cp -a $(ls -d nsweep/*_fox_*) fox_swap && "
    "cp $(ls -d nsweep/*_path_*)/checkpoints/last.ckpt fox_swap/checkpoints/last.ckpt",
    "fox_nocfg": "test -f .built-nsweep && cp -a $(ls -d nsweep/*_fox_*) fox_nocfg && rm fox_nocfg/config.yaml",
    # nsweep with one NaN exact_match (the metric aggregated) in an eval row (AG05, PL05); DAMAGE's first "accuracy" is
    # accuracy_by_answer_position's list, so the row is set by its path (the first pass's
    # damage of that list is PL05b in docs/trials/rerun-2026-12-02.md)
    "sweep_nan": """test -f .built-nsweep && cp -a nsweep sweep_nan && $P - $(ls -d sweep_nan/*_fox_*)/results.json <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
data["eval"][0]["exact_match"] = float("nan")
json.dump(data, open(sys.argv[1], "w"))
EOF
""",
    # a BPE cache built by one run, then damaged as CC1 and CC2 say
    "cache": "$P $REPO/train.py debug=fast data=text data.files.train=$FX/td/corpus.txt "
    "data.tokenizer=bpe data.vocab_size=300 data.len=16 'eval.lengths=[16]' data.cache_dir=$FX/cache "
    "trainer.enable_progress_bar=false hydra.run.dir=$FX/cache_run > cache.out 2>&1 && ls cache/corpora/*/train.npy",
    "cc1": "test -f .built-cache && cp -a cache cc1 && f=$(ls cc1/corpora/*/train.npy) && "
    "head -c 100 $f > x && mv x $f",
    "cc2": "test -f .built-cache && cp -a cache cc2 && rm -rf cc2/corpora && f=$(ls cc2/tokenizers/*.json) && "
    "head -c $(( $(stat -c %s $f) / 2 )) $f > x && mv x $f",
}


@dataclass
class Setup:
    """What one case needs (every field optional)."""

    env: dict[str, str] = field(default_factory=dict)
    fixtures: tuple[str, ...] = ()
    prep: str = ""  # bash, in the case's folder, before the watched files are hashed
    after: str = ""  # bash, after the files left are hashed (unmount, remove a filler)
    command: str = ""  # replaces a command the table cuts short
    argv: tuple[str, ...] = ()  # the exact words, where shell splitting would change them
    shell: bool = False  # the command is a shell line (redirections)
    signal: tuple[str, dict] | None = None  # (name, {"after": s} | {"file": glob, "delay": s})
    limit: int = 0  # seconds, when not the default
    limit_as_gb: float = 0.0  # address-space limit (stands for the trial's memory cgroup)
    skip: str = ""  # why the case cannot be re-run here


#: the read-only folders and what they copy
RO = ("nsweep", "fin", "ro")
#: the start of a case's argv: train.py with the trial's $FAST options
FAST_WORDS = ("$P", "$REPO/train.py", "debug=fast", "eval.lengths=[8,16]")


def _sized(limit_as_gb: float = 8.0) -> Setup:
    return Setup(limit=150, limit_as_gb=limit_as_gb)


#: a tmpfs of 12 MB at $W/t, filled once the run's final checkpoint exists (finding 4)
FULL_DISK = """mkdir -p t && mount -t tmpfs -o size=12m tmpfs t
timeout 600 bash -c 'until [ -f t/run/checkpoints/last.ckpt ]; do sleep .005; done; sleep .3
dd if=/dev/zero of=t/fill bs=64k >/dev/null 2>&1' > /dev/null 2>&1 &
echo $! > filler.pid
"""
#: the filler ended, the full disk's contents kept beside it (t.kept), the tmpfs unmounted
UNMOUNT = (
    "kill $(cat filler.pid) 2>/dev/null || true; rm -f t/fill; cp -a t t.kept || true; umount t"
)

SETUPS = {
    "SL06b": Setup(
        env={
            "WORLD_SIZE": "2",
            "RANK": "0",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29598",
        },
        signal=("SIGTERM", {"after": 30}),
        limit=75,
    ),  # fmt: skip
    # a job's variables without srun's per-task ones (the case's KeyError('SLURM_NODEID'))
    "SL06": Setup(env={"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2"}),
    "O04": _sized(),
    "O06": _sized(),
    "O07": _sized(),
    "O08": _sized(),
    "O09": _sized(),
    "O14": _sized(),
    "TK24": _sized(),
    "PA15": _sized(6.0),
    "PA15b": _sized(12.0),
    "T02": Setup(fixtures=("small",)),
    "T09": Setup(fixtures=("small",)),
    "X03": Setup(fixtures=("td",)),
    "X05": Setup(fixtures=("td",)),
    "E13b": Setup(fixtures=("e13b",), limit_as_gb=1.2),
    # the stale reservation a crashed eval.py left (E13b crashes no more here, so it is made)
    "E13c": Setup(
        fixtures=("fin", "e13c"), command="eval.py run=<tmp>/adv/fx/e13c eval.lengths=[8] tag=x"
    ),
    "ES02": Setup(shell=True),
    "ES02b": Setup(shell=True),
    "ES02c": Setup(shell=True),
    "SN14": Setup(prep="mkdir -p sw && touch sw/.jobs"),
    "DF03": Setup(
        prep=FULL_DISK,
        after=UNMOUNT,
        limit=300,
        command="train.py debug=fast eval.lengths=[8,16] trainer.checkpoint_every_n_steps=null "
        "hydra.run.dir=<tmp>/adv/w/DF03/t/run",
    ),
    "UP03": Setup(
        prep=FULL_DISK,
        after=UNMOUNT,
        limit=300,
        command="train.py debug=fast pe=stick_breaking eval.lengths=[8,16,32] "
        "hydra.run.dir=<tmp>/adv/w/UP03/t/run",
    ),
    "SL08": Setup(
        fixtures=("interrupted", "sl08"), env={"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1"}
    ),  # fmt: skip
    "RS06": Setup(fixtures=("interrupted", "rs06"), limit=300),
    "RS09": Setup(fixtures=("interrupted", "rs09")),
    "S08c": Setup(
        prep="$P $REPO/train.py $REF hydra.run.dir=$W/../S08/run > s08.out 2>&1 & pid=$!\n"
        "until [ -f $W/../S08/run/config.yaml ]; do sleep .05; done; sleep 1; kill -INT $pid\n"
        "wait $pid || true; rm -rf $W/../S08/run/checkpoints; test -f $W/../S08/run/failed.json",
        limit=300,
    ),
    "SW8": Setup(fixtures=("sweep_sw8",), limit=300),
    "AN03": Setup(fixtures=("nsweep", "nsw_bad")),
    "AN04": Setup(fixtures=("nsweep", "nsw_bad")),
    "CK01": Setup(fixtures=("fox_nan",)),
    "CK01b": Setup(fixtures=("fox_nan",)),
    "G11": Setup(
        fixtures=("nsweep",),
        shell=True,
        limit_as_gb=6.0,
        command="$P $REPO/scripts/plot.py attention $(ls -d $FX/nsweep/*_stick_breaking_*) "
        "--length 100000 --out $W/out",
    ),
    "G12": Setup(
        fixtures=("nsweep",),
        shell=True,
        command="$P $REPO/scripts/plot.py attention $(ls -d $FX/nsweep/*_path_*) --length 16 "
        "--samples 100000 --out $W/out",
    ),
    "R11": Setup(argv=("$P", "$REPO/train.py", "model.attention=" + "a" * 100000)),
    "P52d": Setup(
        argv=(
            *FAST_WORDS,
            "pe=irope",
            "pe.layers=[{pe: fox, chunk: 8}, nope]",
        ),
    ),  # fmt: skip
    "SW2": Setup(
        command="train.py -m pe=rope,alibi $REF hydra.sweep.dir=<tmp>/adv/w/SW2/sw",
        signal=("SIGTERM", {"file": "adv/w/SW2/sw/*alibi*/checkpoints/last.ckpt"}),
        limit=300,
    ),
    "SN21": Setup(
        command="train.py -m eval.lengths=[8] pe=fox,path trainer.max_steps=400 "
        "trainer.checkpoint_every_n_steps=20 trainer.val_check_interval=100 model.d_model=64 "
        "model.d_ff=128 hydra/launcher=local hydra.launcher.n_jobs=2 "
        "hydra.sweep.dir=<tmp>/adv/w/SN21/sw",
        signal=("SIGTERM", {"after": 30}),
        limit=150,
    ),  # fmt: skip
    "SN21b": Setup(
        command="train.py -m eval.lengths=[8] pe=fox,path trainer.max_steps=400 "
        "trainer.checkpoint_every_n_steps=20 trainer.val_check_interval=100 model.d_model=64 "
        "model.d_ff=128 hydra/launcher=local hydra.launcher.n_jobs=2 "
        "hydra.sweep.dir=<tmp>/adv/w/SN21b/sw",
        signal=("SIGTERM", {"after": 30}),
        limit=300,
    ),  # fmt: skip
    # a user's folder that no lengen run wrote, holding files with a run's names
    "D11": Setup(
        prep="mkdir -p userdir/logs && echo 'my: notes' > userdir/config.yaml && "
        "echo mine > userdir/train.log && echo a,b > userdir/logs/metrics.csv && "
        "echo '{}' > userdir/data_card.json"
    ),
    "AG01": Setup(prep="mkdir -p empty"),
    "H02": Setup(fixtures=("afile",), env={"LENGEN_CACHE_DIR": "<tmp>/adv/fx/afile"}),
    "H03": Setup(fixtures=("afile", "small"), env={"LENGEN_CACHE_DIR": "<tmp>/adv/fx/afile"}),
    "H05": Setup(fixtures=RO, env={"LENGEN_CACHE_DIR": "<tmp>/adv/fx/romnt/cache"}),
    "H01": Setup(fixtures=RO, env={"HOME": "<tmp>/adv/fx/romnt"}),
    **{i: Setup(fixtures=("afile",)) for i in ("D01", "Q04", "E15", "AG08", "DC08", "AN11")},
    **{i: Setup(fixtures=(*RO, "small")) for i in ("H04", "D08", "AG12", "PL07", "E09", "D09")},
    **{i: Setup(fixtures=RO) for i in ("SN15", "G14", "UP02", "UP02b", "UP02c")},
    # --config-dir relative to the checkout, where the trial ran it; a case runs elsewhere
    "B02": Setup(argv=("$P", "$REPO/train.py", "data.len=-3", "--config-dir=$REPO/configs")),
    "B03": Setup(argv=("$P", "$REPO/train.py", "pe=ropee", "-cd", "$REPO/configs")),
    # a value with spaces, one argument (the record's shell words split it)
    "P39": Setup(argv=(*FAST_WORDS, "pe=rnope", "pe.layers=[{pe: rope, bogus: 1}]")),
    # run from the checkout in the trial: configs/ is the checkout's (the clone's, here)
    "SN26": Setup(
        argv=(
            "$P",
            "$REPO/train.py",
            "-m",
            "debug=fast",
            "seed=0,1",
            "hydra.sweep.dir=$REPO/configs/pe/sw",
        ),
    ),  # fmt: skip
    "DC07": Setup(
        argv=("$P", "$REPO/scripts/device_check.py", "--only", "")
    ),  # '' lost in the record
    "P37": Setup(argv=(*FAST_WORDS, "pe=rnope", "pe.layers=[{pe: rope, randomized: true}]")),
    "P38": Setup(argv=(*FAST_WORDS, "pe=rnope", "pe.layers=[{pe: rope, window: 4, chunk: 4}]")),
    "P41": Setup(argv=(*FAST_WORDS, "pe=rnope", "pe.layers=[{window: 4}]")),
    "ES10": Setup(
        env={"LENGEN_CACHE_DIR": "<tmp>/adv/w/ES10/cache"}, prep="mkdir -p cache/timings.json"
    ),
    "SN14b": Setup(
        prep="mkdir -p sw/.jobs && echo garbage > sw/.jobs/sweep.json && printf '\\xff' > sw/.jobs/0.json"
    ),
    "O15": Setup(limit=150),
    "O16": Setup(limit=150),
    "O15b": Setup(limit=150),
    "ES06": Setup(limit=120),
    # the calibration file damaged: NaN start-up and inf step times (ES09), 1e300 s (ES09b)
    # the calibration cut short (50 bytes of this machine's), in the case's own cache folder
    "ES08": Setup(
        fixtures=("fin",),
        env={"LENGEN_CACHE_DIR": "<tmp>/adv/w/ES08/cache"},
        prep="mkdir -p cache && head -c 50 $HOME/.cache/lengen/timings.json > cache/timings.json",
    ),
    "ES09": Setup(
        fixtures=("fin",),
        env={"LENGEN_CACHE_DIR": "<tmp>/adv/w/ES09/cache"},
        prep="mkdir -p cache && $P $REPO/scripts/trials/damage_timings.py "
        "$HOME/.cache/lengen/timings.json cache/timings.json nan-inf",
    ),
    **{i: Setup(fixtures=("fin", "fin1")) for i in ("D02", "D03", "D05", "D06", "D07")},
    **{i: Setup(fixtures=("fin", "fin1")) for i in ("E04", "E11", "E12", "E18", "PA01")},
    "B04": Setup(
        fixtures=("fin", "fin1"),
        argv=(
            "$P",
            "$REPO/train.py",
            "debug=fast",
            "hydra.run.dir=<tmp>/adv/fx/fin1",
            "-cd",
            "$REPO/configs",
        ),
    ),  # fmt: skip
    "D04": Setup(fixtures=("fin", "d04")),
    "RS12": Setup(fixtures=("fin", "rs12")),
    "RS13": Setup(fixtures=("fin", "rs13")),
    "SR01": Setup(fixtures=("fin", "sr01")),
    "AG09": Setup(fixtures=("fin", "sweep")),
    "E08": Setup(fixtures=("fin", "alibi_fin", "swapped")),
    "PA04": Setup(fixtures=("fin", "alibi_fin", "swapped")),
    "E03": Setup(fixtures=("interrupted", "int")),
    **{
        i: Setup(fixtures=("interrupted", i.lower()))
        for i in ("RS01", "RS03", "RS08", "RS10", "RS11")
    },
    "PA02": Setup(fixtures=("interrupted", "rs03")),
    "SL07": Setup(
        fixtures=("interrupted", "sl07"), env={"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1"}
    ),
    **{
        i: Setup(fixtures=("small", "td2"))
        for i in ("X04", "X06", "T05", "T01", "T06", "X01", "X02", "X07")
    },
    **{
        i: Setup(
            fixtures=("td2", "cache", i.lower()),
            command="train.py debug=fast data=text data.files.train=<tmp>/adv/fx/td/corpus.txt "
            f"data.tokenizer=bpe data.vocab_size=300 data.len=16 eval.lengths=[16] "
            f"data.cache_dir=<tmp>/adv/fx/{i.lower()} hydra.run.dir=<tmp>/adv/w/{i}/run",
            limit=300,
        )
        for i in ("CC1", "CC2")
    },
    **{
        i: Setup(fixtures=("nsweep2",), shell=True, command=f"$P $REPO/{c}")
        for i, c in (
            ("AN14b", "scripts/show_results.py $(ls -d $FX/nsweep2/*_rnope_swa_*)"),
            (
                "AN17",
                "eval.py run=$(ls -d $FX/nsweep2/*_rnope_swa_*) pe.layers=[nope] eval.lengths=[8] tag=lay",
            ),
            (
                "AN18",
                "eval.py run=$(ls -d $FX/nsweep2/*_pope_*) pe.ssmax=true eval.lengths=[8] tag=ssm",
            ),
            (
                "AN19",
                "eval.py run=$(ls -d $FX/nsweep2/*_pope_*) eval.decoding=greedy eval.lengths=[8,64] tag=greedy",
            ),
            (
                "AN19b",
                "eval.py run=$(ls -d $FX/nsweep2/*_dape_*) pe.window=2 eval.lengths=[8,32] tag=w2",
            ),
            (
                "G10d",
                "scripts/plot.py attention $(ls -d $FX/nsweep2/*_rnope_swa_*) --length 16 --out $W/out",
            ),
            (
                "G10e",
                "scripts/plot.py attention $(ls -d $FX/nsweep2/*_dape_*) --length 16 --out $W/out",
            ),
            (
                "G10f",
                "scripts/plot.py attention $(ls -d $FX/nsweep2/*_pope_*) --length 16 --out $W/out",
            ),
        )
    },  # fmt: skip
    "AN09": Setup(fixtures=("nsweep",)),
    "AN20": Setup(fixtures=("nsweep", "fox_trunc")),
    "AN21": Setup(fixtures=("nsweep", "path_cfg")),
    "CK03": Setup(fixtures=("nsweep", "fox_swap")),
    "CK03b": Setup(fixtures=("nsweep", "fox_swap")),
    "G13": Setup(fixtures=("nsweep", "fox_nocfg")),
    "AG05": Setup(fixtures=("nsweep", "sweep_nan")),
    "PL05": Setup(fixtures=("nsweep", "sweep_nan")),
    # start.sh as nobody stops at its root check; with a PATH holding only the few tools it
    # runs before (no SLURM, no apt-get) it stops at its install check, before touching anything
    "SL01": Setup(shell=True, command="runuser -u nobody -- bash $REPO/scripts/slurm/start.sh"),
    "SL02": Setup(
        shell=True,
        prep="mkdir fakebin && for t in id grep hostname sed head cat; do ln -s $(command -v $t) fakebin/; done",
        command="PATH=$W/fakebin /bin/bash $REPO/scripts/slurm/start.sh",
    ),
    "SL03": Setup(
        skip="stop.sh would stop the one-node SLURM another session runs on this machine (its "
        "/etc/slurm/slurm.conf carries start.sh's mark now, which the trial's did not)"
    ),
    # the record cuts R12's 300-character name short; U02's newline is lost in the record
    "R12": Setup(
        argv=("$P", "$REPO/train.py", "debug=fast", "hydra.run.dir=<tmp>/adv/w/R12/" + "d" * 300)
    ),
    "U02": Setup(
        argv=(
            "$P",
            "$REPO/train.py",
            "debug=fast",
            "eval.lengths=[8]",
            "hydra.run.dir=<tmp>/adv/w/U02/a\nb",
        )
    ),
    "ES09b": Setup(
        fixtures=("fin",),
        env={"LENGEN_CACHE_DIR": "<tmp>/adv/w/ES09b/cache"},
        prep="mkdir -p cache && $P $REPO/scripts/trials/damage_timings.py "
        "$HOME/.cache/lengen/timings.json cache/timings.json huge",
    ),
}

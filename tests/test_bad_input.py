"""The table of bad command lines: each stops in seconds, before training, with exit status 2 and
one line naming the key and what is allowed, no traceback, and nothing written.

Every case runs train.py as ``python train.py`` does, then each is checked on its own: most
in one fresh interpreter for many (``one_interpreter``: a refusal's checks take a fraction of the
interpreter's start and imports), those of ``OWN_PROCESS`` each in a process of its own, as a
user runs it. The same refusals in-process, each through the ``lengen.preflight`` entry that
owns it: tests/test_preflight.py."""

from __future__ import annotations

import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import run_train, yaml_choices
from one_interpreter import Outcome, run_together

# (command-line arguments, text the first line of stderr must hold: the key, and the allowed)
CASES = [
    ("pe=ropee", f"pe=ropee: unknown choice; allowed: {', '.join(yaml_choices('pe'))}"),
    ("-m pe=rope,alibii", "pe=alibii: unknown choice; allowed: abacus, alibi"),
    ("model=gpt", "model=gpt: unknown choice; allowed: decoder, encoder, encoder_decoder"),
    ("data=copyy", "data=copyy: unknown choice; allowed:"),
    ("data.len=0", "data.len must be a positive integer"),
    ("data.len=abc", "data.len must be a positive integer, got 'abc'"),
    ("trainer.max_steps=-1", "trainer.max_steps must be a positive integer"),
    ("optim.lr=0", "optim.lr must be a number in (0.0, inf)"),
    ("model.dropout=1.5", "model.dropout must be a number in [0.0, 1.0)"),
    ("model.n_heads=3", "model.d_model must be divisible by model.n_heads"),
    ("model.d_model=12 model.n_heads=4", "pe=rope needs an even head dimension"),
    ("model.attention=xformers", "model.attention must be one of auto, flex; got 'xformers'"),
    ("pe=alibi model.attention=flex", "model.attention=flex cannot train on cpu"),
    (
        "pe=alibi model.attention=flex model.dropout=0.1",
        "model.attention=flex takes no attention dropout",
    ),
    ("data.task.n_symbols=1", "data.task.n_symbols must be an integer >= 2"),
    ("eval.lengths=[0]", "eval.lengths must hold positive integers"),
    ("data=text data.num_workers=-1", "data.num_workers must be an integer >= 0, got -1"),
    ("data.len=5 eval.factors=[1.5]", "eval.factors: 1.5 × data.len 5 = 7.5 is not a whole"),
    ("eval.decoding=beam", "eval.decoding must be one of teacher_forced"),
    ("eval.plot_dpi=100000", "eval.plot_dpi must be in 1 … 1200, got 100000"),
    ("logger=wandb logger.mode=foo", "logger.mode must be one of offline, online, disabled"),
    ("foo=1", "foo: no such key; allowed at the top level: data, eval"),
    ("data.lenn=3", "data.lenn: no such key; allowed under data:"),
    ("~data.len", "data.len must be a positive integer, got None"),  # a deletion, no value
    ("+data.lenn=3", "data.lenn: TaskData takes no such key; allowed: len"),
    ("++data.lenn=3", "data.lenn: TaskData takes no such key; allowed: len"),
    # Hydra's own flags do not carry a command past the checks
    ("--config-dir=configs data.len=-3", "data.len must be a positive integer, got -3"),
    ("--config-name=train seed=-1", "seed must be an integer >= 0, got -1"),
    ("init_from=/no/such/path", "init_from=/no/such/path: no such run directory or checkpoint"),
    ("pe=xpos model=encoder", "pe: XPos is defined for causal attention only; allowed:"),
    # a sweep is refused whole, before any run, when one of its values cannot run
    ("-m pe=rope,xpos model=encoder", "pe: XPos is defined for causal attention only"),
    ("pe=learned pe.policy=error", "pe.policy=error: evaluation needs 257 positions"),
    ("pe.randomized=true", "pe.max_position must be an integer >= 257"),
    ("resume=maybe", "resume must be true, false or auto"),
    ("resume=true", "resume=true: no checkpoint at"),
    ("trainer.strategy=fsdp", "trainer.strategy must be one of auto, ddp"),
    ("trainer.checkpoint_every_n_steps=0", "trainer.checkpoint_every_n_steps must be a positive"),
    (
        "trainer=ddp data.batch_size=7",
        "data.batch_size=7 is the global batch and must be divisible",
    ),
]


#: the cases that also run in a process of their own: a group, a sweep, a deletion, a Hydra
#: flag, a launch (the rest share ``one_interpreter``'s)
OWN_PROCESS = ("pe=ropee", "-m pe=rope,alibii", "~data.len", "--config-dir=configs data.len=-3",
               "trainer=ddp data.batch_size=7")  # fmt: skip


def command_line(arguments: str, folder: str) -> list[str]:
    return [*arguments.split(), f"hydra.run.dir={folder}/run", f"hydra.sweep.dir={folder}/sweep"]


def train_alone(arguments: str, folder: str) -> subprocess.CompletedProcess:
    return run_train(*command_line(arguments, folder), timeout=120, one_thread=True)


def train_together(cases: list[tuple[str, str]]) -> list[Outcome]:
    """(arguments, folder) of each case, all in one interpreter."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    commands = [("train.py", command_line(arguments, folder)) for arguments, folder in cases]
    return run_together(commands, env=env)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[Outcome | subprocess.CompletedProcess, list]]:
    """arguments -> (how train.py ended, what it left in its folder)."""
    root = tmp_path_factory.mktemp("bad-input")
    folders = {case: tempfile.mkdtemp(dir=root) for case, _ in CASES}
    shared = [(case, folders[case]) for case, _ in CASES if case not in OWN_PROCESS]
    with ThreadPoolExecutor(max_workers=3) as pool:  # two interpreters of shared cases
        halves = [pool.submit(train_together, shared[half::2]) for half in (0, 1)]
        alone = {case: pool.submit(train_alone, case, folders[case]) for case in OWN_PROCESS}
        ended = {case: future.result() for case, future in alone.items()}
        for half, future in enumerate(halves):
            ended |= dict(zip([case for case, _ in shared[half::2]], future.result(), strict=True))
    return {
        case: (ended[case], sorted(path.name for path in Path(folders[case]).iterdir()))
        for case, _ in CASES
    }


def test_the_table_is_large_enough():
    assert len(CASES) >= 15 and len({case for case, _ in CASES}) == len(CASES)
    assert set(OWN_PROCESS) < {case for case, _ in CASES}


@pytest.mark.parametrize(("arguments", "expected"), CASES, ids=[case for case, _ in CASES])
def test_bad_input_is_one_line_naming_the_key(outcomes, arguments, expected):
    result, _ = outcomes[arguments]
    assert result.returncode == 2, result.stderr[-2000:]
    first_line = result.stderr.strip().splitlines()[0]
    assert first_line.startswith("error: "), result.stderr[-2000:]
    assert expected in first_line, first_line
    assert "Traceback" not in result.stderr
    assert "Set the environment variable HYDRA_FULL_ERROR" not in result.stderr


@pytest.mark.parametrize("arguments", [case for case, _ in CASES])
def test_a_refused_command_writes_nothing(outcomes, arguments):
    assert outcomes[arguments][1] == []  # neither the run directory nor the sweep's

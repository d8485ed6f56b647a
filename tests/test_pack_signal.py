"""A real SIGTERM mid-pack: the process saves every member's checkpoint and exits; resume=auto
then gives the rows of the uninterrupted pack."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import torch

from lengen.pack import train_pack
from test_pack import losses, rows, small

STEPS = (
    "trainer.max_steps=200",
    "trainer.val_check_interval=100",
    "trainer.enable_progress_bar=lines",
)

SCRIPT = """
import sys
from lengen.errors import Preempted
from lengen.process import install_preemption_handlers
install_preemption_handlers()  # as train.py does at process start
sys.path.insert(0, {tests!r})
from test_pack import small
from lengen.pack import train_pack
try:
    train_pack([small(*{steps!r}, f"seed={{s}}") for s in (0, 1)], {dirs!r})
except Preempted as error:
    print(f"preempted at step {{error.step}}", flush=True)
    sys.exit(128 + error.signum)
"""


def test_sigterm_mid_pack_then_resume_gives_the_uninterrupted_rows(tmp_path, single_thread):
    dirs = [str(tmp_path / "cut" / str(seed)) for seed in (0, 1)]
    script = SCRIPT.format(tests=str(Path(__file__).parent), steps=STEPS, dirs=dirs)
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen = []
    for line in process.stdout:  # the first progress line: training is under way
        seen.append(line)
        if line.startswith("[pack of 2"):
            process.send_signal(signal.SIGTERM)
            break
    output = "".join(seen) + process.communicate(timeout=300)[0]
    assert process.returncode == 128 + signal.SIGTERM, output[-2000:]
    step = int(output.split("preempted at step ")[1].split()[0])
    assert 0 < step < 200
    for directory in dirs:
        checkpoint = torch.load(Path(directory) / "checkpoints" / "last.ckpt", weights_only=False)
        assert checkpoint["global_step"] == step
        assert not (Path(directory) / "results.json").exists()
    resumed = train_pack([small(*STEPS, f"seed={s}", "resume=auto") for s in (0, 1)], dirs)
    whole = train_pack(
        [small(*STEPS, f"seed={s}") for s in (0, 1)], [tmp_path / "whole" / str(s) for s in (0, 1)]
    )
    for mine, theirs in zip(resumed, whole, strict=True):
        assert mine["resumed"] and rows(mine) == rows(theirs)
    assert losses(Path(dirs[1])) == losses(tmp_path / "whole" / "1")
    assert json.loads((Path(dirs[0]) / "results.json").read_text())["train_steps"] == 200

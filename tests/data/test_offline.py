"""Local sources touch no network, and lengen writes its caches where docs/data.md says.

``tests/conftest.py`` turns datasets offline for the whole suite before anything imports it;
these tests undo that, to see what a user's process without those variables does.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CONFIG_DIR, text_data

ROOT = CONFIG_DIR.parent
#: variables that would hide what lengen itself does about network and caches
USER_SETTINGS = (
    "HF_HOME",
    "HF_DATASETS_CACHE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_OFFLINE",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "LENGEN_CACHE_DIR",
    "MPLCONFIGDIR",
    "TORCHINDUCTOR_CACHE_DIR",
)


@pytest.fixture
def online_process(monkeypatch):
    """This process as a user's: no offline variables, datasets' flags as they would be, and
    every DNS lookup or connection attempt recorded (and refused)."""
    import datasets.config
    from huggingface_hub import constants

    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[:2])
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


@pytest.mark.parametrize("source", ["files", "directory"])
def test_local_sources_make_no_network_attempt(tmp_path, corpus, online_process, source):
    import datasets.config

    train, valid = corpus
    if source == "files":
        options = {"files": {"train": str(train), "validation": str(valid)}}
    else:  # data.dataset: a local folder of data files
        folder = tmp_path / "corpus"
        folder.mkdir()
        (folder / "train.txt").write_bytes(train.read_bytes())
        (folder / "validation.txt").write_bytes(valid.read_bytes())
        options = {"dataset": str(folder)}
    data = text_data(tmp_path, tokenizer="char", **options)
    assert data.train_ids.shape[0] > 0
    assert online_process == []
    # datasets' copy of the data lives in lengen's cache (docs/data.md, "Cache")
    assert list((tmp_path / "cache" / "datasets").iterdir())
    # and the process is online again afterwards: a hub dataset in the next run of a sweep
    assert datasets.config.HF_HUB_OFFLINE is False
    assert "HF_HUB_OFFLINE" not in os.environ and "HF_DATASETS_OFFLINE" not in os.environ


# the real command line, every DNS lookup and connection attempt written to a file
SPY = """
import runpy, socket, sys
log = open(sys.argv[1], "w")
def refuse(*args, **kwargs):
    log.write(repr(args[:2]) + "\\n")
    log.flush()
    raise OSError("no network in this test")
socket.getaddrinfo = socket.create_connection = refuse
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _user_env(home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    return {**env, "HOME": str(home), "OMP_NUM_THREADS": "1", **extra}


def test_a_local_text_run_writes_only_in_its_run_dir_and_lengens_cache(tmp_path, corpus):
    """``python train.py data=text data.files.train=<file>`` with a fresh home and temporary
    folder: no network attempt, and nothing written outside the run directory but
    ``~/.cache/lengen`` (tokenizers, corpora, datasets' copy, matplotlib's cache)."""
    home, temp, cwd = tmp_path / "home", tmp_path / "tmp", tmp_path / "cwd"
    for folder in (home, temp, cwd):
        folder.mkdir()
    attempts = tmp_path / "network.log"
    done = subprocess.run(
        [sys.executable, "-c", SPY, str(attempts), str(ROOT / "train.py"), "data=text",
         f"data.files.train={corpus[0]}", "data.tokenizer=char", "data.len=16", "debug=fast",
         "eval.factors=[1,2]", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=cwd, env=_user_env(home, TMPDIR=str(temp)), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert attempts.read_text() == ""
    written = sorted(p.relative_to(home) for p in home.rglob("*") if p.is_file())
    assert written and all(p.parts[:2] == (".cache", "lengen") for p in written), written
    cache = home / ".cache" / "lengen"
    assert list((cache / "datasets").iterdir())
    assert list((cache / "matplotlib").glob("fontlist*.json"))
    assert list(temp.iterdir()) == [] and list(cwd.iterdir()) == []


# -- the entry points point matplotlib's and inductor's caches into lengen's ------------------
PROBE = """
import json, os, runpy, sys
runpy.run_path(sys.argv[1])  # the module's top, not its __main__ block
print(json.dumps({
    "MPLCONFIGDIR": os.environ.get("MPLCONFIGDIR"),
    "TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    "imported": sorted(m for m in ("matplotlib", "torch") if m in sys.modules),
}))
"""


def _entry_point_env(script: str, home: Path, **extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / script)],
        cwd=ROOT, env=_user_env(home, **extra), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script", ["train.py", "eval.py"])
def test_entry_points_put_matplotlib_and_inductor_caches_in_lengens(tmp_path, script):
    found = _entry_point_env(script, tmp_path)
    cache = tmp_path / ".cache" / "lengen"
    assert found["MPLCONFIGDIR"] == str(cache / "matplotlib")
    assert found["TORCHINDUCTOR_CACHE_DIR"] == str(cache / "inductor")
    assert found["imported"] == []  # set before either library is imported
    moved = _entry_point_env(script, tmp_path, LENGEN_CACHE_DIR=str(tmp_path / "elsewhere"))
    assert moved["MPLCONFIGDIR"] == str(tmp_path / "elsewhere" / "matplotlib")


@pytest.mark.parametrize("script", ["train.py", "eval.py"])
def test_entry_points_keep_cache_folders_the_user_set(tmp_path, script):
    mine = {"MPLCONFIGDIR": str(tmp_path / "mpl"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")}
    found = _entry_point_env(script, tmp_path, **mine)
    assert {k: found[k] for k in mine} == mine

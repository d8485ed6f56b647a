"""Shared fixtures. Nothing in the suite touches the network or the home folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch

# Offline everywhere, caches in a throwaway folder (see ../shared/MEASURED.md: without the two
# OFFLINE variables datasets still tries a DNS query).
_CACHE = tempfile.mkdtemp(prefix="lengen-test-cache-")
for variable, value in {
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_HOME": os.path.join(_CACHE, "hf"),
    "WANDB_MODE": "offline",
    "WANDB_DIR": os.path.join(_CACHE, "wandb"),
    "WANDB_CACHE_DIR": os.path.join(_CACHE, "wandb-cache"),
    "WANDB_CONFIG_DIR": os.path.join(_CACHE, "wandb-config"),
    "TORCHINDUCTOR_CACHE_DIR": os.path.join(_CACHE, "inductor"),
    "LENGEN_CACHE_DIR": os.path.join(_CACHE, "lengen"),
    "MPLCONFIGDIR": os.path.join(_CACHE, "matplotlib"),
    "MPLBACKEND": "Agg",
    # estimates as on a quiet machine, whatever shares this one (lengen.estimate.machine_load)
    "LENGEN_MACHINE_LOAD": "0",
}.items():
    os.environ[variable] = value

# pytest-xdist (the suite runs with -n auto, pyproject.toml): each worker gets its share of the
# cores, for its own torch and for the train.py processes it starts; without this, two workers
# on two cores each run two intra-op threads and spin against each other
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _SHARE = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_SHARE))
    torch.set_num_threads(_SHARE)

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``: skipped where absent, a failure when LENGEN_REQUIRE_SHARED_DATA=1."""
    if not SHARED_DATA.is_dir():
        message = f"needs the shared text data at {SHARED_DATA} (absent in a plain clone)"
        if os.environ.get("LENGEN_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(message + "; LENGEN_REQUIRE_SHARED_DATA=1 requires it")
        pytest.skip(message)
    return SHARED_DATA


@pytest.fixture(scope="module")
def single_thread():
    """Tiny tensors: intra-op threads only add wake-up latency (100x on a busy 2-core box)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, Path]:
    """train.txt / valid.txt of short lines (non-ASCII included), no blank lines."""
    from helpers import corpus_lines

    train, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    train.write_text("".join(line + "\n" for line in corpus_lines(300, 0)), encoding="utf-8")
    valid.write_text("".join(line + "\n" for line in corpus_lines(60, 1)), encoding="utf-8")
    return train, valid


@pytest.fixture(params=["looped", "vmapped"])
def pack_strategy(request, monkeypatch):
    """Both ways a pack trains its members (``lengen.pack.engine.LOOPED``): looped, a CPU's
    default, and vmapped, a GPU's, here forced on the CPU so that CI tests the GPU's path."""
    from lengen.pack import engine

    monkeypatch.setattr(engine, "LOOPED", {"cpu": request.param == "looped"})
    return request.param


@pytest.fixture(scope="module")
def unsaved_run_figures():
    """``helpers.unsaved_figures`` around a module's tests and module fixtures, for modules
    whose runs are read for their numbers and files, never their figures:
    ``pytestmark = pytest.mark.usefixtures("unsaved_run_figures")``. The figures' own tests
    (tests/plots, tests/evaluation/test_diagnostics.py, test_train's DRAWN runs) write them."""
    from helpers import unsaved_figures

    with unsaved_figures():
        yield

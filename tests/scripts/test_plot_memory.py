"""``plot.py pe-analysis`` at a length whose tables cannot fit is refused in one line (PA15: it
was killed by the kernel without a word, or died in a torch allocator traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import ROOT


def test_an_analysis_too_big_for_memory_is_refused_writing_nothing(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot.py"), "pe-analysis",
         "--length", "100000000", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: --length 100000000: the analysis holds about 381.5 GiB")
    assert not out.exists()


def test_the_address_space_limit_bounds_the_analysis(tmp_path):
    """Under ``ulimit -v`` (3 GB) a length the machine holds but the process may not is refused
    naming the limit (it was compared with the machine's MemAvailable: PA15 under 6 GB)."""
    import resource

    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 10**9, resource.RLIM_INFINITY))

    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot.py"), "pe-analysis",
         "--length", "1000000", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limit_address_space,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: --length 1000000: the analysis holds about ")
    assert "GiB of CPU (ulimit -v) memory available" in done.stderr

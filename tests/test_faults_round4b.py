"""Issue #51's leftovers: a bar that says a long length still runs, a pack bounded by
LENGEN_MAX_EVAL_HOURS as its solo runs are, results.json meeting a disk that stays full."""

from __future__ import annotations

import time

from lengen import heartbeat as beats
from lengen.progress import each


def test_a_long_item_says_it_is_still_running_on_the_bar(capsys, monkeypatch):
    """bar mode (a terminal) showed nothing within a length of hours; lines mode a line."""
    monkeypatch.setattr(beats, "FIRST_SECONDS", 0.05)
    for _ in each([30000], desc="evaluate", unit="length", mode="bar"):
        time.sleep(0.3)
    assert "length 30000 still running after " in capsys.readouterr().err


def test_a_pack_whose_evaluation_its_solo_runs_would_refuse_is_refused_unwritten(
    tmp_path, monkeypatch, single_thread
):
    """lengen.estimate_bound bounded a solo run's evaluation, not a pack's (src/lengen/pack)."""
    import pytest

    from lengen.errors import ConfigError
    from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
    from lengen.pack import train_pack
    from test_pack import small

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured: rough
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "1e-9")  # any evaluation longer than training
    cfgs = [small("trainer.max_steps=1", f"seed={seed}") for seed in (0, 1)]
    dirs = [tmp_path / "pack" / str(seed) for seed in (0, 1)]
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        train_pack(cfgs, dirs)
    assert not (tmp_path / "pack").exists()

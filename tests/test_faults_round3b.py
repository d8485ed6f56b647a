"""Issue #51, the re-run's remarks (docs/trials/rerun-2026-12-01.md, "Remarks on cases counted
clean"), each fixed with one property here."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen.errors import ConfigError


def test_num_nodes_in_a_slurm_job_without_its_task_count_names_both_variables(monkeypatch):
    """SL06 without SLURM_NTASKS: SLURM_JOB_ID set (salloc, sbatch's script) is no 'no SLURM
    job'; the refusal names the variable that is set and the one that is missing."""
    from lengen.preflight.launch import NODE_VARIABLES, check_launch

    for name in NODE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    cfg = compose_train("trainer.num_nodes=2", "trainer.accelerator=cpu")
    with pytest.raises(ConfigError, match="SLURM_JOB_ID=4242 is set but SLURM_NTASKS is missing"):
        check_launch(cfg, sweeping=False, cluster=False)


#: a pack sweep small enough to build at once (debug=fast: a few steps)
PACK = ("-m", "seed=0,1", "hydra.sweeper.pack=2", "debug=fast", "trainer.accelerator=cpu")


def test_a_pack_whose_evaluation_its_solo_runs_would_refuse_is_refused_by_the_precheck(
    tmp_path, monkeypatch
):
    """Refused before Hydra writes anything (exit 2 in train.py), not by the pack's job after
    its members are built (the sweep then exited 1)."""
    from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
    from lengen.preflight import precheck

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured: rough
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "1e-9")  # any evaluation longer than training
    sweep = tmp_path / "sweep"
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        precheck([*PACK, "eval.lengths=[8,64]", f"hydra.sweep.dir={sweep}"])
    assert not sweep.exists()

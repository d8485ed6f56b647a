"""The pre-check's question about packs (``hydra.sweeper.pack``; docs/scaling.md "Packs"): asked
before Hydra writes anything. The grouping itself is ``lengen.sweep_packs``'s, a layer below."""

from __future__ import annotations

from omegaconf import OmegaConf

from lengen.errors import ConfigError
from lengen.preflight.hydra_private import composing
from lengen.preflight.sweeps import job_refusal, sweep_jobs
from lengen.sweep_packs import PACK_KEY, pack_size, plan_packs


def check_pack_sweep(command, given: str | None, skipping: bool, cluster: bool) -> None:
    """The pre-check's question about packs (``lengen.preflight.precheck``, before Hydra writes
    anything): ``hydra.sweeper.pack`` (``given``: its command-line value, else the composed
    config's) is an int >= 1, a single run does not ask for packs, and a sweep's packs can
    train (``plan_packs`` on every job, composed as the sweeper will). Raises ConfigError."""
    from hydra import compose

    if not command.sweeping:
        if given is not None and pack_size(given) > 1:
            raise ConfigError(
                f"{PACK_KEY}={given}: packs are made of a -m sweep's runs; allowed: -m with "
                f"values to sweep (e.g. -m seed=0,1,2,3 {PACK_KEY}=4), or leave it out"
            )
        return
    hydra_overrides = [
        a for a in command.overrides if a.lstrip("+~").startswith(("hydra.", "hydra/"))
    ]
    jobs = sweep_jobs(command.overrides)
    if not jobs:
        return
    with composing(command.config_dirs):

        def load(job):
            overrides = [*hydra_overrides, *job]
            return compose(command.config_name, overrides=overrides, return_hydra_config=True)

        pack = pack_size(OmegaConf.select(load(jobs[0]), PACK_KEY, default=1), given)
        if pack <= 1:
            return
        if skipping:  # the jobs the sweeper will skip are in no pack
            jobs = [j for j in jobs if job_refusal(j, lambda j=j: load(j), cluster) is None]
        plan_packs(jobs, load, pack)

"""The pre-check's question about packs (``hydra.sweeper.pack``; docs/scaling.md "Packs"): asked
before Hydra writes anything. The grouping itself is ``lengen.sweep_packs``'s, a layer below."""

from __future__ import annotations

from omegaconf import OmegaConf

from lengen.errors import ConfigError
from lengen.preflight.evaluations import check_pack_evaluations
from lengen.preflight.hydra_private import composing
from lengen.preflight.sweeps import job_refusal, sweep_jobs
from lengen.sweep_packs import PACK_KEY, group_jobs, pack_size, plan_packs


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
        composed: dict[tuple, object] = {}  # each job composed once, for the plan and the sizes

        def cached(job):
            key = tuple(job)
            if key not in composed:
                composed[key] = load(job)
            return composed[key]

        plan_packs(jobs, cached, pack)
        configs = [cached(job) for job in jobs]
        packs = [members for members in group_jobs(configs, pack) if len(members) > 1]
        for members in packs:
            check_pack_memory(configs[members[0]], len(members))
        # on SLURM too, as its memory is asked of this machine: the nodes' own check (the
        # pack's job, lengen.pack.timing) came only after the sweep was written and submitted
        check_pack_evaluations([configs[members[0]] for members in packs])


def check_pack_memory(cfg, members: int) -> None:
    """A pack of ``members`` runs of ``cfg`` fits in memory: each member's parameters, their
    gradients and AdamW's moments are held at once (stacked), and a training step's activations
    once for every member on a GPU (one vmapped call), once in all on a CPU (members one after
    another: ``lengen.pack.engine.LOOPED``); evaluation is one member at a time, as a single
    run's. The single run's estimate is ``lengen.preflight.sizes``'s (ConfigError naming
    hydra.sweeper.pack and the estimate)."""
    from lengen.preflight.resources import (
        available_memory,
        check_model_memory,
        config_axes,
        on_cpu,
    )
    from lengen.preflight.sizes import TRAINING_BYTES, model_sizes

    # a member that cannot fit alone is refused as a single run is, naming its own key: the
    # pack's line said 'a smaller hydra.sweeper.pack', which no pack size helps (KB153)
    check_model_memory(cfg)
    available, where = available_memory(cfg)
    sizes = model_sizes(cfg, config_axes(cfg)) if where else None
    if sizes is None:
        return
    weights = TRAINING_BYTES * sum(sizes.parameters.values())
    activations = sum(sizes.training.values()) - weights
    total = members * weights + (1 if on_cpu(cfg) else members) * activations
    if total > available:
        raise ConfigError(
            f"{PACK_KEY}: a pack of {members} runs needs about {total / 2**30:,.1f} GiB "
            f"({weights / 2**30:,.2f} GiB of weights, gradients and AdamW moments a member), "
            f"more than the {available / 2**30:,.1f} GiB of {where} memory available; allowed: "
            f"a smaller {PACK_KEY} (docs/scaling.md, Packs)"
        )

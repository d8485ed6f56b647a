"""The pre-check's question about packs (``hydra.sweeper.pack``; docs/scaling.md "Packs"): asked
before Hydra writes anything. The grouping itself is ``lengen.sweep_packs``'s, a layer below."""

from __future__ import annotations

from omegaconf import OmegaConf

from lengen.errors import ConfigError
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


def check_pack_evaluations(firsts) -> None:
    """Each pack's evaluation bounded as its solo runs' (``LENGEN_MAX_EVAL_HOURS``:
    ``lengen.sweep_estimate.check_pack_evaluation``), one pack of each kind asked (packs of
    equal ``pack_signature`` cost the same): refused here in one line, exit 2, before Hydra
    writes anything; the packs' jobs found it only once their members were built, and the sweep
    exited 1. Imports torch (the estimate needs it). ``firsts``: a config of each pack, or of
    each job of a sweep (``check_sweep_evaluations``)."""
    from lengen.packable import pack_signature
    from lengen.sweep_estimate import check_pack_evaluation

    asked = set()
    for cfg in firsts:
        if (signature := pack_signature(cfg)) not in asked:
            asked.add(signature)
            check_pack_evaluation(cfg)


def check_sweep_evaluations(configs) -> None:
    """A -m sweep's runs bounded as a single run is (``LENGEN_MAX_EVAL_HOURS``), before Hydra
    writes anything: the pre-check's configs (every job's where it composed them all, else the
    first values and each swept value once), one of each cost asked. A single run is refused
    after its build and its folder removed; a sweep's job was refused only after the sweep
    folder was written (each run 'refused', exit 1, on SLURM after submitting). The job's own
    check stays, for the combinations not composed here, and for text, which reads (and
    tokenises) its corpus when built: the pre-check builds only what is cheap to build."""
    from hydra.utils import get_class

    cheap = [cfg for cfg in configs if get_class(cfg.data._target_).cheap_to_build]
    check_pack_evaluations(cheap)


def check_pack_memory(cfg, members: int) -> None:
    """A pack of ``members`` runs of ``cfg`` fits in memory: each member's parameters, their
    gradients and AdamW's moments are held at once (stacked), and a training step's activations
    once for every member on a GPU (one vmapped call), once in all on a CPU (members one after
    another: ``lengen.pack.engine.LOOPED``); evaluation is one member at a time, as a single
    run's. The single run's estimate is ``lengen.preflight.sizes``'s (ConfigError naming
    hydra.sweeper.pack and the estimate)."""
    from lengen.preflight.resources import available_memory, config_axes, on_cpu
    from lengen.preflight.sizes import TRAINING_BYTES, model_sizes

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

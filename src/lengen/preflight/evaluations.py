"""A sweep's evaluations bounded before Hydra writes anything, as a single run's is once built
(``LENGEN_MAX_EVAL_HOURS``: ``lengen.estimate_bound``): the packs' (``lengen.preflight.packs``)
and every job's (``precheck``, and ``check_job`` for ``skip_invalid``). A leaf of the
pre-check: it imports no other room of it."""

from __future__ import annotations


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

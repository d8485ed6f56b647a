"""When two configurations are "the same": the one module that says so.

Two questions are asked of a resolved config, and each has its rule here, side by side, so
that they differ only where the question does:

* **Same training** (``RESUME_MAY_CHANGE``). Whether a run may continue in a directory, whether
  a checkpoint belongs to its directory (``config_differences``, used by ``lengen.rundir``), and
  which directory a sweep's configuration lands in (``run_id``, the Hydra resolver
  ``lengen_run_id``). Only what is trained counts: where and how it executes may change, and so
  may everything about evaluation, which comes after training. ``run_id`` also leaves out the
  seed, because a directory's name carries it beside the id; ``config_differences`` counts it
  (another seed is another run).
* **Same measurement** (``AVERAGED_MAY_DIFFER``). Which runs aggregation averages over seeds
  (``measured_identity``, used by ``lengen.aggregate``). Results are what is compared, so
  evaluation settings that change them (decoding, samples, protocol) split configurations, and
  so does the device (numbers differ across kernels); only the seed (what is averaged over),
  where things are written and printed, and what a table's rows already account for (the
  length) do not. Null keys are left out (a key an older lengen did not write meant unset), and
  a fine-tune's ``init_from`` counts by its base run's configuration, not its path.

Both rules hash or compare flattened dotted keys (``flatten``), a key leaving out its subtree
(``named_by``). Nothing here imports torch or Hydra.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

from omegaconf import OmegaConf

# -- same training -------------------------------------------------------------------------------
#: Keys that may differ between an interrupted run and its resumption: they change where and
#: how it runs, or what is evaluated afterwards, never what is trained. They (and the seed,
#: named apart) do not enter a run's identity (``run_id``).
RESUME_MAY_CHANGE = (
    "resume",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.num_nodes",
    "trainer.strategy",
    "trainer.enable_progress_bar",
    "trainer.log_every_n_steps",
    "trainer.checkpoint_every_n_steps",
    "logger",
    "eval",
)

#: Keys added after runs were written, each with the value that does what those runs did (the
#: key's default). At that value a key counts as absent in every rule here (``run_id``,
#: ``config_differences``, ``measured_identity``), so the directory names, resumptions and
#: averaging groups of older runs stay as they were; another value counts as usual.
IMPLIED_BEFORE = {
    "pe.start_offset": 0,  # task positions (#31): no random start offset
    "data.task.positions": "index",  # addition (#31): positions 0 … T−1, as before the key
    # the model's options of #48 and #49 (docs/models.md): at these values, the model as before
    "model.mixer": "attention",  # every layer attends
    "model.mixers": None,
    "model.loops": 1,  # no looped depth
    "model.loop_rule": "fixed",
    "model.loop_extra": 20,  # loop_rule=confidence's counts past the linear one (unused else)
    "model.canon": "",  # no Canon layers
    "model.attn_gate": "none",
    "model.attn_sinks": False,
    "model.kv_bias": False,
    "model.qk_norm": False,
    "model.attn_fn": "softmax",
    "eval.effrem": False,  # #49 item 2: no Effective Remembrance curve (a diagnostic)
    # RoPE's training-free arms of #48 item 3 (docs/pe.md): none, RoPE as before
    "pe.extension": "none",
    "pe.self_extend_group": None,
    "pe.self_extend_window": None,
    "pe.rerope_window": None,
    "pe.rerope_leak": None,
    "pe.dca_chunk_size": None,
    "pe.dca_local_window": None,
}

#: Keys a resumed run may also change that stay in ``run_id`` all the same: the directory names
#: of existing sweeps hash them, so they keep naming those directories
RESUME_ALSO_MAY_CHANGE = (
    "data.num_workers",  # processes building batches; every batch is a function of (seed, step)
)

#: Evaluation keys that change how an evaluation runs or is drawn, not what it measures: a
#: finished run answers a request that differs from it only in these (the lengths are compared
#: by value, ``lengen.rundir.finished_refusal``)
EVALUATION_MAY_CHANGE = (
    "eval.lengths",
    "eval.factors",
    "eval.max_tokens_per_batch",
    "eval.plot_dpi",
    "eval.plot_formats",  # the formats figures are written in: no number changes
    "eval.ratio_thresholds",  # ρ_τ is derived from the rows; aggregation recomputes it
    "eval.diagnostics",  # attention statistics beside the rows, which they never change
    "eval.diagnostics_samples",
    "eval.effrem",  # Effective Remembrance beside the rows, which it never changes
)


def evaluation_differences(saved: dict, current: dict) -> list[str]:
    """``eval.*`` keys whose values differ between a finished run's config and a request, except
    ``EVALUATION_MAY_CHANGE`` and keys the finished run's config does not hold (written before
    the key existed: what that run measured is its results), each as ``key (before -> after)``.
    """
    before, after = _flat_config(saved), _flat_config(current)
    changed = []
    for key in sorted(after):
        if not key.startswith("eval.") or named_by(key, EVALUATION_MAY_CHANGE):
            continue
        if key in before and before[key] != after[key]:
            changed.append(f"{key} ({before[key]} -> {after[key]})")
    return changed


# -- same measurement ----------------------------------------------------------------------------
#: Keys (and whole subtrees) that may differ between runs averaged together: left out of
#: aggregation's configuration hash (docs/analysis.md lists them with the same reasons)
AVERAGED_MAY_DIFFER = (
    "seed",  # what we average over
    "data.seed",  # the training stream's seed: replicates too (n counts runs over both seeds)
    "hydra",  # where the run wrote (train.py already drops it from config.yaml)
    "logger",  # csv / wandb / none: where training curves go
    "resume",  # a resumed run replays the same batches (every batch is a function of seed, step)
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "trainer.log_every_n_steps",
    "eval.lengths",  # the length is a row key; runs evaluated at more lengths still group
    "eval.factors",
    "eval.max_tokens_per_batch",  # evaluation batch size: memory, not the instances
    "eval.ratio_thresholds",  # which ρ_τ results.json reports: no row changes
    "eval.diagnostics",  # attention statistics beside the rows (tested: rows identical)
    "eval.diagnostics_samples",
    "eval.effrem",  # Effective Remembrance beside the rows (tested: rows identical)
    "eval.plot_formats",  # the formats figures are written in: no number changes
)


def flatten(tree: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists and empty dicts stay values."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def named_by(key: str, keys: Iterable[str]) -> bool:
    """Whether the dotted ``key`` is one of ``keys`` or lies inside one of their subtrees."""
    return any(key == k or key.startswith(k + ".") for k in keys)


def run_id(cfg) -> str:
    """8 hex digits naming what a run trains: a hash of its resolved config without ``hydra``,
    the seed and ``RESUME_MAY_CHANGE``. Sweep directories end with it, so one configuration
    always lands in one directory (a sweep can grow, and be re-run to fill what is missing)."""
    # without hydra before resolving: hydra.sweep.subdir itself calls this
    trained = OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])
    container = OmegaConf.to_container(trained, resolve=True)
    for key in ("seed", *RESUME_MAY_CHANGE, "data.seed"):
        parent, _, leaf = key.rpartition(".")
        node = container
        for part in parent.split(".") if parent else []:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        # data.seed counts where set (seed=1 data.seed=1,2 train apart); null, the default,
        # is left out, so the ids of runs from before the key existed stay as they were
        if isinstance(node, dict) and (key != "data.seed" or node.get(leaf) is None):
            node.pop(leaf, None)
    for key, implied in IMPLIED_BEFORE.items():
        parent, _, leaf = key.rpartition(".")
        node = container
        for part in parent.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and leaf in node and node[leaf] == implied:
            del node[leaf]
    # the directory names of existing sweeps depend on this exact text: keep its form
    text = json.dumps(container, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def config_differences(saved: dict, current: dict) -> list[str]:
    """Keys whose values differ between two resolved configs, except RESUME_MAY_CHANGE, each as
    ``key (before -> after)``; [] when both train the same thing."""
    before, after = _without_implied(_flat_config(saved)), _without_implied(_flat_config(current))
    changed = []
    for key in sorted(set(before) | set(after)):
        if named_by(key, RESUME_MAY_CHANGE + RESUME_ALSO_MAY_CHANGE):
            continue
        if before.get(key) is None and after.get(key) is None:  # null = unset = not written by an
            continue  # older lengen (data.seed): a run started before a key existed resumes
        if before.get(key, "<absent>") != after.get(key, "<absent>"):
            changed.append(f"{key} ({before.get(key, '<absent>')} -> {after.get(key, '<absent>')})")
    return changed


def _without_implied(flat: dict) -> dict:
    """A flat config without the ``IMPLIED_BEFORE`` keys that hold their implied value."""
    return {k: v for k, v in flat.items() if k not in IMPLIED_BEFORE or v != IMPLIED_BEFORE[k]}


def _flat_config(config) -> dict:
    """``flatten``, where a config that is not a non-empty mapping (a damaged config.yaml) is
    one value, so that it differs from every real config instead of failing."""
    return flatten(config) if isinstance(config, dict) and config else {"": config}


def measured_identity(
    config: dict,
    ignored: tuple[str, ...] = AVERAGED_MAY_DIFFER,
    base_hash: Callable[[str], str | None] | None = None,
) -> dict:
    """The flat config that identifies what a run measured: ``ignored`` keys and null keys
    dropped, and ``init_from`` replaced by ``"run:" + base_hash(init_from)`` where the caller
    can find the run it points to (so fine-tunes of equal base runs group although each points
    to its own seed's directory); where it cannot (None), the path itself counts."""
    flat = {
        key: value
        for key, value in _without_implied(flatten(config)).items()
        if value is not None and not named_by(key, ignored)
    }
    if flat.get("init_from"):
        flat["init_from"] = str(flat["init_from"])
        if base_hash is not None and (base := base_hash(flat["init_from"])) is not None:
            flat["init_from"] = "run:" + base
    return flat


def digest(flat: dict) -> str:
    """sha256 (hex) of the canonical JSON of a flat identity."""
    canonical = json.dumps(flat, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()

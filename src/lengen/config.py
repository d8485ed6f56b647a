"""The config root, its resolvers and groups, and what a config computes: its evaluation
lengths (refusing factors that give no whole length) and a run's label. Whether a config can
run is ``lengen.preflight``'s question.
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from lengen.errors import ConfigError
from lengen.identity import run_id

#: Config groups whose choice is a yaml file under configs/<group>/.
GROUPS = ("pe", "model", "data", "trainer", "logger", "eval", "experiment", "debug")
#: the lengen checkout
ROOT = Path(__file__).resolve().parents[2]
#: the config root: lengen's configs/, or ``LENGEN_CONFIG_DIR`` (a copy holding your own
#: encodings and tasks beside lengen's; train.py reads it too, docs/pe.md "Adding an encoding")
CONFIG_DIR = Path(os.environ.get("LENGEN_CONFIG_DIR") or ROOT / "configs")
#: ${lengen_root:}, the lengen checkout, so recipes can name ../shared/data wherever the user
#: runs from
OmegaConf.register_new_resolver("lengen_root", lambda: str(ROOT), replace=True)


#: a few random hex digits per process: default run directories of two runs started in the same
#: second with the same config differ by it
_NONCE = __import__("secrets").token_hex(2)
# ${lengen_run_id:}: what the run trains (lengen.identity), in sweep directory names
OmegaConf.register_new_resolver("lengen_run_id", lambda *, _root_: run_id(_root_), replace=True)
OmegaConf.register_new_resolver("lengen_nonce", lambda: _NONCE, replace=True)

__all__ = ["ConfigError", "eval_lengths", "pe_options_changed", "run_label", "schedule_label"]


def eval_lengths(cfg: DictConfig) -> list[int]:
    """``eval.lengths`` exactly (sorted, unique), or ``eval.factors`` × ``data.len``."""
    train_len = cfg.data.len
    if cfg.eval.lengths is not None:
        lengths = cfg.eval.lengths
        if not isinstance(lengths, ListConfig | list) or not lengths:
            raise ConfigError(
                f"eval.lengths must be null or a non-empty list of positive integers, got {lengths!r}"
            )
        for length in lengths:
            if isinstance(length, bool) or not isinstance(length, int) or length < 1:
                raise ConfigError(f"eval.lengths must hold positive integers, got {length!r}")
        return sorted(set(lengths))
    factors = cfg.eval.factors
    if not isinstance(factors, ListConfig | list) or not factors:
        raise ConfigError(
            f"eval.factors must be a non-empty list of positive numbers, got {factors!r}"
        )
    lengths = set()
    for factor in factors:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
            raise ConfigError(f"eval.factors must hold positive numbers, got {factor!r}")
        length = factor * train_len
        if abs(length - round(length)) > 1e-9 or round(length) < 1:
            raise ConfigError(
                f"eval.factors: {factor} × data.len {train_len} = {length} is not a whole length; "
                f"allowed: factors giving integers >= 1, or explicit eval.lengths"
            )
        lengths.add(int(round(length)))
    return sorted(lengths)


def pe_options_changed(cfg: DictConfig, config_dir: Path = CONFIG_DIR) -> dict:
    """The ``pe.*`` options whose values differ from the encoding's defaults (its yaml over
    train.yaml's shared options), e.g. ``{"layout": "half", "base": 500.0}``: what tells a
    variant apart in headers, titles and legends."""
    path = config_dir / "pe" / f"{cfg.pe.name}.yaml"
    if not path.is_file():
        return {}
    shared = OmegaConf.load(config_dir / "train.yaml").get("pe", {})
    defaults = OmegaConf.to_container(OmegaConf.merge(shared, OmegaConf.load(path)))
    current = OmegaConf.to_container(cfg.pe, resolve=True)
    return {
        key: value
        for key, value in current.items()
        if key not in ("_target_", "_partial_", "name") and defaults.get(key, value) != value
    }


def run_label(cfg: DictConfig, protocol: str, tag: str | None = None) -> str:
    """One line naming a run and everything that sets it apart: task · model · pe (changed
    options) · protocol · seed (· tag), e.g. ``copy · decoder · pe=rope (layout=half) ·
    greedy · seed 0``."""
    changed = pe_options_changed(cfg)
    layers = cfg.pe.get("layers")  # a schedule (lengen.pe.schedule): named layer by layer
    changed.pop("layers", None)
    options = ", ".join(f"{k}={v}" for k, v in changed.items())
    pe = f"pe={cfg.pe.name}" + (f" [{schedule_label(layers)}]" if layers else "")
    pe += f" ({options})" if options else ""
    model = str(cfg.model.name) + (f" [{mixers}]" if (mixers := mixers_label(cfg.model)) else "")
    parts = [str(cfg.data.name), model, pe, protocol, f"seed {cfg.seed}"]
    return " · ".join(parts + ([f"tag {tag}"] if tag else []))


def mixers_label(model) -> str | None:
    """A model's mixers (``model.mixer``, ``model.mixers``: docs/models.md) as the label names
    them, ``gla`` or ``gated_deltanet(negative_eigenvalues=True), attention`` (options as
    given); None where every layer is attention (the default, unlabelled)."""
    entries = model.get("mixers") or [model.get("mixer", "attention")]
    names = []
    for entry in entries:
        own = {} if isinstance(entry, str) else {k: v for k, v in entry.items() if k != "mixer"}
        name = entry if isinstance(entry, str) else str(entry["mixer"])
        names.append(name + (f"({', '.join(f'{k}={v}' for k, v in own.items())})" if own else ""))
    return None if set(names) == {"attention"} else ", ".join(names)


def schedule_label(layers) -> str:
    """A schedule's ``pe.layers`` in a few words, runs of equal entries counted:
    ``3×rope(window=8), nope``."""
    names = []
    for entry in OmegaConf.to_container(layers) if not isinstance(layers, list) else layers:
        if isinstance(entry, str):
            names.append(entry)
            continue
        own = ", ".join(f"{k}={v}" for k, v in entry.items() if k != "pe")
        names.append(f"{entry['pe']}({own})" if own else str(entry["pe"]))
    runs: list[list] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return ", ".join(name if count == 1 else f"{count}×{name}" for name, count in runs)

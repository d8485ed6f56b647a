"""A run's config.yaml: the config resolved (without ``hydra``) as it is saved and stored in
checkpoints, written atomically, and read back with ``key=value`` overrides for a re-evaluation;
where a run directory is when none is given."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lengen.atomic import atomic_write
from lengen.checks import ConfigError


def resolve_run_dir(cfg: DictConfig, run_dir: str | Path | None) -> Path:
    if run_dir is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            run_dir = HydraConfig.get().runtime.output_dir
        elif "hydra" in cfg:
            run_dir = cfg.hydra.run.dir
        else:
            raise ConfigError("hydra.run.dir is unknown: pass run_dir= to run() outside Hydra")
    return Path(run_dir)


def resolved_config(cfg: DictConfig) -> dict:
    """The config as written to config.yaml and checkpoints: resolved, without ``hydra``."""
    container = OmegaConf.to_container(cfg, resolve=True)
    container.pop("hydra", None)
    return container


def save_config(cfg: DictConfig, path: Path) -> None:
    atomic_write(path, OmegaConf.to_yaml(resolved_config(cfg)))


def encodings_with_option(option: str) -> list[str]:
    """The shipped encodings (configs/pe) whose yaml holds ``option``."""
    import yaml

    from lengen.pe.config import pe_config_dir

    return [path.stem for path in sorted(pe_config_dir().glob("*.yaml"))
            if option in (yaml.safe_load(path.read_text()) or {})]  # fmt: skip


def fill_implied_options(cfg: DictConfig, options) -> None:
    """Options the run's encoding gained after its config.yaml was written, set to the value at
    which it is the encoding it trained as (``lengen.identity.IMPLIED_BEFORE``: pe.start_offset,
    pe.extension's keys), so that a re-evaluation may override them: ``pe.extension=rerope`` on a
    RoPE run written before the key existed. Run ids drop these values, so none changes."""
    from lengen.identity import IMPLIED_BEFORE

    fields = set(options.option_names())
    for key, implied in IMPLIED_BEFORE.items():
        section, _, option = key.partition(".")
        if section == "pe" and option in fields and option not in cfg.pe:
            cfg.pe[option] = implied


def load_config(run_dir: Path, overrides: list[str] | tuple = ()) -> DictConfig:
    """A run's config.yaml with ``key=value`` overrides applied (keys must already exist)."""
    import yaml
    from omegaconf.errors import OmegaConfBaseException

    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"run={run_dir}: no config.yaml there; allowed: a lengen run directory")
    try:
        cfg = OmegaConf.load(config_path)
        if not isinstance(cfg, DictConfig) or "pe" not in cfg:
            raise ValueError("not a lengen config")
    except Exception as error:  # noqa: BLE001 - any parse failure: a damaged record
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(
            f"run={run_dir}: config.yaml cannot be read ({first}); allowed: a lengen run "
            f"directory with its config.yaml intact"
        ) from None
    from lengen.pe.config import config_of

    options = config_of(cfg.pe.get("_target_"))
    if options is not None and options.bias_of_distance and "randomized_relative" not in cfg.pe:
        # written before pe.randomized_relative existed: such runs drew distances of random
        # positions, which null means (lengen.pe.base); the configs' default is distances
        cfg.pe.randomized_relative = None
    if options is not None:
        fill_implied_options(cfg, options)
    OmegaConf.set_struct(cfg, True)
    for override in overrides:
        key = override.partition("=")[0]
        if key.startswith(("~", "+")):  # Hydra's prefixes: from_dotlist reads them as names
            raise ConfigError(
                f"{key}: a re-evaluation changes keys the run's config has; allowed: "
                f"{key.lstrip('~+')}=<value>, without Hydra's ~, + or ++"
            )
        if (section := key.partition(".")[0]) not in cfg:  # OmegaConf said 'not in struct'
            where = " (eval.py writes results.<tag>.json into run=<dir>)" * (section == "hydra")
            raise ConfigError(  # kept-back KB106: hydra.run.dir=… was refused in OmegaConf's words
                f"{key}: the run's config has no {section}{where}; allowed: run=<dir>, "
                f"tag=<name>, and keys of the run's config such as eval.lengths=[32,64]"
            )
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([override]))
        except (OmegaConfBaseException, yaml.YAMLError) as error:  # yaml: a value cut short
            first = str(error).splitlines()[0]
            section, _, option = key.partition(".")
            if section == "pe" and option and option not in cfg.pe:  # the common case: say whose
                owners = encodings_with_option(option.partition(".")[0])
                raise ConfigError(
                    f"{key} is not an option of this run's encoding (pe={cfg.pe.get('name')}); "
                    f"allowed: {key} with runs of "
                    + (", ".join(f"pe={name}" for name in owners) or "no encoding")
                ) from None
            raise ConfigError(
                f"{key}: cannot apply {override!r} to this run's config ({first})"
            ) from None
    return cfg

"""The command line as Hydra reads it, and its keys: every ``group=choice`` names a yaml, every
override names a key that exists (``check_override_keys``, which composes the config, one trial
per swept value). Raises ``ConfigError`` naming the key."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lengen.config import CONFIG_DIR, GROUPS, ROOT
from lengen.errors import ConfigError
from lengen.preflight.hydra_private import arguments_parser, composing


@dataclasses.dataclass(frozen=True)
class Command:
    """A ``train.py`` command line as Hydra reads it (``parse_command_line``)."""

    overrides: list[str]
    sweeping: bool
    #: the config root, and ``--config-dir``'s folder before it (Hydra searches it first)
    config_dirs: tuple[Path, ...] = (CONFIG_DIR,)
    config_name: str = "train"


def parse_command_line(arguments: Sequence[str]) -> Command | None:
    """Read the command line with Hydra's own parser, so its flags (``--config-dir``,
    ``--config-name``, …) cannot carry a command past the checks. -> None for the flags that
    only print (``--help``, ``--cfg``, ``--info``, …): Hydra answers them, running nothing."""
    parsed = arguments_parser().parse_args(list(arguments))  # a bad flag: argparse's usage, exit 2
    check_bare_words(parsed.overrides)  # flags' own values (--cfg job, -c job) are not in it
    if (
        parsed.help
        or parsed.hydra_help
        or parsed.cfg
        or parsed.info
        or parsed.shell_completion
        or parsed.experimental_rerun
    ):
        return None
    primary = CONFIG_DIR
    if parsed.config_path is not None:  # relative to train.py's folder, as @hydra.main reads it
        primary = (ROOT / parsed.config_path).resolve()
    dirs = (primary,)
    if parsed.config_dir is not None:
        extra = Path(parsed.config_dir).expanduser().absolute()
        if not extra.is_dir():
            raise ConfigError(f"--config-dir={parsed.config_dir}: no such directory")
        dirs = (extra, primary)
    for folder in dirs:
        if not folder.is_dir():
            raise ConfigError(f"--config-path: {folder} is no directory")
    return Command(
        overrides=list(parsed.overrides),
        sweeping=bool(parsed.multirun),
        config_dirs=dirs,
        config_name=parsed.config_name or "train",
    )


def check_bare_words(overrides: Sequence[str]) -> None:
    """A word without ``=`` that is no deletion (``~key``): a stray word, or the pieces a shell
    split off a value with spaces (``hydra.run.dir=/my run``). Hydra answered it with its raw
    4-line "missing EQUAL" message and exit 1, after the pre-check (U01s)."""
    bare = [word for word in overrides if "=" not in word and not word.startswith("~")]
    if bare:
        words = ", ".join(repr(word) for word in bare)
        raise ConfigError(
            f"{words}: not key=value (did the shell split a value with spaces?); allowed: "
            "key=value or ~key, a value with spaces quoted, e.g. "
            """'hydra.run.dir="/my runs/a"'"""
        )


def group_choices(group: str, config_dir: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in (config_dir / group).glob("*.yaml"))


def check_group_overrides(
    arguments: Sequence[str], config_dirs: Path | Sequence[Path] = CONFIG_DIR
) -> None:
    """Reject ``group=choice`` command-line overrides naming no yaml (sweeps: each of a,b,c)."""
    folders = [config_dirs] if isinstance(config_dirs, Path) else list(config_dirs)
    for argument in arguments:
        key, sep, value = argument.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or value in ("", "null"):
            continue
        allowed = sorted({c for folder in folders for c in group_choices(key, folder)})
        if value.strip().startswith("["):  # pe=[rope,alibi]: a list where one choice belongs
            raise ConfigError(
                f"{key}={value}: a group takes one choice; allowed: one of {', '.join(allowed)}, "
                f"or a sweep over several: -m {key}={value.strip().strip('[]')}"
            )
        for choice in value.split(","):
            if choice.strip() not in allowed:
                raise ConfigError(
                    f"{key}={choice.strip()}: unknown choice; allowed: {', '.join(allowed)}"
                )


def check_new_top_level_keys(
    arguments: Sequence[str], config_dirs: Sequence[Path], config_name: str = "train"
) -> None:
    """Refuse ``+foo=1``: a new top-level key no part of lengen reads would only change the
    run's id and sit in config.yaml as if it did something. Keys under a group (``+pe.x``) are
    their typed config's to refuse."""
    new = [a.partition("=")[0] for a in arguments if a.startswith("+") and "=" in a]
    new = [key for key in new if not any(c in key for c in "./")]
    new = [key for key in new if key.lstrip("+") not in (*GROUPS, "hydra", "")]
    if not new:
        return
    known = set(GROUPS)
    for folder in config_dirs:
        if (folder / f"{config_name}.yaml").is_file():
            known |= set(OmegaConf.load(folder / f"{config_name}.yaml")) - {"defaults"}
    for key in new:
        if key.lstrip("+") not in known:
            raise ConfigError(
                f"{key}: a new top-level key that nothing reads; allowed at the top level: "
                f"{', '.join(sorted(known))}"
            )


def parse_overrides(overrides: Sequence[str]) -> list:
    """Hydra's parse of command-line overrides; a parse error is bad input (ConfigError)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except Exception as error:  # noqa: BLE001 - Hydra's parse errors are bad input
        first = str(error).strip().splitlines()[0]
        raise ConfigError(
            f"cannot parse the command line: {first}; allowed: key=value, with a value holding "
            "spaces or special characters quoted for Hydra inside the shell's quotes, e.g. "
            """'hydra.run.dir="/my runs/a"'"""
        ) from None


def check_sweep_values(overrides: Sequence[str], sweeping: bool) -> None:
    """Several values (``pe=rope,alibi``) outside a -m sweep: Hydra's main answers them with a
    5-line "Ambiguous value" and exit 1, after the pre-check (Q02); refused here, one line."""
    if sweeping:
        return
    kept = [a for a in overrides if not a.startswith("-") and "=" in a]
    for override in parse_overrides(kept):
        if override.is_sweep_override():
            line = override.input_line
            key, _, value = line.partition("=")
            raise ConfigError(
                f"{line}: several values outside a sweep; allowed: -m {line} (one run each), "
                f"{key}=[{value}] (a list), or {key}='{value}' (one string)"
            )


def check_override_keys(
    arguments: Sequence[str],
    config_dirs: Path | Sequence[Path] | None = None,
    config_name: str = "train",
) -> list:
    """Compose the config with the command line's overrides, as Hydra will, and turn a key that
    does not exist (or an override Hydra cannot parse) into one ConfigError naming the key.
    -> the composed configs (without ``hydra``), one per trial below.

    In a -m sweep each swept value is tried once (the others at their first value), so a key
    that exists for one group choice but not another is caught before any run starts.
    """
    from hydra import compose

    flags = {"-m", "--multirun"}
    # a deletion (~key) needs no value: it must reach the composition all the same
    overrides = [a for a in arguments if not a.startswith("-") and ("=" in a or a[:1] == "~")]
    if any(a.startswith("-") and a not in flags for a in arguments):
        return []  # Hydra's own flags: parse_command_line reads them
    parsed = parse_overrides(overrides)
    trials = [[_first_value(o) for o in parsed]]
    for index, override in enumerate(parsed):
        if override.is_sweep_override() and not override.key_or_group.startswith("hydra"):
            for value in list(override.sweep_string_iterator())[1:]:
                trial = list(trials[0])
                trial[index] = f"{override.get_key_element()}={value}"
                trials.append(trial)
    folders = config_dirs or CONFIG_DIR
    folders = [folders] if isinstance(folders, Path) else list(folders)
    configs = []
    with composing(folders):
        for trial in trials:
            try:
                configs.append(compose(config_name, overrides=trial))
            except Exception as error:  # noqa: BLE001 - reworded below
                raise _override_error(error, trial, config_name) from None
    return configs


def _first_value(override) -> str:
    if not override.is_sweep_override():
        return override.input_line
    first = next(iter(override.sweep_string_iterator()))
    return f"{override.get_key_element()}={first}"


#: OmegaConf's names of the types a structured config (a Hydra plugin's) converts values to
_TYPE_NAMES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false"}


def _override_error(error: Exception, trial: list[str], config_name: str) -> ConfigError:
    text = str(error)
    match = re.search(r"Could not (?:override|append to|delete from) '([^']+)'", text)
    if match is None:
        match = re.search(r"Key '([^']+)' is not in struct", text)
    if match is None:
        if (present := re.search(r"An item is already at '([^']+)'", text)) is not None:
            key = present.group(1)
            return ConfigError(f"+{key}: {key} is a key already; allowed: {key}=… (without +)")
        merging = re.match(r"Error merging override (\S+?)=(.*)", text.strip())
        cause = str(error.__cause__ or "").strip().splitlines()
        if merging is not None and cause:  # a value of the wrong type (n_jobs=abc): say why
            kind = re.search(r"converted to (\w+)", cause[0])
            kind = kind.group(1) if kind is not None else ""
            allowed = _TYPE_NAMES.get(kind, f"a value of the type {merging.group(1)} takes")
            return ConfigError(
                f"{merging.group(1)}={merging.group(2)}: {cause[0].rstrip('.')}; allowed: {allowed}"
            )
        return ConfigError(text.strip().splitlines()[0])
    key = match.group(1)
    parent, _, leaf = key.rpartition(".")
    rest = [t for t in trial if not t.lstrip("+").startswith(f"{key}=")]
    allowed = _keys_under(parent, rest, config_name)
    where = f"under {parent}" if parent else "at the top level"
    return ConfigError(
        f"{key}: no such key; allowed {where}: {', '.join(allowed) or 'none'} "
        f"(a new key needs +{key}=…)"
    )


def _keys_under(parent: str, trial: list[str], config_name: str) -> list[str]:
    from hydra import compose

    try:
        cfg = compose(config_name, overrides=trial)
    except Exception:  # noqa: BLE001 - another bad override: no list, the key is still named
        return []
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return sorted(str(k) for k in node) if isinstance(node, DictConfig) else []

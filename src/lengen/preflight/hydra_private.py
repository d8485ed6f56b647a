"""Every private Hydra name the pre-check uses, in one place, each with the reason.

The pre-check refuses a command line before Hydra writes anything, and Hydra's main creates the
run directory and its log before it composes the config; so lengen reads the command line,
composes the config and lists a sweep's jobs itself, exactly as Hydra will. Hydra 1.3 has no
public API for three of these: its command-line parser, composing over a search path of
several folders (``--config-dir`` before the config root), and the basic sweeper's list of
jobs. They are named here only; pyproject.toml pins hydra-core to 1.3, and an upgrade that moves
one of them changes this file alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path


def arguments_parser():
    """Hydra's own argparse parser of an app's command line (``hydra._internal.utils``): its
    flags (``--config-dir``, ``--config-name``, ``-m``, ``--cfg``, …) read exactly as
    ``@hydra.main`` reads them, so no flag carries a command past the checks."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def split_sweep(overrides: list) -> list[list[list[str]]]:
    """The jobs of a -m sweep in batches, each job its list of overrides, as Hydra's basic
    sweeper makes them (``BasicSweeper.split_arguments``: the cartesian product of every
    a,b,c, in its order) from parsed overrides."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper.split_arguments(overrides, None)


@contextlib.contextmanager
def composing(config_dirs: Sequence[Path]):
    """Hydra's ``initialize_config_dir`` over several folders, searched in order (train.py's
    ``--config-dir`` folder is searched before the config root, as Hydra does): the public
    ``initialize_config_dir`` takes one folder, so the search path is built with
    ``hydra._internal`` (``create_config_search_path``, ``Hydra.create_main_hydra2``), and
    Hydra's global state is saved and restored around it as ``hydra.initialize`` does."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.initialize import get_gh_backup, restore_gh_from_backup
    from hydra.version import setbase

    backup = get_gh_backup()
    setbase("1.3")
    search_path = create_config_search_path(str(config_dirs[-1]))
    for folder in reversed(config_dirs[:-1]):
        search_path.prepend(provider="command-line", path=f"file://{folder}")
    Hydra.create_main_hydra2(task_name="app", config_search_path=search_path)
    try:
        yield
    finally:
        restore_gh_from_backup(backup)

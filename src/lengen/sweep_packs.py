"""Packs in a ``-m`` sweep: which of its runs train together in one process, and how a pack
travels through Hydra's launchers as one job (``hydra.sweeper.pack``; docs/scaling.md "Packs").

The engine that trains a pack is ``lengen.pack`` (``train_pack``); this module is the sweep's
side of it, torch-free, used by lengen's sweeper (``hydra_plugins.lengen_sweeper``), the
pre-check (``lengen.preflight.packs``) and a pack's job (``lengen.cli.train_main``):

* **Grouping** (``group_jobs``). Jobs whose composed configs have the same
  ``lengen.packable.pack_signature`` (equal except for ``PACKABLE_KEYS``: the seeds) share packs of
  at most ``hydra.sweeper.pack`` members, in sweep order: a group's jobs fill its first pack,
  then its next; packs are ordered by their first member's place in the sweep. A job alone in
  its group runs as today, a single run.
* **One job per pack** (``pack_override``). The sweeper hands the launcher, for each pack, the
  first member's overrides plus one more, ``hydra.sweeper.pack_members='<JSON>'``: a list with
  one entry per member, ``{"values": {<packable key>: <value>}, "subdir": <folder>}``. Every
  launcher (basic, joblib, submitit: one pack, one SLURM array task) launches it as one job;
  the job (``train_main``) sees the key, makes each member's config (a copy of its composed
  config with the member's values; ``member_configs``) and run directory (``member_dirs``), and
  calls ``train_pack``.
* **The members' folders** are the folders their solo jobs would get: ``subdir`` is
  ``hydra.sweep.subdir`` resolved, by the sweeper, on the member's own sweep config (its
  overrides, its job number in the unpacked sweep), as Hydra resolves it for a solo job; so
  ``load_sweep``, aggregation and ``resume=auto`` see no difference, and a pack sweep run again
  with ``resume=auto`` finds its members where they were.
* **Refusals** (``pack_refusal_line``), up front: a group of two or more jobs whose encoding,
  model or trainer cannot train in a pack refuses the sweep (the pre-check, before Hydra writes
  anything; exit 2) with ``lengen.packable.pack_refusal``'s line: no silent fallback to runs one
  after another.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from lengen.checks import ConfigError

#: the most members per pack (configs/hydra/sweeper/lengen.yaml; 1: no packs)
PACK_KEY = "hydra.sweeper.pack"
#: the key that carries a pack's members to its job (set by the sweeper, never by the user)
MEMBERS_KEY = "hydra.sweeper.pack_members"


def pack_size(value, given: str | None = None) -> int:
    """``hydra.sweeper.pack`` -> an int >= 1, else ConfigError naming the key."""
    shown = value if given is None else given
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"{PACK_KEY}={shown}: allowed: an integer >= 1, the most runs per pack "
            f"(1, the default: no packs)"
        )
    return value


def group_jobs(configs: Sequence[DictConfig], pack: int) -> list[list[int]]:
    """The sweep's jobs (their composed configs, in sweep order) -> the launcher's jobs, each the
    indices of its members: packs of at most ``pack`` jobs of equal ``pack_signature``, ordered by
    their first member; a job alone in its pack is a single run. ``pack`` 1: every job alone."""
    if pack <= 1:
        return [[index] for index in range(len(configs))]
    from lengen.packable import pack_signature

    open_packs: dict[str, list[int]] = {}  # signature -> the pack that group is filling
    packs: list[list[int]] = []
    for index, cfg in enumerate(configs):
        signature = pack_signature(cfg)
        current = open_packs.get(signature)
        if current is None or len(current) >= pack:
            current = []
            open_packs[signature] = current
            packs.append(current)
        current.append(index)
    return packs


def pack_refusal_line(
    packs: Sequence[Sequence[int]], configs: Sequence[DictConfig], subdirs: Sequence[str]
) -> str | None:
    """Why the sweep's packs cannot train (one line naming the key), or None: a member that
    cannot train in a pack (``lengen.packable.pack_refusal``), or two members of one pack that would
    write one run directory (the same values given twice)."""
    from lengen.packable import pack_refusal

    for members in packs:
        if len(members) < 2:
            continue
        for index in members:
            if (reason := pack_refusal(configs[index])) is not None:
                return reason
        seen: dict[str, int] = {}
        for index in members:
            if subdirs[index] in seen:
                return (
                    f"{PACK_KEY}: two runs of one pack would write one run directory "
                    f"({subdirs[index]}: the same values given twice); allowed: each swept "
                    f"value once"
                )
            seen[subdirs[index]] = index
    return None


def member_values(cfg: DictConfig) -> dict:
    """The values of ``lengen.packable.PACKABLE_KEYS`` a config trains with (resolved)."""
    from lengen.packable import PACKABLE_KEYS

    values = {}
    for key in PACKABLE_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        values[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value  # fmt: skip
    return values


def sweep_subdir(cfg: DictConfig, job_num: int) -> str:
    """``hydra.sweep.subdir`` of a job's composed sweep config (with ``hydra``), resolved as
    Hydra resolves it for the job numbered ``job_num`` of the unpacked sweep. Raises
    ConfigError where a pack's members cannot have the folders their solo jobs would: a
    ``hydra.sweep.subdir`` naming the launcher's job id."""
    raw = OmegaConf.to_container(cfg.hydra.sweep, resolve=False).get("subdir")
    if "job.id" in str(raw):
        raise ConfigError(
            f"hydra.sweep.subdir={raw}: names hydra.job.id, which a pack's runs do not have "
            f"apart; allowed: {PACK_KEY}=1, or a subdir without hydra.job.id"
        )
    cfg = OmegaConf.create(cfg)  # a copy, to number it
    with open_dict(cfg):
        cfg.hydra.job.num = job_num
    return str(OmegaConf.select(cfg, "hydra.sweep.subdir"))


def pack_override(members: Sequence[dict]) -> str:
    """The override that carries a pack's members ({"values", "subdir"} each) to its job:
    readable JSON in Hydra's single quotes. Raises ConfigError for a value Hydra would not read
    back as written (a quote, a backslash or an interpolation)."""
    text = json.dumps(list(members), separators=(",", ":"))
    if any(bad in text for bad in ("'", "\\", "${")):
        raise ConfigError(
            f"{PACK_KEY}: a pack's values or folder names hold a quote, a backslash or ${{…}} "
            f"({text[:120]}); allowed: {PACK_KEY}=1 for this sweep"
        )
    return f"{MEMBERS_KEY}='{text}'"


def pack_members(hydra: DictConfig) -> list[dict] | None:
    """A job's members from its ``hydra`` node (``pack_override``), or None for a single run."""
    sweeper = hydra.get("sweeper") or {}
    text = sweeper.get("pack_members") if hasattr(sweeper, "get") else None
    if not text:
        return None
    members = json.loads(text)
    return members if isinstance(members, list) and members else None


def member_configs(cfg: DictConfig, members: Sequence[dict]) -> list[DictConfig]:
    """The members' configs: copies of the job's composed config (its first member's) with each
    member's packable values. Raises ConfigError where a copy would not pack with the first
    (a sweep whose jobs were grouped by another lengen)."""
    from lengen.packable import pack_signature

    configs = []
    for member in members:
        copy = OmegaConf.create(cfg)  # a deep copy: interpolations kept, flags too
        with open_dict(copy):
            for key, value in member["values"].items():
                OmegaConf.update(copy, key, value, merge=False)
        configs.append(copy)
    first = pack_signature(configs[0])
    for member, copy in zip(members, configs, strict=True):
        if pack_signature(copy) != first:
            raise ConfigError(
                f"{MEMBERS_KEY}: member {member['subdir']} does not pack with "
                f"{members[0]['subdir']}; allowed: the sweeper's own packs ({PACK_KEY})"
            )
    return configs


def member_dirs(hydra: DictConfig, members: Sequence[dict]) -> list[Path]:
    """The members' run directories: ``hydra.sweep.dir`` / each one's subdir, absolute as Hydra
    makes a job's ``hydra.runtime.output_dir``."""
    return [Path(str(hydra.sweep.dir), member["subdir"]).absolute() for member in members]


def plan_packs(
    jobs: Sequence[Sequence[str]],
    load: Callable[[Sequence[str]], DictConfig],
    pack: int,
) -> tuple[list[list[str]], list[int]]:
    """The sweep's jobs -> (the launcher's jobs, each one's member count): every job composed by
    ``load`` (its sweep config, with ``hydra``) and grouped (``group_jobs``); a pack becomes its
    first member's overrides plus ``pack_override``. Raises ConfigError with the first refusal
    (``pack_refusal_line``, ``sweep_subdir``, ``pack_override``)."""
    if pack <= 1 or len(jobs) < 2:
        return [list(job) for job in jobs], [1] * len(jobs)
    configs = [load(job) for job in jobs]
    packs = group_jobs(configs, pack)
    if all(len(members) == 1 for members in packs):
        return [list(job) for job in jobs], [1] * len(jobs)
    subdirs = [sweep_subdir(cfg, num) for num, cfg in enumerate(configs)]
    if (reason := pack_refusal_line(packs, configs, subdirs)) is not None:
        raise ConfigError(reason)
    launched, sizes = [], []
    for members in packs:
        job = list(jobs[members[0]])
        if len(members) > 1:
            entries = [{"values": member_values(configs[i]), "subdir": subdirs[i]} for i in members]
            job.append(pack_override(entries))
        launched.append(job)
        sizes.append(len(members))
    return launched, sizes


def plan_line(runs: int, sizes: Sequence[int]) -> str:
    """``16 runs in 2 packs``, ``10 runs in 2 packs and 2 single runs``, ``3 runs``."""
    packs = sum(1 for size in sizes if size > 1)
    singles = sum(1 for size in sizes if size == 1)
    line = f"{runs} run{'s' * (runs != 1)}"
    if packs:
        line += f" in {packs} pack{'s' * (packs != 1)}"
        if singles:
            line += f" and {singles} single run{'s' * (singles != 1)}"
    return line

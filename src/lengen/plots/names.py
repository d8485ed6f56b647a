"""What a sweep figure calls each configuration: the settings that set it apart from the others
in the same panel (summary.csv's ``settings``), short keys, one of several keys that always
change together, cut at ``NAME_LIMIT``; its mixers, where settings name them, as the mixers'
configs name them for figures (``GLA · nope``: ``mixer_names``); ``plot.py --labels`` renames
any of them. Tables keep the settings as written (summary.md): only figures shorten."""

from __future__ import annotations

#: a line's automatic name is cut here (the legend and the heatmap's rows stay readable);
#: ``plot.py --labels`` renames any line, summary.csv has the full settings by config_hash
NAME_LIMIT = 48
#: config key prefixes dropped from a short name where the rest of the key is unambiguous, in
#: the order a name lists keys and keeps one of several that always change together
_PREFIXES = ("sweep", "pe.", "model.", "data.task.", "data.", "trainer.", "optim.", "eval.")


def _parse_settings(settings: str) -> dict[str, str]:
    """summary.csv's ``settings`` ("model.d_model=64, pe.base=500") -> {key: value}."""
    import re

    if not settings:
        return {}
    return dict(part.split("=", 1) for part in re.split(r", (?=[\w.\-]+=)", settings))


def _short_key(key: str) -> str:
    for prefix in _PREFIXES:
        if key.startswith(prefix) and key != prefix:
            return key[len(prefix) :]
    return key


def _priority(key: str) -> tuple[int, str]:
    ranks = [i for i, prefix in enumerate(_PREFIXES) if key.startswith(prefix)]
    return (ranks[0] if ranks else len(_PREFIXES), key)


def _redundant(configs: list[dict[str, str]]) -> set[str]:
    """Keys that change together with a key listed before them (``_priority``) across
    ``configs``: each value of one goes with one value of the other, both ways (the steps and
    the learning rate of a sweep that scaled both). Such a key adds nothing to a name."""
    keys = sorted({key for config in configs for key in config}, key=_priority)
    dropped: set[str] = set()
    for index, key in enumerate(keys):
        for earlier in keys[:index]:
            if earlier in dropped:
                continue
            pairs = {(c.get(earlier), c.get(key)) for c in configs}
            if len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}):
                dropped.add(key)
                break
    return dropped


def line_names(rows: list[dict], renames: dict | None = None) -> dict[str, str]:
    """config_hash (10 digits) -> the name of its line: the PE, then in brackets the settings
    that set it apart within its table (task · model · training length), short: keys without
    their component prefix where unambiguous (``d_model=64``), and of keys that always change
    together only the first; cut to ``NAME_LIMIT`` characters (a short hash then keeps cut names
    apart). Mixer settings come first as the mixers name themselves (``mixer_names``).
    ``renames`` maps an automatic name, or a config hash, to the name to show instead
    (``plot.py --labels``)."""
    renames = renames or {}
    tables: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        table = tables.setdefault((row["task"], row["model"], row["train_len"]), {})
        table.setdefault(row["config_hash"], row)
    names = {}
    for members in tables.values():
        configs = {digest: _parse_settings(row.get("settings") or "") for digest, row in members.items()}  # fmt: skip
        names.update(mixer_names(members, configs, _table_names(members, configs)))
    return {
        digest: str(renames.get(name, renames.get(digest, name))) for digest, name in names.items()
    }


def _table_names(members: dict[str, dict], configs: dict[str, dict]) -> dict[str, str]:
    """The names of one table's configurations (``line_names``) from their settings."""
    dropped = _redundant(list(configs.values()))
    shown = {key for config in configs.values() for key in config} - dropped
    shorts = [_short_key(key) for key in shown]
    names = {}
    for digest, row in members.items():
        keys = sorted((k for k in configs[digest] if k in shown), key=_priority)
        settings = ", ".join(
            f"{_short_key(k) if shorts.count(_short_key(k)) == 1 else k}={configs[digest][k]}"
            for k in keys
        )
        name = str(row["pe"]) + (f" [{settings}]" if settings else "")
        if len(name) > NAME_LIMIT:
            name = f"{name[: NAME_LIMIT - 9]}… #{digest[:6]}"
        names[digest] = name
    return names


def _is_mixer_key(key: str) -> bool:
    return key in ("model.mixer", "model.mixers") or key.startswith("model.mixer.")


def _value(text: str):
    """A settings value as the aggregator wrote it (JSON, strings bare) -> the value."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def _mixer_entries(config: dict[str, str]) -> list | None:
    """The mixer entries one configuration's settings give (``model.mixer``'s one, or
    ``model.mixers``' list, each a name or a mapping with key ``mixer``); [] where its settings
    name no mixer; None where they do not say which (``model.mixer.negative_eigenvalues``
    without ``model.mixer.mixer``: every arm's mixer the same) or say it twice."""
    keys = {key: _value(value) for key, value in config.items() if _is_mixer_key(key)}
    if not keys:
        return []
    if "model.mixers" in keys:
        entries = keys.pop("model.mixers")
        return entries if isinstance(entries, list) and entries and not keys else None
    if "model.mixer" in keys:
        return [keys["model.mixer"]] if len(keys) == 1 else None
    options = {key.removeprefix("model.mixer."): value for key, value in keys.items()}
    return [options] if isinstance(options.get("mixer"), str) else None


def _mixer_label(entries: list) -> str | None:
    """A configuration's mixers as figures name them: each entry's ``mixer_display`` (the
    mixer's own config says its name), a layer list run-length encoded (``3× Gated DeltaNet
    (neg. eig.) + attention``); "" for no mixer settings, None where an entry has no display
    name (not a mixer of configs/model/mixer, or options it lacks)."""
    from itertools import groupby

    from lengen.model.mixers.config.base import mixer_display

    labels = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, (str, dict)):
            return None
        try:
            labels.append(mixer_display(entry, f"model.mixers.{index}"))
        except ValueError:
            return None
    runs = [(label, len(list(layers))) for label, layers in groupby(labels)]  # equal neighbours
    return " + ".join(label if count == 1 else f"{count}× {label}" for label, count in runs)


def mixer_names(
    members: dict[str, dict], configs: dict[str, dict], long: dict[str, str]
) -> dict[str, str]:
    """One table's names where settings name mixers: ``<mixers> · <PE> [other settings]``
    (``_mixer_label``; the other settings named as ``_table_names`` names them among the
    table's), the PE's name alone for a configuration without mixer settings. A configuration
    whose mixers have no display name keeps its ``long`` name (``_table_names``), and so do
    configurations whose short names would be equal: two lines never share a name. A table
    without mixer settings: ``long`` as it is."""
    mixers = {digest: _mixer_entries(config) for digest, config in configs.items()}
    if not any(entries != [] for entries in mixers.values()):
        return long
    others = {d: {k: v for k, v in c.items() if not _is_mixer_key(k)} for d, c in configs.items()}
    rest = _table_names(members, others)
    names = {}
    for digest, entries in mixers.items():
        label = None if entries is None else _mixer_label(entries)
        if label is None:
            names[digest] = long[digest]
        else:
            names[digest] = f"{label} · {rest[digest]}" if label else rest[digest]
    while clashing := [d for d, n in names.items() if n != long[d] and _count(names, n) > 1]:
        for digest in clashing:
            names[digest] = long[digest]
    return names


def _count(names: dict[str, str], name: str) -> int:
    return sum(other == name for other in names.values())

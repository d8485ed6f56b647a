"""What a sweep figure calls each configuration: the settings that set it apart from the others
in the same panel (summary.csv's ``settings``), short keys, one of several keys that always
change together, cut at ``NAME_LIMIT``; ``plot.py --labels`` renames any of them."""

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
    apart). ``renames`` maps an automatic name, or a config hash, to the name to show instead
    (``plot.py --labels``)."""
    renames = renames or {}
    tables: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        table = tables.setdefault((row["task"], row["model"], row["train_len"]), {})
        table.setdefault(row["config_hash"], row)
    names = {}
    for members in tables.values():
        configs = {digest: _parse_settings(row.get("settings") or "") for digest, row in members.items()}  # fmt: skip
        dropped = _redundant(list(configs.values()))
        shown = {key for config in configs.values() for key in config} - dropped
        shorts = [_short_key(key) for key in shown]
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
    return {
        digest: str(renames.get(name, renames.get(digest, name))) for digest, name in names.items()
    }

"""The shape of the results.json sections that the sweep diagnostics read into frames
(``lengen.aggregate.diagnostics``): a part of the wrong kind deep inside one (an accuracy list
that is NaN, a layer that is a string) ended ``plot.py`` in a TypeError traceback after some
figures were written (PL05b). ``lengen.aggregate.load`` fails such a run with the part named,
as it does for a section that is no object (AN04). No torch here.

The shapes are those ``lengen.evaluation.by_position.position_section`` and
``lengen.evaluation.attention`` write; a value may be null where a run never scored it.
"""

from __future__ import annotations

import math


def _number(value) -> bool:
    """A value a frame may hold: a finite or non-finite number, or null (never scored)."""
    if value is None:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value) -> str:
    return "NaN" if isinstance(value, float) and math.isnan(value) else type(value).__name__


def _length_entry_problem(here: str, length, entry) -> str | None:
    """A section's per-length entry: its key a whole number, its value an object."""
    if not str(length).isdigit():
        return f"{here}: the length is no whole number"
    if not isinstance(entry, dict):
        return f"{here} is {_kind(entry)}, not an object"
    return None


def position_problem(section: dict) -> str | None:
    """``accuracy_by_answer_position`` -> the first part of the wrong kind, or None:
    protocols {protocol: {length: {bin_width: int >= 1, accuracy: [number | null]}}}."""
    protocols = section.get("protocols", {})
    if not isinstance(protocols, dict):
        return f"protocols is {_kind(protocols)}, not an object"
    for protocol, by_length in protocols.items():
        where = f"protocols.{protocol}"
        if not isinstance(by_length, dict):
            return f"{where} is {_kind(by_length)}, not an object"
        for length, entry in by_length.items():
            here = f'{where}["{length}"]'
            if problem := _length_entry_problem(here, length, entry):
                return problem
            width = entry.get("bin_width")
            if not isinstance(width, int) or isinstance(width, bool) or width < 1:
                return f"{here}.bin_width={width!r} is no whole number >= 1"
            accuracy = entry.get("accuracy")
            if not isinstance(accuracy, list):
                return f"{here}.accuracy is {_kind(accuracy)}, not a list"
            if not all(_number(value) for value in accuracy):
                return f"{here}.accuracy holds a value that is no number"
    return None


def attention_problem(section: dict) -> str | None:
    """``attention_diagnostics`` -> the first part of the wrong kind, or None: lengths
    {length: {tokens, sink_rate?, layers: {layer: {statistic: [number | [number]] per head}}}}."""
    lengths = section.get("lengths", {})
    if not isinstance(lengths, dict):
        return f"lengths is {_kind(lengths)}, not an object"
    if not isinstance(section.get("buckets", []), list):
        return f"buckets is {_kind(section['buckets'])}, not a list"
    for length, entry in lengths.items():
        here = f'lengths["{length}"]'
        if problem := _length_entry_problem(here, length, entry):
            return problem
        for key in ("tokens", "sink_rate"):  # tokens: always written; sink_rate: may be absent
            if not _number(entry.get(key)) or (key == "tokens" and entry.get(key) is None):
                return f"{here}.{key} is {_kind(entry.get(key))}, not a number"
        layers = entry.get("layers")
        if not isinstance(layers, dict):
            return f"{here}.layers is {_kind(layers)}, not an object"
        for layer, stats in layers.items():
            if not isinstance(stats, dict):
                return f"{here}.layers.{layer} is {_kind(stats)}, not an object"
            for statistic, per_head in stats.items():
                part = f"{here}.layers.{layer}.{statistic}"
                if not isinstance(per_head, list):
                    return f"{part} is {_kind(per_head)}, not a list"
                for value in per_head:  # bucket_mass: one list of masses per head
                    values = value if isinstance(value, list) else [value]
                    if not all(_number(v) for v in values):
                        return f"{part} holds a value that is no number"
    return None


#: section -> its shape check (run after the section is known to be an object)
SHAPES = {
    "accuracy_by_answer_position": position_problem,
    "attention_diagnostics": attention_problem,
}


def section_problems(results: dict, name: str) -> list[str]:
    """One reason per section of ``results`` (file ``name``) with a part of the wrong kind."""
    problems = []
    for key, check in SHAPES.items():
        section = results.get(key)
        if isinstance(section, dict) and (problem := check(section)):
            problems.append(f"{name}: {key}.{problem}")
    return problems

"""Regenerate the PE and task options in docs/config.md from where each is described.

python scripts/gen_config_docs.py [--check]

Rewrites two blocks of docs/config.md:

* between `<!-- pe-options:begin -->` and `<!-- pe-options:end -->`: one table row per key of the
  `pe:` block of configs/train.yaml (options every encoding takes) and per key of each
  configs/pe/<name>.yaml, with its default as the yaml writes it and the yaml's comment for it
  (the comment at the end of its line, after the comment lines directly above it). The comment
  lines at the top of a yaml describe the file, not a key.
* between `<!-- task-options:begin -->` and `<!-- task-options:end -->`: one row per option of
  the task of each configs/data/<name>.yaml (the fields of its task class's config, ``Options``),
  with the default the yaml gives it and the field's `#:` comment in the config class (the
  nearest class of its hierarchy that comments it).

* between `<!-- recipes:begin -->` and `<!-- recipes:end -->` (inside the `experiment` row of
  the groups table, on one line): every configs/experiment/<name>.yaml by name; likewise
  `<!-- tasks:begin -->` / `<!-- grids:begin -->` in the `data` row: every task yaml whose task
  has one position axis, and those with more (grids, volumes).

`--check` changes nothing and exits 1 when docs/config.md is out of date. So the yaml comments
are the one place a PE option is described, and the config class the one place a task option
is; an option without a description is an error, naming the file and the key.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG_MD = ROOT / "docs" / "config.md"
BEGIN = "<!-- pe-options:begin -->"
END = "<!-- pe-options:end -->"
TASK_BEGIN = "<!-- task-options:begin -->"
TASK_END = "<!-- task-options:end -->"
RECIPES_BEGIN = "<!-- recipes:begin -->"
RECIPES_END = "<!-- recipes:end -->"
TASKS_BEGIN, TASKS_END = "<!-- tasks:begin -->", "<!-- tasks:end -->"
GRIDS_BEGIN, GRIDS_END = "<!-- grids:begin -->", "<!-- grids:end -->"
INTERNAL = {"_target_", "_partial_", "name"}  # wiring, not options a user sets
COMMAND = "python scripts/gen_config_docs.py"

KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):(?:\s(?P<rest>.*))?$")


class Option(NamedTuple):
    key: str  # dotted, relative to the parsed block (e.g. "base", "scaling_factor")
    default: str  # the value as the yaml writes it
    comment: str


def split_comment(text: str) -> tuple[str, str]:
    """'value  # comment' -> ('value', 'comment'); a '#' inside quotes is part of the value."""
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), ""


def parse_options(text: str, source: str) -> list[Option]:
    """The leaf keys of a yaml mapping (scalars and flow values), each with its comment."""
    options: list[Option] = []
    parents: list[tuple[int, str]] = []  # (indent, key) of the open mappings
    above: list[str] = []  # comment lines directly above the current line
    seen_key = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped == "---":
            above = []
            continue
        if stripped.startswith("#"):
            if seen_key and not stripped.startswith("# @package"):
                above.append(stripped.lstrip("#").strip())
            continue
        match = KEY_LINE.match(line)
        if not match:
            raise ValueError(f"{source}:{number}: not a `key: value` line: {line.strip()!r}")
        seen_key = True
        indent = len(match["indent"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        key = ".".join([*(name for _, name in parents), match["key"]])
        value, inline = split_comment(match["rest"] or "")
        comment = " ".join([*above, inline]).strip()
        above = []
        if not value:  # a nested mapping opens
            parents.append((indent, match["key"]))
            continue
        if match["key"] in INTERNAL and not parents:
            continue
        options.append(Option(key, value, comment))
    return options


def leaf_keys(node: dict, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, value in node.items():
        if isinstance(value, dict):
            keys |= leaf_keys(value, f"{prefix}{key}.")
        elif not (key in INTERNAL and not prefix):
            keys.add(f"{prefix}{key}")
    return keys


def checked_options(text: str, source: str) -> list[Option]:
    """parse_options, cross-checked against a real yaml parser; every key needs a comment."""
    options = parse_options(text, source)
    loaded = yaml.safe_load(text) or {}
    if {option.key for option in options} != leaf_keys(loaded):
        raise ValueError(
            f"{source}: the keys read line by line ({sorted(o.key for o in options)}) differ "
            f"from the yaml's ({sorted(leaf_keys(loaded))}); keep one `key: value` per line"
        )
    for option in options:
        if not option.comment:
            raise ValueError(
                f"{source}: key `{option.key}` has no comment; add one (at the end of its "
                f"line, or on the lines directly above it) saying what it does"
            )
    return options


def block_of(text: str, key: str) -> str:
    """The lines of top-level mapping `key:` of a yaml file, dedented."""
    lines = text.splitlines()
    start = lines.index(f"{key}:") + 1
    body = []
    for line in lines[start:]:
        if line and not line[0].isspace():  # the next top-level key or comment
            break
        body.append(line)
    indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
    return "\n".join(line[indent:] for line in body)


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_block(root: Path = ROOT) -> str:
    """The generated text between the markers (markers excluded)."""
    configs = root / "configs"
    shared = checked_options(
        block_of((configs / "train.yaml").read_text(), "pe"), "configs/train.yaml (pe:)"
    )
    lines = [
        f"<!-- Generated by {COMMAND} from the comments in configs/train.yaml (pe:) and "
        "configs/pe/*.yaml: edit those, then run it. -->",
        "Shared by every encoding (`configs/train.yaml`, under `pe:`; each `pe/<name>.yaml` "
        "merges on top):",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *(f"| `pe.{o.key}` | {cell(o.default)} | {cell(o.comment)} |" for o in shared),
        "",
        "Per encoding (`configs/pe/<name>.yaml`; formulas, sources and deviations in "
        "[pe.md](pe.md)):",
        "",
        "| `pe=` | key | default | meaning |",
        "|---|---|---|---|",
    ]
    for path in sorted((configs / "pe").glob("*.yaml")):
        options = checked_options(path.read_text(), f"configs/pe/{path.name}")
        if not options:
            lines.append(f"| `{path.stem}` | — | | no options of its own |")
        lines += [
            f"| `{path.stem}` | `pe.{o.key}` | {cell(o.default)} | {cell(o.comment)} |"
            for o in options
        ]
    return "\n".join(lines)


# -- task options: from the task classes' configs --------------------------------------------
def field_comments(cls: type) -> dict[str, str]:
    """A config class's ``#:`` comment of each field, from the nearest class of its hierarchy
    that comments it (a subclass that only changes a default keeps its parent's words)."""
    import inspect

    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # the base first: a subclass's comment wins
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith("#:"):
                above.append(stripped[2:].strip())
                continue
            match = re.match(r"(\w+)\s*:[^=]*=", stripped)
            if match and above:
                comments[match[1]] = " ".join(above)
            above = []
    return comments


def shown(value) -> str:
    """A default as a yaml writes it (true, null, 0.25, index)."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text.removesuffix("...").strip()


def render_task_block(root: Path = ROOT) -> str:
    """The generated task rows between the task markers (markers excluded)."""
    import dataclasses

    from hydra.utils import get_class

    lines = [
        f"<!-- Generated by {COMMAND} from the task config classes (their `#:` comments) and "
        "configs/data/*.yaml: edit those, then run it. -->",
        "| `data=` | key | default | meaning |",
        "|---|---|---|---|",
    ]
    for path in sorted((root / "configs" / "data").glob("*.yaml")):
        task = (yaml.safe_load(path.read_text()) or {}).get("task")
        if not isinstance(task, dict) or "_target_" not in task:
            continue  # not a task (text)
        config = get_class(task["_target_"]).Options
        comments = field_comments(config)
        fields = [field.name for field in dataclasses.fields(config)]
        if not fields:
            lines.append(f"| `{path.stem}` | — | | no options of its own |")
        for name in fields:
            if not comments.get(name):
                raise ValueError(
                    f"{config.__module__}.{config.__name__}: option `{name}` has no `#:` "
                    f"comment; add one on the lines directly above it saying what it does"
                )
            default = task.get(name, getattr(config, name))
            lines.append(
                f"| `{path.stem}` | `data.task.{name}` | {cell(shown(default))} | "
                f"{cell(comments[name])} |"
            )
    return "\n".join(lines)


# -- recipes: the experiment group's yamls ----------------------------------------------------
def render_recipes(root: Path = ROOT) -> str:
    """Every recipe's name, as the groups table's `experiment` cell lists them (one line: the
    markers sit inside a table row)."""
    names = sorted(path.stem for path in (root / "configs" / "experiment").glob("*.yaml"))
    return ", ".join(f"`{name}`" for name in names)


def render_task_names(root: Path = ROOT, *, grids: bool = False) -> str:
    """The `data` row's lists: the task yamls whose task has one position axis (sequences), or
    with ``grids`` those with more; text (no task) in neither."""
    from hydra.utils import get_class

    names = []
    for path in sorted((root / "configs" / "data").glob("*.yaml")):
        task = (yaml.safe_load(path.read_text()) or {}).get("task")
        is_task = isinstance(task, dict) and "_target_" in task
        if is_task and (get_class(task["_target_"]).axes > 1) == grids:
            names.append(path.stem)
    return "`" + " ".join(names) + "`"


def updated(
    doc: str, block: str, begin: str = BEGIN, end: str = END, *, inline: bool = False
) -> str:
    """doc with the text between the markers (the PE options' by default) replaced by block;
    ``inline``: on the markers' line (a table cell), not on lines of its own."""
    if doc.count(begin) != 1 or doc.count(end) != 1 or doc.index(begin) > doc.index(end):
        raise ValueError(f"docs/config.md must hold `{begin}` once, then `{end}` once")
    head, rest = doc.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}{block}{end}{tail}" if inline else f"{head}{begin}\n{block}\n{end}{tail}"


def rendered(doc: str, root: Path = ROOT) -> str:
    """doc with every generated block rewritten."""
    doc = updated(doc, render_block(root))
    doc = updated(doc, render_task_block(root), TASK_BEGIN, TASK_END)
    doc = updated(doc, render_recipes(root), RECIPES_BEGIN, RECIPES_END, inline=True)
    doc = updated(doc, render_task_names(root), TASKS_BEGIN, TASKS_END, inline=True)
    grids = render_task_names(root, grids=True)
    return updated(doc, grids, GRIDS_BEGIN, GRIDS_END, inline=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if docs/config.md is out of date"
    )
    args = parser.parse_args(argv)
    try:
        doc = CONFIG_MD.read_text()
        new = rendered(doc)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if new == doc:
        print("docs/config.md is up to date")
        return 0
    if args.check:
        print(f"docs/config.md is out of date: run `{COMMAND}`", file=sys.stderr)
        return 1
    CONFIG_MD.write_text(new)
    print("docs/config.md: PE and task options and the recipe list rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())

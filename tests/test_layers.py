"""The import graph of src/lengen: layers that import only from below, and no circles.

Every import counts, including the ones inside functions (a lazy import still ties two files
together). ``LAYERS`` is the order README.md's Layout section lists, lowest first; a new module
must be given its place here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "lengen"

#: lowest first; a unit is a top-level module or subpackage of lengen. Units of one layer do not
#: import each other; a unit imports only from layers below it.
LAYERS = (
    # below results, which writes atomically and records provenance; the errors every layer
    # raises; the process's signals and output streams
    ("atomic", "provenance", "errors", "process", "logs"),  # logs: which records reach output
    (
        "estimate_entries",
        "estimate_curve",
    ),  # which calibration entries are sound (finite, plausible)
    # section_shapes: the shape of results.json sections, read by aggregate and plots alike
    ("checks", "results", "measure", "caches", "lazy", "identity", "section_shapes"),
    # a run's expected time from the machine's calibration, keyed by mechanism (identity's
    # defaults say which model options are off)
    ("estimate",),
    # an evaluation too long to start; the "still running" line of a long evaluation
    ("estimate_bound", "heartbeat"),
    ("progress",),
    ("schema",),  # the typed configs' rules, from checks' positive_int
    ("options",),  # the run's typed configs, on schema
    ("pe", "config", "loggers"),  # loggers: on the typed logger configs of options
    ("model",),  # model/config.py: the model's typed configs, which the data layer reads too
    ("data", "plots"),
    ("evaluation", "build", "checkpoints"),
    ("lit", "rundir", "packable"),  # packable: which configs share a pack (the pre-check's)
    # a sweep's jobs grouped into packs, and how a pack travels as one job; a sweep's time
    ("sweep_packs", "sweep_estimate"),
    ("preflight",),  # can this command line run? (above build and rundir, below the runs)
    ("train", "api"),
    ("pack",),  # many seeds in one process: run()'s writing and evaluation, per member
    ("reeval", "cli", "attention_maps", "aggregate"),
)
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The lengen modules ``name`` imports (the deepest module an import names), leaving out
    its own ancestor packages: Python has initialised them before ``name`` runs."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..pe import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def unit_of(name: str) -> str:
    return name.split(".")[1] if "." in name else ""  # "": the package's own __init__


def level_of(name: str) -> int:
    return LEVEL.get(unit_of(name), len(LAYERS))  # no layer: the test below names it


def test_every_module_has_a_layer():
    units = {unit_of(name) for name in MODULES} - {""}
    assert sorted(units - set(LEVEL)) == [], "give the new module a layer in LAYERS"
    assert sorted(set(LEVEL) - units) == [], "LAYERS names a module that no longer exists"


def test_no_import_runs_up_or_sideways():
    wrong = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in sorted(targets)
        if unit_of(name) and unit_of(target) != unit_of(name) and level_of(target) >= level_of(name)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_circle():
    state, path = {}, []  # state: 1 on the current path, 2 done

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (circle := visit(target)):
                return circle
        path.pop()
        state[name] = 2
        return None

    circles = [circle for name in MODULES if name not in state and (circle := visit(name))]
    assert circles == [], " -> ".join(circles[0]) if circles else ""


def test_the_checks_see_imports_inside_functions():
    # the tests above are only as good as this parse: these are imported inside functions only
    assert "lengen.checkpoints" in GRAPH["lengen.rundir"]
    assert {"lengen.plots", "lengen.loggers"} <= GRAPH["lengen.train"]


def test_the_readme_lists_the_layers_in_this_order():
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("src/lengen/  (layers") : readme.index("\nscripts/ ")]
    first = {}
    for unit in LEVEL:
        match = re.search(rf"(?<![\w/]){unit}(\.py|/)", block)
        if match is None:
            pytest.fail(f"README.md's Layout does not list {unit}")
        first[unit] = match.start()
    listed = sorted(LEVEL, key=first.get)
    assert [LEVEL[unit] for unit in listed] == sorted(LEVEL[unit] for unit in listed), listed

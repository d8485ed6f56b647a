"""The docs stay true to the configs: docs/config.md names every key a user can set (the default
config's and every group choice's leaf keys, ``_target_``, ``_partial_`` and the groups' ``name``
aside), its PE options are what scripts/gen_config_docs.py makes of the yaml comments, and every
relative link in README.md and docs/*.md points at a file and heading that exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from omegaconf import DictConfig

from helpers import CONFIG_DIR, ROOT, compose_train, yaml_choices

DOC = (ROOT / "docs" / "config.md").read_text()
INTERNAL = {"_target_", "_partial_", "name"}
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.fixture(scope="module")
def gen():
    path = ROOT / "scripts" / "gen_config_docs.py"
    spec = importlib.util.spec_from_file_location("gen_config_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leaf_keys(node: DictConfig, prefix: str = "") -> list[str]:
    keys = []
    for key in node:
        if key in INTERNAL:
            continue
        value = node._get_node(key)  # no interpolation needed to tell a leaf
        if isinstance(value, DictConfig):
            keys += leaf_keys(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def undocumented(*overrides: str) -> list[str]:
    cfg = compose_train(*overrides, fast=False)
    return [key for key in leaf_keys(cfg) if f"`{key}`" not in DOC]


def test_every_default_key_is_documented():
    assert undocumented() == []


@pytest.mark.parametrize(
    "choice",
    [
        f"{group}={name}"
        for group in ("pe", "model", "data", "trainer", "logger", "eval")
        for name in yaml_choices(group)
    ]
    + [f"experiment={name}" for name in yaml_choices("experiment")],
)
def test_every_group_choice_key_is_documented(choice):
    assert undocumented(choice) == []


def test_config_md_pe_options_are_generated_from_the_yamls(gen):
    assert gen.updated(DOC, gen.render_block()) == DOC, (
        "docs/config.md's PE options are out of date with configs/pe/*.yaml (or the pe: block "
        f"of configs/train.yaml): run `{gen.COMMAND}` and commit docs/config.md"
    )


@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_generated_pe_options_cover_every_key_of_the_yaml(gen, pe):
    block = gen.render_block()
    keys = leaf_keys(compose_train(f"pe={pe}", fast=False).pe, "pe.")
    shared_row, own_row = "\n| `{key}` |", "| `{pe}` | `{key}` |"
    missing = [
        key
        for key in keys
        if shared_row.format(key=key) not in block and own_row.format(pe=pe, key=key) not in block
    ]
    assert missing == []


@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_every_pe_yaml_key_has_a_comment(gen, pe):
    options = gen.checked_options((CONFIG_DIR / "pe" / f"{pe}.yaml").read_text(), pe)
    assert all(option.comment for option in options)


def test_generator_refuses_a_key_without_a_comment(gen):
    text = "# header, not a key's comment\n_target_: x.Y\nname: y\nscale: 1.0\n"
    with pytest.raises(ValueError, match="key `scale` has no comment"):
        gen.checked_options(text, "configs/pe/y.yaml")


def test_generator_reads_inline_and_preceding_comments(gen):
    text = "# header\n_target_: x.Y\nname: y\n# what it is:\n# two lines\nmode: a   # a | b\n"
    (option,) = gen.checked_options(text, "configs/pe/y.yaml")
    assert (option.key, option.default, option.comment) == (
        "mode",
        "a",
        "what it is: two lines a | b",
    )


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors, in_code = set(), False
    for line in path.read_text().splitlines():
        in_code ^= line.startswith("```")
        heading = re.match(r"#+ (.*)", line)
        if heading and not in_code:
            anchors.add(re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: path.name)
def test_relative_links_resolve(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"\w+:", target):
            continue
        path, _, anchor = target.partition("#")
        destination = page.parent / path if path else page
        if not destination.exists():
            broken.append(target)
            continue
        if anchor and destination.suffix == ".md" and anchor not in heading_anchors(destination):
            broken.append(target)
    assert broken == [], f"{page.name}: links to missing files or headings"


def test_the_notebook_session_in_analysis_md_gives_what_it_shows(monkeypatch):
    """docs/analysis.md's load_sweep session (shape, statuses, numbers) run as a doctest on the
    committed reference folder, so the doc cannot drift from what the code produces."""
    import doctest
    import re

    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / "analysis.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if ">>> " in b]
    session = next(b for b in blocks if "load_sweep(" in b)
    test = doctest.DocTestParser().get_doctest(session, {}, "analysis.md", "analysis.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} of {runner.tries} examples differ"


# -- the run folder names the docs state are the ones the config makes ---------------------------
#: placeholder in the docs -> the pattern of what the config writes there
PLACEHOLDERS = {
    "<date>": r"\d{4}-\d{2}-\d{2}",
    "<time>": r"\d{2}-\d{2}-\d{2}",
    "<task>": "copy",
    "<model>": "decoder",
    "<pe>": "rope",
    "<L>": "16",
    "<S>": "0",
    "<run id>": "[0-9a-f]{8}",
    "<nonce>": "[0-9a-f]{4}",
}


def documented_name(text: str, start: str) -> re.Pattern:
    """The first code span of ``text`` that begins with ``start``, placeholders as patterns."""
    span = re.search(rf"`({re.escape(start)}[^`]*)`", text).group(1).rstrip("/")
    pattern = re.escape(span)
    for placeholder, value in PLACEHOLDERS.items():
        pattern = pattern.replace(re.escape(placeholder), value)
    return re.compile(pattern)


def default_directories() -> tuple[str, str]:
    """hydra.run.dir and a sweep job's subdir of the default config, resolved."""
    import hydra.core.utils  # noqa: F401  (registers the ${now:} resolver)
    from hydra import compose, initialize_config_dir

    import lengen.config  # noqa: F401  (registers ${lengen_run_id:} and ${lengen_nonce:})

    with initialize_config_dir(str(CONFIG_DIR), version_base=None):
        cfg = compose("train", return_hydra_config=True)
        return str(cfg.hydra.run.dir), str(cfg.hydra.sweep.subdir)


def test_readme_names_the_default_run_folder_as_the_config_makes_it():
    run_dir, _ = default_directories()
    readme = (ROOT / "README.md").read_text()
    assert documented_name(readme, "results/runs/<date>").fullmatch(run_dir), run_dir


def test_cluster_doc_names_a_sweep_job_folder_as_the_config_makes_it():
    _, subdir = default_directories()
    cluster = (ROOT / "docs" / "cluster.md").read_text()
    assert documented_name(cluster, "<task>_<model>").fullmatch(subdir), subdir

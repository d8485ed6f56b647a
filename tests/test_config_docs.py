"""docs/config.md's task options are what scripts/gen_config_docs.py makes of the task config
classes: one row per option of each task yaml's task, its default and the field's ``#:`` comment
(the PE options' block: tests/test_docs.py)."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from helpers import ROOT


@pytest.fixture(scope="module")
def gen():
    path = ROOT / "scripts" / "gen_config_docs.py"
    spec = importlib.util.spec_from_file_location("gen_config_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_md_task_options_are_generated_from_the_task_configs(gen):
    doc = (ROOT / "docs" / "config.md").read_text()
    assert gen.rendered(doc) == doc, (
        "docs/config.md's task options are out of date with the task config classes (or "
        f"configs/data/*.yaml): run `{gen.COMMAND}` and commit docs/config.md"
    )


def test_a_field_takes_the_comment_of_the_nearest_class_that_comments_it(gen):
    from lengen.schema import Config, option

    @dataclasses.dataclass(frozen=True)
    class Parent(Config):
        #: what it is
        size: int = option(1)
        #: the parent's words
        mode: str = option("a")

    @dataclasses.dataclass(frozen=True)
    class Child(Parent):
        size: int = option(2)  # a default only: the parent's words stay
        #: the child's words
        mode: str = option("b")

    comments = gen.field_comments(Child)
    assert (comments["size"], comments["mode"]) == ("what it is", "the child's words")


def test_a_task_option_without_a_comment_is_refused_naming_it(gen, tmp_path, monkeypatch):
    (tmp_path / "configs" / "data").mkdir(parents=True)
    (tmp_path / "configs" / "data" / "bare.yaml").write_text(
        f"task:\n  _target_: {__name__}.Bare\n  size: 1\n"
    )
    with pytest.raises(ValueError, match=r"option `size` has no `#:` comment"):
        gen.render_task_block(tmp_path)


@dataclasses.dataclass(frozen=True)
class BareConfig:
    size: int = 1


class Bare:
    """A task whose config comments none of its options."""

    Options = BareConfig

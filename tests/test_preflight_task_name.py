"""lengen.preflight.components.check_task_name: a task option that makes the task another than
``data.name`` says is refused before the run, since results, run names and labels take the
yaml's name (issue #51 item 7: TK07, ``data=s5 data.task.group=a5`` trained A5 as s5)."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen import preflight
from lengen.errors import ConfigError


@pytest.mark.parametrize(("data", "group"), [("s5", "a5"), ("a5", "s5")])
def test_a_group_that_makes_another_task_is_refused_naming_the_option(data, group):
    cfg = compose_train(f"data={data}", f"data.task.group={group}")
    with pytest.raises(ConfigError) as refused:
        preflight.check_components(cfg)
    assert str(refused.value).startswith(
        f"data.task.group={group} makes the task {group}, but data.name is {data}"
    )
    assert f"allowed: data={group}" in str(refused.value)

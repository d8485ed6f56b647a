"""docs/config.md names every key a user can set: the default config's and every group
choice's leaf keys (``_target_``, ``_partial_`` and the groups' ``name`` aside)."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig

from helpers import CONFIG_DIR, compose_train, yaml_choices

DOC = (CONFIG_DIR.parent / "docs" / "config.md").read_text()
INTERNAL = {"_target_", "_partial_", "name"}


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

"""The extension table names RoPE's training-free arms (``pe.extension``, docs/pe.md) from the
overrides eval.py recorded, as it names PI / NTK / YaRN, and orders them after those."""

from __future__ import annotations

from lengen.aggregate.extension import method_name, method_order

SELF_EXTEND = ["pe.extension=self_extend", "pe.self_extend_group=4", "pe.self_extend_window=16"]


def test_an_arm_is_named_with_its_keys():
    assert method_name(SELF_EXTEND, "se") == (
        "Self-Extend, pe.self_extend_group=4, pe.self_extend_window=16"
    )


def test_a_leak_names_leaky_rerope():
    overrides = ["pe.extension=rerope", "pe.rerope_window=8", "pe.rerope_leak=4"]
    assert method_name(overrides, "leaky").startswith("Leaky ReRoPE, pe.rerope_window=8")


def test_arms_come_after_yarn_and_before_other_tags():
    yarn = method_order(["pe.scaling=yarn", "pe.scaling_factor=4"], "yarn4")
    arm = method_order(SELF_EXTEND, "se")
    other = method_order(["pe.log_length_scale=true"], "loglen")
    assert yarn < arm < other

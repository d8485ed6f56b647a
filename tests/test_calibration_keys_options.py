"""The calibration's mechanism key names the model's options that change a step's cost (mixers,
looped depth, Canon layers, the block options), and a default model's key is the one written
before those options existed (lengen.estimate.mechanism_key, issue #46 item 3)."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from helpers import compose_train
from lengen.estimate import MECHANISM_OPTIONS, Estimate, mechanism_key

MACHINE = "cpu · test CPU · 2 threads"
ROPE = "RoPE · DecoderOnly"


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("model.mixer=gla", "mixer=gla"),
        ("model.mixer=lstm", "mixer=lstm"),
        ("model.mixers=[gla,attention]", "mixers=[gla,attention]"),
        ("model.loops=2", "loops=2"),
        ("model.loop_rule=linear", "loop_rule=linear"),
        ("model.canon=ABCD", "canon=ABCD"),
        ("model.attn_gate=headwise", "attn_gate=headwise"),
        ("model.attn_sinks=true", "attn_sinks=true"),
        ("model.kv_bias=true", "kv_bias=true"),
        ("model.qk_norm=true", "qk_norm=true"),
        ("model.attn_fn=sigmoid", "attn_fn=sigmoid"),
    ],
)
def test_an_option_away_from_its_default_is_named_in_the_key(override, named):
    assert mechanism_key(compose_train("pe=rope", override)) == f"{ROPE} · {named}"


def test_every_option_of_the_key_is_tested_above():
    # a new option added to MECHANISM_OPTIONS needs its row in the test above
    assert len(MECHANISM_OPTIONS) == 10


def test_options_are_named_in_one_order_after_a_forced_kernel():
    cfg = compose_train("pe=alibi", "model.attention=flex", "model.qk_norm=true", "model.loops=3")
    assert mechanism_key(cfg) == "ALiBi · DecoderOnly · attention=flex · loops=3 · qk_norm=true"


def test_a_mixer_with_options_names_them():
    cfg = compose_train("pe=nope", "model.mixer={mixer:gated_deltanet,negative_eigenvalues:true}")
    key = mechanism_key(cfg)
    assert key == "NoPE · DecoderOnly · mixer=gated_deltanet(negative_eigenvalues=true)"


def test_a_mixer_named_by_a_mapping_alone_is_its_name():
    cfg = compose_train("pe=rope", "model.mixer=gla")
    cfg.model.mixer = {"mixer": "gla"}
    assert mechanism_key(cfg) == f"{ROPE} · mixer=gla"


def test_canons_two_spellings_of_one_setting_give_one_key():
    listed = mechanism_key(compose_train("pe=rope", "model.canon=[C,A]"))
    assert (
        listed == mechanism_key(compose_train("pe=rope", "model.canon=AC")) == f"{ROPE} · canon=AC"
    )


def test_a_default_models_key_is_the_one_written_before_the_options():
    assert mechanism_key(compose_train("pe=rope")) == ROPE


def test_a_config_written_before_the_options_has_the_same_key():
    cfg = OmegaConf.to_container(compose_train("pe=rope"))
    for name in MECHANISM_OPTIONS:
        del cfg["model"][name]
    assert mechanism_key(cfg) == ROPE


def test_a_calibration_file_written_before_the_options_still_reads(tmp_path):
    # the file as an older lengen wrote it: a step time under "train · RoPE · DecoderOnly"
    path = tmp_path / "timings.json"
    entries = {"train": [[1e9, 0.1, 1.0]], f"train · {ROPE}": [[1e9, 0.3, 1.0]]}
    path.write_text(json.dumps({"version": 3, "machines": {MACHINE: entries}}))
    mechanism = mechanism_key(compose_train("pe=rope"))
    line = Estimate(path, MACHINE, "cpu", mechanism, load=0.0).line(1000, 1e9, 1e9, "t")
    assert "1,000 steps × 0.3 s" in line


def test_a_looped_run_does_not_read_its_unlooped_models_entries(tmp_path):
    path = tmp_path / "timings.json"
    entries = {"train": [[1e9, 0.1, 1.0]], f"train · {ROPE}": [[1e9, 0.3, 1.0]]}
    path.write_text(json.dumps({"version": 3, "machines": {MACHINE: entries}}))
    mechanism = mechanism_key(compose_train("pe=rope", "model.loops=2"))
    line = Estimate(path, MACHINE, "cpu", mechanism, load=0.0).line(1000, 1e9, 1e9, "t")
    assert f"no {ROPE} · loops=2 run measured here yet" in line

"""A run's config.yaml written before an encoding option existed reads back with that option at
the value that keeps the encoding as trained (lengen.identity.IMPLIED_BEFORE), so eval.py can
override it: ``pe.extension=…`` on a RoPE run of before the key (lengen.rundir.load_config)."""

from __future__ import annotations

import yaml

from helpers import compose_train
from lengen.rundir import load_config
from lengen.rundir.saved_config import resolved_config

ARM_KEYS = ("extension", "self_extend_group", "self_extend_window", "rerope_window",
            "rerope_leak", "dca_chunk_size", "dca_local_window")  # fmt: skip


def old_rope_run(tmp_path):
    """A RoPE run directory whose config.yaml lacks pe.extension's keys and pe.start_offset."""
    config = resolved_config(compose_train("pe=rope"))
    for key in (*ARM_KEYS, "start_offset"):
        del config["pe"][key]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return config


def test_an_arm_overrides_a_run_written_before_its_key(tmp_path):
    old_rope_run(tmp_path)
    cfg = load_config(tmp_path, ["pe.extension=rerope", "pe.rerope_window=3"])
    assert (cfg.pe.extension, cfg.pe.rerope_window) == ("rerope", 3)


def test_missing_options_read_back_as_the_encoding_trained(tmp_path):
    old_rope_run(tmp_path)
    cfg = load_config(tmp_path)
    assert cfg.pe.extension == "none" and cfg.pe.start_offset == 0
    assert all(cfg.pe[key] is None for key in ARM_KEYS[1:])

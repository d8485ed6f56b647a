"""A DroPE configuration's settings label (issue #48): ``init_from`` shows the base run's
directory name with its seed blanked, not the first seed's full scratch path."""

from __future__ import annotations

from pathlib import Path

import pytest

from lengen.aggregate.stats import _label

RESULTS = Path(__file__).resolve().parents[2] / "results" / "reproductions" / "extension_arms"


@pytest.mark.parametrize(
    "value",
    [
        "/tmp/helper-J/arms/passkey_decoder_rope_len16_seed0_76767755",
        "/tmp/x/passkey_decoder_rope_len16_seed2_76767755/checkpoints/last.ckpt",
        "passkey_decoder_rope_len16_seed11_76767755",
    ],
)
def test_init_from_is_labelled_by_its_run_seed_blind(value):
    assert _label("init_from", value) == "passkey_decoder_rope_len16_seed*_76767755"


def test_other_keys_keep_their_values():
    assert _label("trainer.max_steps", 2000) == "2000"
    assert _label("data.path", "/tmp/a_seed0_b") == "/tmp/a_seed0_b"


@pytest.mark.parametrize("name", ["summary.accuracy.md", "verdicts.json", "extension_arms.md"])
def test_the_committed_tables_name_no_scratch_path(name):
    assert "/tmp/" not in (RESULTS / name).read_text()

"""Which configs share a pack, and which cannot pack (``lengen.packable``, re-exported by
``lengen.pack``): torch-free, one line naming the key."""

from __future__ import annotations

import pytest

from helpers import compose_train, fresh_python
from lengen.pack import PACKABLE_KEYS, pack_refusal, pack_signature


def test_configs_that_differ_in_packable_keys_share_a_signature():
    assert set(PACKABLE_KEYS) >= {"seed", "data.seed"}
    first = pack_signature(compose_train("seed=0"))
    assert pack_signature(compose_train("seed=3", "data.seed=7", "optim.lr=0.003")) == first
    assert pack_signature(compose_train("seed=0", "resume=auto")) == first


@pytest.mark.parametrize("override", ["optim.weight_decay=0.2", "model.d_model=64", "pe=alibi"])
def test_configs_that_differ_elsewhere_do_not(override):
    assert pack_signature(compose_train(override)) != pack_signature(compose_train())


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("model.dropout=0.1", "model.dropout=0.1"),
        ("pe.randomized=true", "pe.randomized=true"),
        ("model.compile=true", "model.compile=true"),
        ("trainer.precision=16-mixed", "trainer.precision=16-mixed"),
        ("trainer=ddp", "trainer.devices="),
        ("logger=wandb", "logger=wandb"),
        ("model=encoder", "data.curriculum=uniform"),
    ],
)
def test_what_cannot_pack_is_refused_in_one_line_naming_its_key(override, key):
    refusal = pack_refusal(compose_train(override))
    assert refusal is not None and refusal.startswith(key), refusal
    assert "\n" not in refusal and refusal.endswith("hydra.sweeper.pack=1")


def test_the_default_experiment_packs():
    assert pack_refusal(compose_train(fast=False)) is None


def test_the_rules_load_no_torch():
    code = (
        "import sys; from helpers import compose_train; from lengen.pack import pack_refusal, "
        "pack_signature; cfg = compose_train('model=encoder'); pack_refusal(cfg); "
        "pack_signature(cfg); print('torch' in sys.modules)"
    )
    assert fresh_python(code) == "False"

"""Every model option that changes what a layer computes (sequence mixers, looped depth, Canon
layers, the block options) packs or is refused up front: a pack of two trains a few steps on
both paths (looped, a CPU's; vmapped, a GPU's), each member's losses equal a plain training loop's
of its own model (``test_pack_encodings.solo_losses``)."""

from __future__ import annotations

import pytest
import torch

from helpers import yaml_choices
from lengen.pack import pack_refusal, train_pack
from test_pack import losses, small
from test_pack_encodings import FEW, solo_losses

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("unsaved_run_figures")

#: one setting of each option that is not a mixer yaml (configs/model/decoder.yaml's keys)
OPTIONS = [
    ("model.loops=2",),
    ("model.canon=ABCD", "pe=nope"),
    ("model.attn_gate=headwise",),
    ("model.attn_gate=elementwise",),
    ("model.attn_sinks=true",),
    ("model.kv_bias=true",),
    ("model.qk_norm=true",),
    ("model.attn_fn=sigmoid",),
]
MIXERS = [(f"model.mixer={name}", "pe=nope") for name in yaml_choices("model/mixer")]


@pytest.mark.parametrize("overrides", OPTIONS + MIXERS, ids=lambda o: " ".join(o))
def test_every_model_option_packs_or_is_refused_naming_its_key(
    overrides, pack_strategy, tmp_path, single_thread
):
    cfgs = [small(*FEW, *overrides, f"seed={seed}") for seed in (0, 1)]
    refusal = pack_refusal(cfgs[0])
    if refusal is not None:
        assert refusal.startswith("model."), refusal
        return
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    train_pack(cfgs, dirs)
    for cfg, directory in zip(cfgs, dirs, strict=True):
        torch.testing.assert_close(
            torch.tensor(losses(directory)), torch.tensor(solo_losses(cfg)), rtol=0, atol=1e-5
        )

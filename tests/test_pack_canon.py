"""A pack of seeds with Canon layers (model.canon) trains as its members' solo runs do, in both
ways a pack trains (looped on a CPU, vmapped on a GPU): the Canon weights are stacked and
vmapped like every other parameter (lengen.pack)."""

from __future__ import annotations

import pytest
import torch

from lengen.pack import pack_refusal, train_pack
from test_pack import losses, small
from test_pack_encodings import FEW, solo_losses


@pytest.fixture(params=["looped", "vmapped"])
def canon_strategy(request, monkeypatch):
    """Both ways a pack trains (``lengen.pack.engine.LOOPED``), vmapped forced on the CPU."""
    from lengen.pack import engine

    monkeypatch.setattr(engine, "LOOPED", {"cpu": request.param == "looped"})
    return request.param


def test_a_canon_model_packs_with_the_losses_of_its_solo_runs(
    canon_strategy, tmp_path, single_thread
):
    cfgs = [small(*FEW, "pe=nope", "model.canon=ABCD", f"seed={seed}") for seed in (0, 1)]
    assert pack_refusal(cfgs[0]) is None
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    train_pack(cfgs, dirs)
    for cfg, directory in zip(cfgs, dirs, strict=True):
        torch.testing.assert_close(
            torch.tensor(losses(directory)), torch.tensor(solo_losses(cfg)), rtol=0, atol=1e-5
        )

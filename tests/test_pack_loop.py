"""A CPU pack trains its members one after another inside each pack step
(``lengen.pack.engine.LOOPED``): the solo run's kernels on the solo run's shapes, so a member's
losses are its solo run's exactly, not only within vmap's 1e-5."""

from __future__ import annotations

import torch

from lengen.pack import engine, train_pack
from lengen.pack.stack import StackedModels
from test_pack import losses, small
from test_pack_encodings import solo_losses

STEPS = ("trainer.max_steps=8", "trainer.val_check_interval=8", "eval.lengths=[16]")


def test_a_cpu_pack_trains_its_members_looped():
    assert engine.LOOPED.get("cpu") is True
    assert not engine.LOOPED.get("cuda", False)


def test_a_looped_members_losses_equal_its_solo_runs_exactly(tmp_path, single_thread):
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1, 2)]
    train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1, 2)])
    for seed, cfg in enumerate(cfgs):
        packed = torch.tensor(losses(tmp_path / str(seed)), dtype=torch.float64)
        solo = torch.tensor(solo_losses(cfg), dtype=torch.float64)
        torch.testing.assert_close(packed, solo, rtol=0, atol=0)


def test_looped_gradients_equal_vmapped_ones(single_thread):
    from lengen.build import build
    from lengen.pack.engine import stack_batches
    from lengen.preflight import validate

    cfgs = [small("pe=rope", f"seed={seed}") for seed in (0, 1)]
    built = [build(cfg) for cfg in cfgs]
    batches = [data.train_batch(0) for data, _, _ in built]
    device = torch.device("cpu")
    found = {}
    for looped in (True, False):
        models = [model for _, model, _ in built]
        optim = validate(cfgs[0]).optim
        stacked = StackedModels(models, optim, [1e-3] * 2, 3, device, looped=looped)
        means = []
        for member, batch in enumerate(batches):  # each at its own length: nothing padded
            inputs, targets, tokens = stack_batches([batch], causal=True, device=device)
            means.append(stacked.gradients(inputs, targets, tokens, [member])[0])
        found[looped] = (torch.cat(means), {n: g.clone() for n, g in stacked.grads.items()})
    torch.testing.assert_close(found[True][0], found[False][0], rtol=0, atol=1e-6)
    for name, grad in found[True][1].items():
        torch.testing.assert_close(grad, found[False][1][name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_packs_step_and_evaluations_are_calibrated_under_its_mechanism_too(
    tmp_path, monkeypatch, single_thread
):
    import json

    from lengen.estimate import mechanism_key

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))
    cfgs = [small(*STEPS, "trainer.max_steps=120", f"seed={seed}") for seed in (0, 1)]
    train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1)])
    [machine] = json.loads((tmp_path / "cache" / "timings.json").read_text())["machines"].values()
    mechanism = mechanism_key(cfgs[0])
    assert f"train pack · {mechanism}" in machine, sorted(machine)
    assert f"eval teacher_forced · {mechanism}" in machine, sorted(machine)

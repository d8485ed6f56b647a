"""A looped (CPU) pack's members trained at once, one a thread (``engine.MEMBER_THREADS``,
``stack.MemberThreads``): each member's sums are a one-thread solo run's, torch's thread count
is the caller's again afterwards, and the caller's autocast reaches the threads."""

from __future__ import annotations

import torch

from lengen.pack import engine, train_pack
from lengen.pack.stack import MemberThreads, StackedModels
from test_pack import losses, small
from test_pack_encodings import solo_losses

STEPS = ("trainer.max_steps=8", "trainer.val_check_interval=8", "eval.lengths=[16]")


def recording(cls, used: list):
    """``cls`` (StackedModels) that notes the member threads each instance was given."""

    def build(*args, **kwargs):
        used.append(kwargs.get("threads", 1))
        return cls(*args, **kwargs)

    return build


def test_members_in_threads_train_their_solo_runs_losses_exactly(
    tmp_path, monkeypatch, single_thread
):
    monkeypatch.setitem(engine.MEMBER_THREADS, "cpu", 2)
    used = []
    monkeypatch.setattr(engine, "StackedModels", recording(engine.StackedModels, used))
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1, 2)]
    # the pack's budget (prepare() takes OMP_NUM_THREADS): two member threads of one each
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    try:
        train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1, 2)])
    finally:
        torch.set_num_threads(1)  # the solo runs as one thread, as each member ran
    assert used == [2]
    for seed, cfg in enumerate(cfgs):
        packed = torch.tensor(losses(tmp_path / str(seed)), dtype=torch.float64)
        solo = torch.tensor(solo_losses(cfg), dtype=torch.float64)
        torch.testing.assert_close(packed, solo, rtol=0, atol=0)


def test_no_more_member_threads_than_torchs_own(tmp_path, monkeypatch, single_thread):
    # torch at one thread (OMP_NUM_THREADS=1, a sweep lane's): the members one after another
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setitem(engine.MEMBER_THREADS, "cpu", 2)
    used = []
    monkeypatch.setattr(engine, "StackedModels", recording(engine.StackedModels, used))
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1)])
    assert used == [1]


def test_threaded_gradients_equal_the_members_one_after_another(single_thread):
    from lengen.build import build
    from lengen.pack.engine import stack_batches
    from lengen.preflight import validate

    cfgs = [small("pe=rope", f"seed={seed}") for seed in (0, 1)]
    optim = validate(cfgs[0]).optim
    found = {}
    for threads in (1, 2):
        built = [build(cfg) for cfg in cfgs]  # the same weights both times (seeded builds)
        batch = built[0][0].train_batch(0)  # one length for both members: stacked as is
        inputs, targets, tokens = stack_batches([batch, batch], True, torch.device("cpu"))
        models = [model for _, model, _ in built]
        stacked = StackedModels(
            models, optim, [1e-3] * 2, 3, torch.device("cpu"), looped=True, threads=threads
        )
        mean = stacked.gradients(inputs, targets, tokens)[0]
        stacked.close()
        found[threads] = (mean, {n: g.clone() for n, g in stacked.grads.items()})
    torch.testing.assert_close(found[2][0], found[1][0], rtol=0, atol=0)
    for name, grad in found[2][1].items():
        torch.testing.assert_close(grad, found[1][1][name], rtol=0, atol=0, msg=name)


def test_the_callers_thread_count_is_kept_and_restored():
    before = torch.get_num_threads()
    threads = MemberThreads(2)
    inside = threads.map(lambda _: torch.get_num_threads(), [0, 1, 2])
    during = torch.get_num_threads()
    threads.close()
    assert inside == [1, 1, 1] and (during, torch.get_num_threads()) == (before, before)


def test_the_callers_autocast_reaches_the_member_threads():
    threads = MemberThreads(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = threads.map(lambda _: torch.is_autocast_enabled("cpu"), [0, 1])
    outside = threads.map(lambda _: torch.is_autocast_enabled("cpu"), [0, 1])
    threads.close()
    assert (inside, outside) == ([True, True], [False, False])

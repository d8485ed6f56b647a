"""Packs: several runs of one config that differ only in their seeds, trained together in one
process, each still a run of its own (``docs/scaling.md``, "packs").

Why ``torch.func`` (``stack_module_state``-style stacking + ``functional_call`` under ``vmap``)
rather than layers with a member axis: the members keep lengen's own model classes, so every
encoding, attention kernel and model that the solo run builds is the code that trains in a
pack, with no second implementation to keep in step; a member's weights are its model's
weights (``state_dict``), so its checkpoint, evaluation and figures are those of a solo run.
The gradient is taken per member inside the map (``vmap(grad_and_value(...))``): each member's
loss is differentiated with respect to its own parameters only, so members are independent by
construction, and inside ``grad`` the tensors require gradients as in solo training, so the
attention paths that branch on it (FoX's and stick-breaking's evaluation buffers, FIRE's and
T5's bias) take their training paths as a solo run does.

Members may differ in ``PACKABLE_KEYS``: ``seed``, ``data.seed`` and ``optim.lr``.

Independence, member by member: its own data stream (its ``data.seed``/``seed``, its own
length each step; a causal decoder's batches are right-padded to the longest of the members
trained in one call, the padding unscored and unseen by earlier positions; on a CPU members of
similar length are grouped into calls so that little is padded, on a GPU one call takes all),
its gradient-clipping norm, its AdamW (torch's, whose parameters are the
member's slices of the stacked tensors, in parameter groups of its own at its own learning
rate: the solo run's kernel, update and state), its criterion stop (it leaves the pack with the
weights of that step), its divergence (a non-finite loss stops that member with the solo run's
message, in its directory; the others go on). The schedule's form (warmup, cosine, horizon) is
shared; each member's learning rate follows it from its own ``optim.lr``.

On a CPU the members' gradients are taken one after another inside each pack step
(``lengen.pack.engine.LOOPED``, ``StackedModels._looped``): vmap's batched products are slower
there than the members' own, and a member's losses are then its solo run's exactly.

Vmapped (a GPU's path), not bit-exact, within 1e-5: a member's losses equal its solo run's to float32 rounding, because
batched matrix products (and, for a decoder, a padded sequence length) sum in another order
than the solo run's; its evaluation is exact (run on the member's own model, as eval.py does).

Torch-free to import: ``PACKABLE_KEYS``, ``pack_signature`` and ``pack_refusal`` (the sweeper
asks them before any job starts; they live in ``lengen.packable``, below the pre-check, and
code below ``lengen.train`` imports them from there); ``train_pack`` loads torch when called.
"""

from __future__ import annotations

from lengen.packable import PACKABLE_KEYS, pack_refusal, pack_signature

__all__ = ["PACKABLE_KEYS", "pack_refusal", "pack_signature", "train_pack"]


def train_pack(cfgs, run_dirs) -> list[dict]:
    """Train the members together and write each member's run directory as
    ``lengen.train.run`` would; see ``lengen.pack.engine.train_pack``."""
    from lengen.pack.engine import train_pack as train

    return train(cfgs, run_dirs)

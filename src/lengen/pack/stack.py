"""The members' models as one: parameters and buffers stacked on a leading member axis, one
training step for all of them (``vmap`` over ``grad_and_value`` of ``functional_call``), each
member's gradient clipped by its own norm, and one AdamW over the stacked tensors, which is
exactly each member's own AdamW (its update is elementwise).

A member leaves (criterion reached, diverged) by ``select``: the stacks, the gradients' owners
and the optimiser state keep the remaining members' slices only, so later steps cost nothing
for it and cannot move its weights (AdamW moves parameters even at zero gradient).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch.func import functional_call, grad_and_value, vmap

from lengen.data.source import IGNORE
from lengen.lit import warmup_cosine


def decays(name: str, param: Tensor) -> bool:
    """Whether a member's parameter takes weight decay: ``LitModel.configure_optimizers``'s
    rule (matrices decay; biases, norms and embedding tables do not), on the member's shape."""
    return param.ndim >= 2 and "embedding" not in name and ".table." not in name


class StackedModels:
    """``models`` (the members', built alike) stacked on ``device``; ``template`` (the first
    member's module) runs every member's forward with that member's tensors swapped in.

    Args:
        models: the members' models, equal in structure (one config, other seeds).
        optim: the optimiser's typed config (``OptimOptions``), shared by the members.
        max_steps: the learning-rate schedule's horizon (``trainer.max_steps``).
    """

    def __init__(self, models: list, optim, max_steps: int, device: torch.device):
        self.template = models[0]
        self.optim, self.max_steps, self.device = optim, max_steps, device
        self.names = [name for name, _ in self.template.named_parameters()]
        self.decay = {name: decays(name, p) for name, p in self.template.named_parameters()}
        self.buffer_names = [name for name, _ in self.template.named_buffers()]
        self.params = self._stack(models, "named_parameters", grad=True)  # name -> (M, *shape)
        self.buffers = self._stack(models, "named_buffers", grad=False)
        self.optimizer, self.schedule = self._optimiser()

    def _stack(self, models, named: str, grad: bool) -> dict[str, Tensor]:
        columns = [dict(getattr(model, named)()) for model in models]
        stacked = {}
        for name in columns[0]:
            tensor = torch.stack([column[name].detach() for column in columns]).to(self.device)
            stacked[name] = tensor.requires_grad_(grad) if grad else tensor
        return stacked

    @property
    def size(self) -> int:
        return next(iter(self.params.values())).shape[0]

    # -- the optimiser -------------------------------------------------------------------------
    def _optimiser(self):
        """AdamW and its warmup-cosine schedule, as ``LitModel.configure_optimizers`` makes
        them (groups, fused kernel, LambdaLR), over the stacked tensors: a member's parameter
        has the index its solo run's has, so its state slices into a solo checkpoint."""
        decay = [self.params[name] for name in self.names if self.decay[name]]
        no_decay = [self.params[name] for name in self.names if not self.decay[name]]
        groups = [
            {"params": decay, "weight_decay": self.optim.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        fused = self.device.type in ("cpu", "cuda")
        optimizer = torch.optim.AdamW(
            groups, lr=self.optim.lr, betas=tuple(self.optim.betas), fused=fused or None
        )
        optim, max_steps = self.optim, self.max_steps
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: warmup_cosine(
                step,
                warmup_steps=optim.warmup_steps,
                max_steps=max_steps,
                min_lr_ratio=optim.min_lr_ratio,
            ),
        )
        return optimizer, schedule

    def order(self) -> list[str]:
        """Parameter names in the optimiser's index order (decaying ones first)."""
        return [n for n in self.names if self.decay[n]] + [
            n for n in self.names if not self.decay[n]
        ]

    def member_optimizer_state(self, index: int) -> dict:
        """Member ``index``'s AdamW state, as its solo run's optimiser would save it."""
        state = self.optimizer.state_dict()
        return {
            "state": {
                key: {k: v[index].clone() if k != "step" else v.clone() for k, v in entry.items()}
                for key, entry in state["state"].items()
            },
            "param_groups": copy.deepcopy(state["param_groups"]),
        }

    def schedule_state(self) -> dict:
        return self.schedule.state_dict()

    def load_states(self, optimizer_states: list[dict], schedule_state: dict) -> None:
        """Continue from the members' saved optimiser states (one per member, in order, all
        at one step) and the schedule's: the stacked state is their states stacked."""
        first = optimizer_states[0]
        stacked = {
            "state": {
                key: {
                    k: v
                    if k == "step"
                    else torch.stack([s["state"][key][k] for s in optimizer_states])
                    for k, v in entry.items()
                }
                for key, entry in first["state"].items()
            },
            "param_groups": copy.deepcopy(first["param_groups"]),
        }
        self.optimizer.load_state_dict(stacked)
        self.schedule.load_state_dict(schedule_state)

    def select(self, keep: list[int]) -> None:
        """Keep only the members at ``keep`` (indices into the current stack, in order)."""
        index = torch.tensor(keep, device=self.device)
        old = self.optimizer.state_dict()
        schedule = self.schedule.state_dict()
        self.params = {
            n: p.detach()[index].clone().requires_grad_(True) for n, p in self.params.items()
        }
        self.buffers = {n: b[index].clone() for n, b in self.buffers.items()}
        self.optimizer, self.schedule = self._optimiser()
        state = {
            key: {k: v if k == "step" else v[index.to(v.device)] for k, v in entry.items()}
            for key, entry in old["state"].items()
        }
        self.optimizer.load_state_dict({"state": state, "param_groups": old["param_groups"]})
        self.schedule.load_state_dict(schedule)

    # -- a training step -----------------------------------------------------------------------
    def _member_loss(self, params, buffers, inputs, targets, tokens):
        # one member: inputs {name: (B, T)}, targets (B, T), tokens () its scored tokens
        logits = functional_call(self.template, (params, buffers), args=(), kwargs=inputs)
        summed = torch.nn.functional.cross_entropy(  # lengen.evaluation.metrics.loss_sum
            logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        correct = ((logits.detach().argmax(-1) == targets) & (targets != IGNORE)).sum()
        mean = summed / tokens
        return mean, (mean.detach(), summed.detach(), correct)

    def gradients(self, inputs: dict, targets: Tensor, tokens: Tensor):
        """Every member's gradient of its mean loss (stored as the stacked tensors' ``.grad``)
        -> (mean losses (M,), summed losses (M,), correct tokens (M,)), on the device.

        ``inputs`` {name: (M, B, T)} (grid positions (M, T, A)), ``targets`` (M, B, T),
        ``tokens`` (M,) each member's scored tokens, at least 1."""
        step = vmap(grad_and_value(self._member_loss, has_aux=True), randomness="error")
        grads, (_, (mean, summed, correct)) = step(
            self.params, self.buffers, inputs, targets, tokens
        )
        for name, param in self.params.items():
            param.grad = grads[name].contiguous()  # the fused AdamW reads grads as laid out
        return mean, summed, correct

    def discard(self, members: list[int]) -> None:
        """Zero these members' gradients (a diverged member's: it leaves after this step)."""
        for param in self.params.values():
            param.grad[members] = 0.0

    def clip(self, value: float | None, algorithm: str | None) -> None:
        """Lightning's ``gradient_clip_val``, applied to each member with its own norm
        (``torch.nn.utils.clip_grad_norm_``'s formula, per member) or values."""
        if not value:
            return
        grads = [p.grad for p in self.params.values()]
        if algorithm == "value":
            for grad in grads:
                grad.clamp_(-value, value)
            return
        norms = torch.stack([g.reshape(len(g), -1).norm(2, dim=1) for g in grads])  # (P, M)
        total = torch.linalg.vector_norm(norms, 2, dim=0)  # (M,)
        coefficient = torch.clamp(value / (total + 1e-6), max=1.0)  # (M,)
        for grad in grads:
            grad.mul_(coefficient.view(-1, *([1] * (grad.ndim - 1))).to(grad.dtype))

    def step(self) -> None:
        self.optimizer.step()
        self.schedule.step()
        for param in self.params.values():
            param.grad = None

    def load_member(self, index: int, model) -> None:
        """Copy member ``index``'s weights and buffers into its own module (for validation,
        its checkpoint and its evaluation)."""
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(self.params[name][index])
            for name, buffer in model.named_buffers():
                buffer.copy_(self.buffers[name][index])

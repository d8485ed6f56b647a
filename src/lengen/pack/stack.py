"""The members' models as one: parameters and buffers stacked on a leading member axis, one
training step for all of them (``vmap`` over ``grad_and_value`` of ``functional_call``), each
member's gradient clipped by its own norm, and one AdamW whose parameters are the members'
slices of the stacks: each member's update is its solo run's, at its own learning rate.

A member leaves (criterion reached, diverged) by ``select``: the stacks, the gradients and the
optimiser state keep the remaining members' slices only, so later steps cost nothing for it and
cannot move its weights (AdamW moves parameters even at zero gradient).
"""

from __future__ import annotations

import contextlib
import copy

import torch
from torch import Tensor
from torch.func import functional_call, grad_and_value, vmap

from lengen.data.source import IGNORE
from lengen.lit import warmup_cosine
from lengen.pack.attention import packed_attention


def decays(name: str, param: Tensor) -> bool:
    """Whether a member's parameter takes weight decay: ``LitModel.configure_optimizers``'s
    rule (matrices decay; biases, norms and embedding tables do not), on the member's shape."""
    return param.ndim >= 2 and "embedding" not in name and ".table." not in name


class StackedModels:
    """``models`` (the members', built alike) stacked on ``device``; ``template`` (the first
    member's module) runs every member's forward with that member's tensors swapped in.

    The optimiser is torch's AdamW (fused where the solo run's is), whose parameters are the
    members' slices of the stacked tensors (views: the update writes into the stacks), two
    groups per member (decaying and not, as ``LitModel.configure_optimizers`` makes them), each
    at the member's own ``optim.lr``: every member's update is its solo run's kernel on its own
    tensors, and its state (``member_optimizer_state``) is its solo optimiser's, index for index.

    Args:
        models: the members' models, equal in structure (one config, other seeds).
        optim: the optimiser's typed config (``OptimConfig``), shared by the members but for
            ``lrs``, each member's ``optim.lr``.
        max_steps: the learning-rate schedule's horizon (``trainer.max_steps``).
    """

    def __init__(
        self,
        models: list,
        optim,
        lrs: list[float],
        max_steps: int,
        device,
        looped: bool = False,
        threads: int = 1,
    ):
        self.template = models[0]
        self.optim, self.lrs, self.max_steps, self.device = optim, list(lrs), max_steps, device
        self.looped = looped  # members' gradients one after another (``gradients``), not vmapped
        #: looped members trained concurrently (``MemberThreads``): each thread's forward runs
        #: in a member's own module, since functional_call swaps tensors into the module it runs
        self.modules = list(models)
        self.threads = MemberThreads(threads) if looped and threads > 1 else None
        #: reseed(i) before member i's forward (``PackRun``: dropout), looped packs only
        self.reseed = None
        named = dict(self.template.named_parameters())
        self.decay = {name: decays(name, p) for name, p in named.items()}
        #: the solo optimiser's parameter order: the decaying ones, then the others
        self.order = [n for n in named if self.decay[n]] + [n for n in named if not self.decay[n]]
        self.params = self._stack(models, "named_parameters")  # name -> (M, *shape)
        self.buffers = self._stack(models, "named_buffers")
        self._build()

    def _stack(self, models, named: str) -> dict[str, Tensor]:
        columns = [dict(getattr(model, named)()) for model in models]
        return {
            name: torch.stack([column[name].detach() for column in columns]).to(self.device)
            for name in columns[0]
        }

    def _build(self) -> None:
        """Each member's views of the stacks, their gradient buffers, AdamW and its schedule."""
        self.grads = {name: torch.zeros_like(p) for name, p in self.params.items()}
        self.views = []
        for index in range(self.size):
            views = {name: p[index] for name, p in self.params.items()}
            for name, view in views.items():
                view.grad = self.grads[name][index]
            self.views.append(views)
        self.optimizer, self.schedule = self._optimiser()

    @property
    def size(self) -> int:
        return next(iter(self.params.values())).shape[0]

    # -- the optimiser -------------------------------------------------------------------------
    def _optimiser(self):
        """AdamW and its warmup-cosine schedule as ``LitModel.configure_optimizers`` makes them
        (groups, fused kernel, LambdaLR), two groups per member."""
        groups = []
        for views, lr in zip(self.views, self.lrs, strict=True):
            decay = [views[name] for name in self.order if self.decay[name]]
            no_decay = [views[name] for name in self.order if not self.decay[name]]
            groups.append({"params": decay, "weight_decay": self.optim.weight_decay, "lr": lr})
            groups.append({"params": no_decay, "weight_decay": 0.0, "lr": lr})
        fused = self.device.type in ("cpu", "cuda")
        optimizer = torch.optim.AdamW(
            groups, lr=self.lrs[0], betas=tuple(self.optim.betas), fused=fused or None
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

    def member_optimizer_state(self, index: int) -> dict:
        """Member ``index``'s AdamW state, as its solo run's optimiser saves it."""
        full = self.optimizer.state_dict()  # parameters numbered in group order: 2 per member
        groups = full["param_groups"][2 * index : 2 * index + 2]
        offset = groups[0]["params"][0] if groups[0]["params"] else groups[1]["params"][0]
        state = {
            key - offset: {k: v.clone() for k, v in full["state"][key].items()}
            for group in groups
            for key in group["params"]
            if key in full["state"]
        }
        groups = [{**g, "params": [key - offset for key in g["params"]]} for g in groups]
        return {"state": state, "param_groups": copy.deepcopy(groups)}

    def member_schedule_state(self, index: int) -> dict:
        """Member ``index``'s schedule state, as its solo run's LambdaLR saves it."""
        full = self.schedule.state_dict()
        pair = slice(2 * index, 2 * index + 2)
        lists = {k: full[k][pair] for k in ("base_lrs", "_last_lr", "lr_lambdas") if k in full}
        return {**copy.deepcopy(full), **lists}

    def load_states(self, optimizer_states: list[dict], schedule_states: list[dict]) -> None:
        """Continue from the members' saved optimiser and schedule states (one each per member,
        in order, all at one step): numbered on, member after member."""
        state, groups, offset = {}, [], 0
        for member in optimizer_states:
            count = sum(len(g["params"]) for g in member["param_groups"])
            state |= {key + offset: value for key, value in member["state"].items()}
            groups += [
                {**g, "params": [k + offset for k in g["params"]]} for g in member["param_groups"]
            ]
            offset += count
        self.optimizer.load_state_dict({"state": state, "param_groups": groups})
        schedule = copy.deepcopy(schedule_states[0])
        for key in ("base_lrs", "_last_lr", "lr_lambdas"):
            if key in schedule:
                schedule[key] = [v for s in schedule_states for v in s[key]]
        self.schedule.load_state_dict(schedule)

    def select(self, keep: list[int]) -> None:
        """Keep only the members at ``keep`` (indices into the current stack, in order): their
        slices, optimiser and schedule states carried over."""
        optimizer_states = [self.member_optimizer_state(i) for i in keep]
        schedule_states = [self.member_schedule_state(i) for i in keep]
        index = torch.tensor(keep, device=self.device)
        self.params = {name: p[index].clone() for name, p in self.params.items()}
        self.buffers = {name: b[index].clone() for name, b in self.buffers.items()}
        self.lrs = [self.lrs[i] for i in keep]
        self.modules = [self.modules[i] for i in keep]
        self._build()
        self.load_states(optimizer_states, schedule_states)

    # -- a training step -----------------------------------------------------------------------
    def _member_loss(self, params, buffers, inputs, targets, tokens, module=None):
        # one member: inputs {name: (B, T)}, targets (B, T), tokens () its scored tokens
        module = self.template if module is None else module
        logits = functional_call(module, (params, buffers), args=(), kwargs=inputs)
        summed = torch.nn.functional.cross_entropy(  # lengen.evaluation.metrics.loss_sum
            logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        correct = ((logits.detach().argmax(-1) == targets) & (targets != IGNORE)).sum()
        mean = summed / tokens
        return mean, (mean.detach(), summed.detach(), correct)

    def gradients(self, inputs: dict, targets: Tensor, tokens: Tensor, members=None):
        """The gradients of the mean losses of ``members`` (indices into the stack, all of them
        by default), written into their slices of ``grads`` (the optimiser's parameters'
        ``.grad``) -> their (mean losses, summed losses, correct tokens), each (m,), on the device.

        ``inputs`` {name: (m, B, T)} (grid positions (m, T, A)), ``targets`` (m, B, T),
        ``tokens`` (m,) each member's scored tokens, at least 1.

        ``looped``: each member's forward and backward in turn, by plain autograd through the
        template (``_looped``), instead of one vmapped call."""
        if self.looped:
            return self._looped(inputs, targets, tokens, members)
        params, buffers, index = self.params, self.buffers, None
        if members is not None and list(members) != list(range(self.size)):
            index = torch.tensor(members, device=self.device)
            params = {name: p[index] for name, p in params.items()}
            buffers = {name: b[index] for name, b in buffers.items()}
        step = vmap(grad_and_value(self._member_loss, has_aux=True), randomness="error")
        # the CPU's fused attention has no batching rule: folded over the members instead
        batched = packed_attention() if self.device.type == "cpu" else contextlib.nullcontext()
        with batched:
            grads, (_, (mean, summed, correct)) = step(params, buffers, inputs, targets, tokens)
        for name, buffer in self.grads.items():  # the views' .grad: slices of these
            if index is None:
                buffer.copy_(grads[name])
            else:
                buffer.index_copy_(0, index, grads[name])
        return mean, summed, correct

    def _looped(self, inputs: dict, targets: Tensor, tokens: Tensor, members=None):
        """``gradients`` member after member: the solo run's forward and backward (the same
        kernels on the same shapes, so the same sums), on leaves that alias the member's slices
        of the stacks. On a CPU this is faster than ``vmap``: its batched matrix products and
        per-operator batching cost more than the members' own products on 2 cores
        (docs/benchmarks.md, "CPU pack"). With ``threads``, members at once, one a thread."""
        members = list(range(self.size) if members is None else members)
        jobs = [
            (member, {n: t[row] for n, t in inputs.items()}, targets[row], tokens[row])
            for row, member in enumerate(members)
        ]
        if self.threads is None or len(jobs) < 2 or self.reseed is not None:
            found = []
            for job in jobs:
                if self.reseed is not None:  # the member's draws: its solo run's generator
                    self.reseed(job[0])
                found.append(self._member_gradient(*job))
        else:  # each in a member's own module (functional_call swaps tensors into it)
            found = self.threads.map(
                lambda job: self._member_gradient(*job, module=self.modules[job[0]]), jobs
            )
        mean, summed, correct = (torch.stack(column) for column in zip(*found, strict=True))
        return mean, summed, correct

    def _member_gradient(self, member: int, inputs, targets, tokens, module=None):
        """Member ``member``'s gradient written into its slices of ``grads`` -> its (mean,
        summed, correct) as ``_member_loss`` gives them; inputs {name: (B, T)}, targets (B, T)."""
        # detach(): a leaf sharing the slice's memory, so autograd stops at the member's own
        # parameters; the update still goes to the stacks through the optimiser's views
        params = {n: p[member].detach().requires_grad_(True) for n, p in self.params.items()}
        buffers = {name: b[member] for name, b in self.buffers.items()}
        mean, stats = self._member_loss(params, buffers, inputs, targets, tokens, module)
        grads = torch.autograd.grad(mean, list(params.values()), allow_unused=True)
        for name, grad in zip(params, grads, strict=True):
            if grad is None:  # a parameter this batch does not reach: grad's zero
                self.grads[name][member].zero_()
            else:
                self.grads[name][member].copy_(grad)
        return stats

    def close(self) -> None:
        """Stop the member threads, if any (torch's thread count as it was)."""
        if self.threads is not None:
            self.threads.close()
            self.threads = None

    def discard(self, members: list[int]) -> None:
        """Zero these members' gradients (a diverged member's: it leaves after this step)."""
        for grad in self.grads.values():
            grad[members] = 0.0

    def clip(self, value: float | None, algorithm: str | None) -> None:
        """Lightning's ``gradient_clip_val``, applied to each member with its own norm
        (``torch.nn.utils.clip_grad_norm_``'s formula, per member) or values."""
        if not value:
            return
        grads = list(self.grads.values())
        if algorithm == "value":
            for grad in grads:
                grad.clamp_(-value, value)
            return
        # each member's norms contiguous, as the solo run's stacked norms are: a reduction over
        # a strided axis adds in another order (not bitwise the solo norm on an AMD EPYC, 2026-12-02)
        norms = torch.stack(
            [torch.linalg.vector_norm(g.reshape(len(g), -1), 2, dim=1) for g in grads]
        )
        total = torch.linalg.vector_norm(norms.t().contiguous(), 2, dim=1)  # (P, M) -> (M,)
        coefficient = torch.clamp(value / (total + 1e-6), max=1.0)  # (M,)
        for grad in grads:
            grad.mul_(coefficient.view(-1, *([1] * (grad.ndim - 1))).to(grad.dtype))

    def step(self) -> None:
        self.optimizer.step()
        self.schedule.step()

    def load_member(self, index: int, model) -> None:
        """Copy member ``index``'s weights and buffers into its own module (for validation,
        its checkpoint and its evaluation)."""
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(self.params[name][index])
            for name, buffer in model.named_buffers():
                buffer.copy_(self.buffers[name][index])


class MemberThreads:
    """``count`` threads that train looped members at once (``engine.MEMBER_THREADS``), each
    with one intra-op thread of torch's (a per-thread setting: the caller's count is kept), so
    members run side by side on the cores instead of each spreading its small products over
    them. Each job runs under the caller's autocast, which is per thread in torch."""

    def __init__(self, count: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(
            count, thread_name_prefix="lengen-member", initializer=torch.set_num_threads,
            initargs=(1,),
        )  # fmt: skip
        self.caller_threads = torch.get_num_threads()

    def map(self, job, items: list) -> list:
        """[job(item) for item in items], the items spread over the threads, in order."""
        device = "cpu"  # the looped packs' device (engine.LOOPED)
        autocast = torch.is_autocast_enabled(device)
        dtype = torch.get_autocast_dtype(device)

        def run(item):
            if not autocast:
                return job(item)
            with torch.autocast(device, dtype=dtype):
                return job(item)

        return list(self.pool.map(run, items))

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        # the threads' set_num_threads(1) also set torch's count for threads started later
        torch.set_num_threads(self.caller_threads)

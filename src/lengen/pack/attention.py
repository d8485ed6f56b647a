"""A pack's attention batched over its members: ``scaled_dot_product_attention`` under ``vmap``
on a CPU, as one fused-kernel call with the member axis folded into the batch axis.

Why: on a CPU, SDPA runs ``aten::_scaled_dot_product_flash_attention_for_cpu`` (and its
backward), for which functorch has no batching rule: under ``vmap`` it falls back to a Python
loop over the members, one kernel call each (its "performance drop" warning), which made a
pack's attention several times slower than one call on the folded batch. CUDA's fused kernels
have batching rules and are left alone.

How: ``packed_attention()`` (entered by ``StackedModels.gradients`` around its vmapped step
only; the solo run never sees it) is a ``TorchFunctionMode`` that sends the SDPA calls that
would take the CPU's fused kernel in a solo run (a CPU tensor, no dropout, no GQA, no mask that
needs a gradient) to ``PackedAttention``, an ``autograd.Function`` on that kernel whose vmap
rule folds the member axis into the batch axis, (M, B, H, T, hd) -> (M·B, H, T, hd), and calls
it once; its backward, ``PackedAttentionBackward``, does the same for aten's fused backward
(from the forward's saved output and log-sum-exp: nothing recomputed). Each (batch row, head)
is computed by the kernel a solo run calls, so a member's attention is its solo run's. Other
SDPA calls (a mask with a gradient: FoX's, T5's bias) run as before: SDPA takes its math path
for them, whose matmuls batch. (``torch.library.custom_op`` was the first try: its generated
autograd.Function has no ``setup_context``, so ``grad`` refuses it in torch 2.13.)
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default


class PackedAttention(torch.autograd.Function):
    """q (B, H, Tq, hd), k, v (B, H, Tk, hd), mask None or an additive one broadcastable to
    (B, H, Tq, Tk), without a gradient -> (output (B, H, Tq, hd), log-sum-exp (B, H, Tq) fp32):
    the CPU's fused kernel, whose vmap rule folds the members into the batch axis."""

    @staticmethod
    def forward(q, k, v, mask, causal: bool, scale: float | None):
        return _flash(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)

    @staticmethod
    def setup_context(ctx, inputs, output):
        q, k, v, mask, causal, scale = inputs
        out, lse = output
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.causal, ctx.scale = causal, scale
        ctx.mark_non_differentiable(lse)

    @staticmethod
    def backward(ctx, grad, _grad_lse):
        q, k, v, out, lse, mask = ctx.saved_tensors
        dq, dk, dv = PackedAttentionBackward.apply(
            grad, q, k, v, out, lse, mask, ctx.causal, ctx.scale
        )
        return dq, dk, dv, None, None, None

    @staticmethod
    def vmap(info, in_dims, q, k, v, mask, causal, scale):
        members, batch = info.batch_size, _batch(q, in_dims[0])
        q, k, v = (_fold(t, d, members) for t, d in zip((q, k, v), in_dims[:3], strict=True))
        mask = _fold_mask(mask, in_dims[3], members, batch)
        out, lse = PackedAttention.apply(q, k, v, mask, causal, scale)  # (M·B, H, Tq, ·)
        return (_unfold(out, members), _unfold(lse, members)), (0, 0)


class PackedAttentionBackward(torch.autograd.Function):
    """``PackedAttention``'s gradients -> (dq, dk, dv): aten's fused backward, from the
    forward's output and log-sum-exp (nothing recomputed); its vmap rule folds as the
    forward's. Not differentiable again (a pack takes first gradients only)."""

    @staticmethod
    def forward(grad, q, k, v, out, lse, mask, causal: bool, scale: float | None):
        return _flash_backward(grad, q, k, v, out, lse, 0.0, causal, attn_mask=mask, scale=scale)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("lengen.pack: the packed attention has no second derivative")

    @staticmethod
    def vmap(info, in_dims, grad, q, k, v, out, lse, mask, causal, scale):
        members, batch = info.batch_size, _batch(q, in_dims[1])
        tensors = (grad, q, k, v, out, lse)
        folded = [_fold(t, d, members) for t, d in zip(tensors, in_dims[:6], strict=True)]
        mask = _fold_mask(mask, in_dims[6], members, batch)
        dq, dk, dv = PackedAttentionBackward.apply(*folded, mask, causal, scale)
        return tuple(_unfold(t, members) for t in (dq, dk, dv)), (0, 0, 0)


# -- folding the member axis into the batch axis -------------------------------------------------
def _batch(tensor: Tensor, dim: int | None) -> int:
    """A member's batch size B, from a (B, ...) tensor batched at ``dim`` (or not)."""
    return tensor.shape[0 if dim is None or dim > 0 else 1]


def _fold(tensor: Tensor, dim: int | None, members: int) -> Tensor:
    """A member's (B, ...) tensor, batched at ``dim`` (or not: the same for all members) ->
    (M·B, ...)."""
    if dim is None:
        tensor = tensor.unsqueeze(0).expand(members, *tensor.shape)
    else:
        tensor = tensor.movedim(dim, 0)
    return tensor.reshape(members * tensor.shape[1], *tensor.shape[2:])


def _fold_mask(mask: Tensor | None, dim: int | None, members: int, batch: int):
    """A member's mask, broadcastable to (B, H, Tq, Tk) -> broadcastable to (M·B, H, Tq, Tk)."""
    if mask is None:
        return None
    if dim is None:  # one mask for every member
        if mask.ndim < 4 or mask.shape[0] == 1:
            return mask  # broadcasts over M·B as over B
        return _fold(mask, None, members)  # (B, h, Tq, Tk) -> (M·B, h, Tq, Tk)
    mask = mask.movedim(dim, 0)  # (M, *a member's mask shape)
    mask = mask.reshape(members, *([1] * (5 - mask.ndim)), *mask.shape[1:])  # (M, b, h, Tq, Tk)
    mask = mask.expand(members, batch, *mask.shape[2:])  # (M, B, h, Tq, Tk)
    return mask.reshape(members * batch, *mask.shape[2:])


def _unfold(tensor: Tensor, members: int) -> Tensor:
    return tensor.reshape(members, tensor.shape[0] // members, *tensor.shape[1:])  # (M, B, ...)


# -- routing: the SDPA calls of a pack step ----------------------------------------------------
def _bind(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """An SDPA call's arguments by name (``F.scaled_dot_product_attention``'s signature)."""
    return query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa


def _routable(q, k, v, mask, dropout_p, causal, enable_gqa) -> bool:
    """Whether this SDPA call takes the CPU's fused kernel in a solo run too (so routing it
    changes no number): CPU, 4-D, one floating dtype, equal head widths, no dropout or GQA, no
    mask that needs a gradient (the fused CPU kernel gives none: SDPA takes its math path,
    which batches) or is of another dtype, not a mask and ``is_causal`` at once (SDPA refuses
    that)."""
    return (
        all(isinstance(t, Tensor) and t.device.type == "cpu" and t.ndim == 4 for t in (q, k, v))
        and q.dtype == k.dtype == v.dtype
        and q.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16)
        and not dropout_p
        and not enable_gqa
        and q.shape[-1] == k.shape[-1] == v.shape[-1]
        and (mask is None or _plain_mask(mask, q.dtype) and not causal)
    )


def _plain_mask(mask: Tensor, dtype: torch.dtype) -> bool:
    """A boolean mask, or an additive one in q's dtype (under autocast SDPA would cast a mask
    of another dtype: left to it) without a gradient."""
    return isinstance(mask, Tensor) and not mask.requires_grad and mask.dtype in (torch.bool, dtype)


def _float_mask(mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """A boolean mask (True: attend) as SDPA turns it into an additive one."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
        mask.logical_not(), float("-inf")
    )


class _PackedAttention(TorchFunctionMode):
    """Sends the routable SDPA calls to ``PackedAttention``; every other call runs unchanged."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            q, k, v, mask, dropout_p, causal, scale, gqa = _bind(*args, **kwargs)
            if _routable(q, k, v, mask, dropout_p, causal, gqa):
                mask = _float_mask(mask, q.dtype)
                out, _ = PackedAttention.apply(q, k, v, mask, bool(causal), scale)
                return out
        return func(*args, **kwargs)


def packed_attention() -> TorchFunctionMode:
    """The context of a pack's vmapped step: its CPU SDPA calls batched over the members."""
    return _PackedAttention()

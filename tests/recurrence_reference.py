"""An independent float64 reference for the linear family of sequence mixers
(tests/model/test_mixers.py, tests/model/test_mixer_fast_paths.py): the recurrence as a loop
over time, with the state transition written as a matrix α(I − β k kᵀ), never the chunked
algebra that ``lengen.model.mixers.linear`` uses."""

from __future__ import annotations

import torch


def delta_rule_loop(q, k, v, beta, log_decay, state=None):
    """Per batch row and head, token by token:
    S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ (delta rule, β given) or
    α_t S_{t−1} + k_t v_tᵀ (β None), α_t = exp(log α_t) (1 where log_decay is None),
    o_t = S_tᵀ q_t.

    q, k (B, H, T, dk), v (B, H, T, dv), beta and log_decay (B, H, T) or None, state
    (B, H, dk, dv) or None for S_0 = 0 -> outputs (B, H, T, dv), the last state (B, H, dk, dv).
    """
    batch, heads, length, dk = q.shape
    if state is None:
        state = torch.zeros(batch, heads, dk, v.shape[-1], dtype=q.dtype)
    outputs = torch.zeros(batch, heads, length, v.shape[-1], dtype=q.dtype)
    final = torch.zeros_like(state)
    for b in range(batch):
        for h in range(heads):
            memory = state[b, h].clone()  # (dk, dv)
            for t in range(length):
                alpha = 1.0 if log_decay is None else torch.exp(log_decay[b, h, t])
                key = k[b, h, t][:, None]  # (dk, 1)
                if beta is None:
                    memory = alpha * memory + key @ v[b, h, t][None, :]
                else:
                    transition = torch.eye(dk, dtype=q.dtype) - beta[b, h, t] * key @ key.T
                    memory = alpha * transition @ memory + beta[b, h, t] * key @ v[b, h, t][None, :]
                outputs[b, h, t] = memory.T @ q[b, h, t]
            final[b, h] = memory
    return outputs, final

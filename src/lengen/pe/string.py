"""STRING: RoPE-Mixed in a learned orthogonal basis (Schenck et al., 2025, "Learning the RoPEs:
Better 2D and 3D Position Encodings with STRING", arXiv 2502.02562), the Cayley form.

STRING (Separable Translationally Invariant Position Encodings) are rotations
R(p) = exp(Σ_a p_a L_a) with commuting skew-symmetric generators L_a; every such family is RoPE
in another orthonormal basis, L_a = Pᵀ D_a P with D_a block-diagonal 2×2 (RoPE-Mixed's form:
pair i of head h turns by Σ_a θ_{h,i,a} p_a) and P orthogonal, so

    R(p) = Pᵀ RoPE_mixed(p) P,   R(x)ᵀ R(y) = Pᵀ RoPE_mixed(y − x) P:

q·k still depends on the offset vector only. Cayley-STRING learns P = (I − S)(I + S)⁻¹ from a
skew-symmetric S (here U − Uᵀ, U the strict upper triangle of a learned matrix), one per head
and layer, beside RoPE-Mixed's learned frequencies (``lengen.pe.rope_mixed``, whose options,
initialisation and per-layer sets it keeps).

**Computed as** q' = RoPE_mixed(p) P q: the leading Pᵀ of R(p) is the same orthogonal matrix for
every token, so it cancels in every q'·k' (Pᵀᵀ Pᵀ = I) and is not applied; the logits are
those of R(p) exactly (tested against ``torch.linalg.matrix_exp`` of Σ_a p_a Pᵀ D_a P).

**At initialisation** S = 0, so P = I and STRING is RoPE-Mixed exactly (the same frequencies
for the same seed; tested); on sequences (one axis) RoPE-Mixed starts as RoPE, so STRING does.

**Sources.** The stored copy of the paper returned only its title block to our search tools,
so its equations were not read for this; the construction follows the brief of the issue
(#48) and the paper's abstract as summarised there, and third-party implementations found in
the stored code (a ``CayleySTRING`` module: "Applies RoPE followed by multiplication with a
learnable orthogonal matrix P parameterized by the Cayley transform: P = (I - S)(I + S)^-1,
where S is a learnable skew-symmetric matrix", its RoPE-Mixed frequencies at θ = 100). Which
RoPE STRING's experiments start from, whether P is per head or per layer, and its
initialisation are therefore unverified; the Circulant-STRING variant is not implemented.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lengen.pe.config.string import STRINGConfig
from lengen.pe.liere import skew_from_upper
from lengen.pe.rope_mixed import RoPEMixed


def cayley(skew: Tensor) -> Tensor:
    """The Cayley transform (I − S)(I + S)⁻¹ of skew-symmetric S (..., d, d) -> orthogonal
    (..., d, d), fp32; (I + S) is invertible for every skew S (eigenvalues 1 + iλ)."""
    skew = skew.float()
    identity = torch.eye(skew.shape[-1], device=skew.device).expand_as(skew)
    # solve gives (I + S)⁻¹ (I − S): the same matrix, as (I − S) and (I + S)⁻¹ commute
    return torch.linalg.solve(identity + skew, identity - skew)


class STRING(RoPEMixed):
    """Cayley-STRING: RoPE-Mixed after a learned orthogonal change of basis per head and layer.

    Args:
        base, per_layer: as RoPE-Mixed (``lengen.pe.rope_mixed``).
    """

    Options = STRINGConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        sets = self.frequency_shape[0]
        self.basis_shape = (sets, self.n_heads, self.head_dim, self.head_dim)
        # S = 0 at the start: P = I, RoPE-Mixed exactly; flat: no weight decay
        self.basis_raw = nn.Parameter(torch.zeros(self.basis_shape).flatten())

    def basis(self) -> Tensor:
        """This layer's P -> (H, hd, hd), orthogonal, fp32."""
        raw = self.basis_raw.view(self.basis_shape)[self.layer if self.cfg.per_layer else 0]
        return cayley(skew_from_upper(raw))

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); P per head, then RoPE-Mixed's rotation
        with torch.autocast(q.device.type, enabled=False):
            basis = self.basis()  # (H, hd, hd)
            q = torch.einsum("hij,bhtj->bhti", basis, q.float()).to(q.dtype)
            k = torch.einsum("hij,bhtj->bhti", basis, k.float()).to(k.dtype)
        return super().rotate(q, k, q_positions, k_positions)


__all__ = ["STRING", "cayley"]

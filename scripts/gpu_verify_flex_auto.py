"""``model.attention=auto`` at evaluation on CUDA (FlexAttention from ``FLEX_AUTO_KEYS`` keys)
equals a float64 textbook softmax with the encoding's bias, for ALiBi, T5 and KERPLE.

    python scripts/gpu_verify_flex_auto.py   # on a GPU; on a CPU it checks the relative path

Prints each case's path and largest error, exits 1 at the first error above 1e-3 (fp32 against
float64 at 4,096 tokens). Run on an H100: results/bench/h100/flex_auto_verify.txt.
"""

import torch

from lengen.model import kernels
from lengen.pe import KERPLE, ALiBi, T5RelativeBias

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def main() -> int:
    torch.manual_seed(0)
    for cls in (ALiBi, T5RelativeBias, KERPLE):
        pe = cls(d_model=64, n_heads=4, causal=True).to(DEV)
        for T in (1024, 4096):
            q, k, v = (2 * torch.randn(1, 4, T, 16, device=DEV) for _ in range(3))  # (B, H, T, hd)
            pos = torch.arange(T, device=DEV)
            with torch.no_grad():
                path = kernels.choose_kernel(
                    pe, "auto", training=False, device_type=DEV, keys=T
                )  # fmt: skip
                auto = kernels.attend(q, k, v, causal=True, pe=pe, q_positions=pos,
                                      k_positions=pos)  # fmt: skip
                bias = pe.attention_bias(pos, pos).double()  # (H, T, T)
                scores = (q.double() @ k.double().transpose(-1, -2)) / 4 + bias  # 1/sqrt(16)
                future = torch.ones(T, T, dtype=torch.bool, device=DEV).triu(1)
                reference = scores.masked_fill(future, float("-inf")).softmax(-1) @ v.double()
            error = (auto.double() - reference).abs().max().item()
            print(f"{cls.__name__} T={T} path={path} max|auto - float64 textbook| = {error:.2e}")
            if error >= 1e-3:
                return 1
    print(f"auto equals the textbook on {DEV}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

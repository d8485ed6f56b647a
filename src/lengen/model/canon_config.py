"""``model.canon``, without torch: which Canon layers a block has (Allen-Zhu, 2025, "Physics of
Language Models: Part 4.1", arXiv 2512.17351; facebookresearch/PhysicsLM4
``huggingface/modeling_llama_canon.py``, its ``canon_set``). The layers themselves are
``lengen.model.canon``."""

from __future__ import annotations

from collections.abc import Mapping

#: the points the reference places them: A before attention (on the normed input), B inside
#: attention on the projected q, k, v, C before the MLP (on its normed input), D inside the
#: MLP on its hidden pre-activation
CANON_POINTS = "ABCD"
#: the reference's ``canon_kernel`` default: each output sees its token and the 3 before it
CANON_KERNEL = 4


def canon_points(key: str, value) -> str:
    """``model.canon`` as given -> the points, sorted ("" = none): a string of the letters
    A–D (``"ABCD"``, ``"AC"``) or a list of them (``[A, C]``); null or "" for none. Raises
    ValueError naming the key and what is allowed."""
    allowed = (
        f"{key} must be letters from {CANON_POINTS} (A before attention, B on q/k/v, C before "
        f"the MLP, D inside the MLP), each at most once, as a string ('ABCD') or a list ([A, C]); "
        f"null or '' for none; got {value!r}"
    )
    if value is None:
        return ""
    listed = (
        hasattr(value, "__iter__")
        and not isinstance(value, (str, bytes, Mapping))
        and all(isinstance(item, str) for item in value)
    )  # a list, a tuple or the yaml's ListConfig
    if not (isinstance(value, str) or listed):
        raise ValueError(allowed)
    letters = list(value)
    if any(letter not in CANON_POINTS for letter in letters) or len(set(letters)) < len(letters):
        raise ValueError(allowed)
    return "".join(sorted(letters))


def canon_parameters(points: str, d_model: int, d_ff: int) -> tuple[int, int]:
    """One block's Canon weights (K taps per channel) -> (those sized by d_model, by d_ff):
    A and C d_model channels each, B 3·d_model (q, k, v), D d_ff."""
    widths = {"A": d_model, "B": 3 * d_model, "C": d_model}
    by_d_model = sum(widths[point] for point in points if point in widths)
    return CANON_KERNEL * by_d_model, CANON_KERNEL * d_ff * ("D" in points)


def check_canon_reaches(points: str, attends: list[bool]) -> None:
    """Refuse B (on attention's q, k, v) in a stack where no layer attends (``attends``: each
    layer's, as the mixers cycle), where it would change nothing."""
    if "B" in points and not any(attends):
        raise ValueError(
            f"model.canon={points}: B acts on attention's q, k, v and no layer attends "
            f"(model.mixer / model.mixers: every layer recurrent), so it would change nothing; "
            f"allowed: A, C, D, or an attention layer"
        )

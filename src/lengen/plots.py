"""Figures from results dictionaries (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path


def plot_extrapolation(results: dict, path: str | Path) -> None:
    """Metric vs evaluation length, training length marked; written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["eval"]
    lengths = [row["length"] for row in rows]
    metrics = [m for m in ("accuracy", "exact_match") if any(r[m] is not None for r in rows)]
    if not metrics:
        metrics = ["loss"]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    markers = {"accuracy": "o", "exact_match": "s", "loss": "^"}
    for metric in metrics:
        ax.plot(
            lengths,
            [r[metric] for r in rows],
            marker=markers[metric],
            label=metric.replace("_", " "),
        )
    chance = rows[0].get("chance_accuracy") if rows else None
    if chance is not None and "accuracy" in metrics:
        ax.axhline(chance, color="grey", linestyle=":", linewidth=1, label="chance accuracy")
    ax.axvline(
        results["train_len"],
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"training length ({results['train_len']})",
    )
    if len(lengths) > 1 and max(lengths) / max(min(lengths), 1) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(length) for length in lengths])
    ax.set_xlabel("evaluation length (input symbols)")
    ax.set_ylabel("score" if metrics != ["loss"] else "loss")
    if metrics != ["loss"]:
        ax.set_ylim(-0.02, 1.02)
    ax.set_title(
        f"{results['task']} · {results['model']} · pe={results['pe']} · seed {results['seed']}"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)

"""The literature's own length-generalisation ratio beside lengen's ρ_τ, where a paper's
definition is known (issue #47). ρ_τ divides lengths in input symbols at τ (docs/analysis.md);
a paper may count something else at another threshold: Zhou et al. (2024, arXiv 2402.09371)
count the digits of an addition's operands, at exact match > 98 % ("2.5×": 100 digits from 40).
An addition run that holds to 30-digit operands from 10 has ρ = 61 / 21 = 2.90 in input symbols
and 3.0 in operand digits: the papers' "3×". Only the definitions below are known; other tasks
get no row (paper_ratios.csv is written only where one applies). No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lengen.aggregate.stats import Summary, seed_statistics


def operand_digits(length: int) -> int:
    """The longer operand's digits at ``length`` input symbols: w1 = ⌈(n − 1)/2⌉ = n // 2, the
    rule of ``lengen.data.tasks.arithmetic.Addition.widths`` (its test keeps the two equal)."""
    return length // 2


@dataclass(frozen=True)
class PaperRatio:
    """A paper's definition: its ``unit`` (``units``: input length -> that unit), ``metric`` and
    ``threshold``, strict (``>``) or not (``≥``)."""

    paper: str
    unit: str
    units: Callable[[int], int]
    metric: str
    threshold: float
    strict: bool

    @property
    def rule(self) -> str:
        return f"{self.metric} {'>' if self.strict else '≥'} {self.threshold:g}"


ZHOU_2024 = PaperRatio(
    paper="Zhou et al. 2024",
    unit="operand digits",
    units=operand_digits,
    metric="exact_match",
    threshold=0.98,
    strict=True,
)
#: task name (results.json's ``task``) -> the definition its papers use
PAPER_RATIOS = {"addition": ZHOU_2024, "addition_reversed": ZHOU_2024}
PAPER_RATIO_COLUMNS = (
    *("config_hash", "pe", "task", "model", "train_len", "settings", "protocol", "paper"),
    *("unit", "rule", "train_units", "n_seeds", "seeds", "mean", "std", "ci95_low", "ci95_high"),
    *("min", "max", "n_zero", "n_capped", "longest_ratio", "n_not_learned"),
)


def paper_ratio(rows: list[dict], train_len: int, definition: PaperRatio) -> float | None:
    """One run's ratio in the paper's unit: the largest evaluated length's units / the training
    length's units such that ``definition``'s metric passes its threshold at every evaluated
    length from the training length up to it (a dip stops it, as for ρ_τ); 0.0 where the
    training length fails it; None without a row at the training length."""
    rows = sorted((row for row in rows if row["length"] >= train_len), key=lambda r: r["length"])
    if not rows or rows[0]["length"] != train_len:
        return None
    ratio = 0.0
    for row in rows:
        value = row.get(definition.metric)
        passes = value is not None and (
            value > definition.threshold if definition.strict else value >= definition.threshold
        )
        if not passes:
            break
        ratio = definition.units(row["length"]) / definition.units(train_len)
    return ratio


def paper_ratio_rows(summary: Summary) -> list[dict]:
    """paper_ratios.csv: per configuration × protocol of a task with a known definition, the
    paper's ratio over seeds (``seed_statistics``), beside ratios.csv's ρ_τ."""
    described = {(row["_hash"], row["protocol"]): row for row in summary.rows}
    cells = {}  # (hash, protocol) -> [(run, its rows of that protocol)]
    for run in summary.aggregated:
        if (definition := PAPER_RATIOS.get(run.results["task"])) is None:
            continue
        for protocol in sorted({row["protocol"] for row in run.results["eval"]}):
            rows = [row for row in run.results["eval"] if row["protocol"] == protocol]
            cells.setdefault((run.config_hash, protocol), []).append((run, rows))
    out = []
    for (digest, protocol), members in cells.items():
        row, (run, _) = described[digest, protocol], members[0]
        definition, train_len = PAPER_RATIOS[run.results["task"]], row["train_len"]
        members.sort(key=lambda member: member[0].seed_key)
        kept = [m for m in members if not (summary.exclude_not_learned and m[0].learned is False)]
        ratios = [(run, rows, paper_ratio(rows, train_len, definition)) for run, rows in kept]
        ratios = [(run, rows, ratio) for run, rows, ratio in ratios if ratio is not None]
        longest = [
            definition.units(max(r["length"] for r in rows)) / definition.units(train_len)
            for _, rows, _ in ratios
        ]
        stat = seed_statistics([ratio for *_, ratio in ratios], higher_is_better=True)
        out.append(
            {
                **{key: row[key] for key in PAPER_RATIO_COLUMNS[:6]},
                "protocol": protocol,
                "paper": definition.paper,
                "unit": definition.unit,
                "rule": definition.rule,
                "train_units": definition.units(train_len),
                "n_seeds": stat.pop("n"),
                "seeds": " ".join(run.seed_label for run, *_ in ratios),
                **{key: stat[key] for key in ("mean", "std", "ci95_low", "ci95_high", "min")},
                "max": stat["max"],
                "n_zero": sum(ratio == 0 for *_, ratio in ratios),
                "n_capped": sum(
                    ratio > 0 and ratio >= bound
                    for (*_, ratio), bound in zip(ratios, longest, strict=True)
                ),
                "longest_ratio": max(longest, default=None),
                "n_not_learned": sum(run.learned is False for run, _ in members),
            }
        )
    order = ("task", "model", "train_len", "protocol", "pe", "settings")
    return sorted(out, key=lambda r: tuple(str(r[key]) for key in order))


def paper_ratio_section(summary: Summary) -> list[str]:
    """summary.md's section after ρ_τ: the paper's ratio per configuration, in its unit."""
    rows = paper_ratio_rows(summary)
    if not rows:
        return []
    lines = [
        "## The papers' own ratio, beside ρ_τ",
        "",
        "ρ_τ above divides lengths in input symbols at τ; these papers count otherwise. Per run: "
        "the largest evaluated length / the training length, both in the paper's unit, such "
        "that the paper's rule holds at every evaluated length from the training length up to "
        "it; over seeds as ρ_τ (`paper_ratios.csv`).",
        "",
        "| pe | settings | protocol | paper | unit (at L) | rule | n | mean ± CI | min | max | "
        "ρ = 0 / ≥ |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mean = "–" if row["mean"] is None else f"{row['mean']:.3g}"
        if row["n_seeds"] >= 2:
            mean += f" ± {row['ci95_high'] - row['mean']:.3g}"
        cells = [row["pe"], row["settings"] or "–", row["protocol"], row["paper"]]
        cells += [f"{row['unit']} ({row['train_units']})", row["rule"], row["n_seeds"], mean]
        cells += [_number(row["min"]), _number(row["max"]), f"{row['n_zero']} / {row['n_capped']}"]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return [*lines, ""]


def _number(value) -> str:
    return "–" if value is None else f"{value:.3g}"

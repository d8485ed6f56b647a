"""The MRR ranking of PEs (ranking.csv): which comparisons are ranked, ranks with ties shared,
each PE's mean reciprocal rank and, beside it, the mean of its ρ_τ (docs/analysis.md, Ranking).
Split from .stats, which builds the rows it ranks; torch-free like the rest of lengen.aggregate."""

from __future__ import annotations

import math

import pandas as pd

from lengen.results import METRIC_DIRECTIONS, RATIO_THRESHOLDS, ratio_key

RANKING_COLUMNS = ("scope", "position", "pe", "mrr", "mean_rank", "n_comparisons", "n_best")
RANKING_COLUMNS += ("task", "model", "train_len", "protocol", "reason")  # left-out comparisons


def ratio_column(threshold: float) -> str:
    """ranking.csv's column of a PE's ρ_τ: ``rho_0.9``."""
    return f"rho_{ratio_key(threshold)}"


def ranking_columns(thresholds=RATIO_THRESHOLDS) -> tuple[str, ...]:
    """ranking.csv's columns: ``RANKING_COLUMNS``, then one ρ_τ column per threshold."""
    return (*RANKING_COLUMNS, *map(ratio_column, thresholds))


TABLE = ["task", "model", "train_len", "protocol"]  # one table of summary.md each
COMPARISON = ["task", "_rank_hash", "length", "protocol", "metric"]  # one ranking each


def average_ranks(values: list[float], higher_is_better: bool = True) -> list[float]:
    """Rank 1 = best; equal values (up to float noise: 12 significant digits) share the mean
    of the ranks they span; NaN ranks last (NaNs share the last places)."""
    rounded = pd.Series([float(f"{value:.12g}") for value in values], dtype=float)
    keys = -rounded if higher_is_better else rounded
    return keys.rank(method="average", na_option="bottom").tolist()


def rank_pes(
    rows: list[dict], statistic: str = "mean", ratios: list[dict] | None = None
) -> tuple[list[dict], list[dict], pd.DataFrame]:
    """The mean reciprocal rank of each PE (over all tasks: scope 'all'; with several tasks, per
    task: 'task=<name>'), the comparisons left out, and the ranked rows with their ``rank``.

    A comparison is one (configuration without its PE, length beyond training, protocol,
    metric). It is ranked when it holds at least two PEs with a value and some run in it learned
    the task in distribution (or could not be checked: language modelling): PEs are ranked by
    ``statistic`` over seeds (mean, max or min), ties sharing the average rank, and each scores
    1/rank; MRR = mean score over the comparisons a PE takes part in. Comparisons of two PEs or
    more in which none learned are left out, counted per task, model, train_len and protocol.
    With ``ratios`` (``ratio_rows``), each entry also gets ``rho_<τ>``: the mean over the
    configurations × protocols it was ranked in of their ρ_τ (that ``statistic`` over seeds)."""
    table = pd.DataFrame([r for r in rows if not r["in_distribution"]], dtype=object)
    if table.empty:
        return [], [], table
    groups = table.groupby(COMPARISON, sort=False, dropna=False)
    learned = groups["_n_learned"].transform("sum") + groups["_n_unchecked"].transform("sum") > 0
    unlearned = table[(groups["_hash"].transform("size") >= 2) & ~learned.astype(bool)]
    counts = unlearned.drop_duplicates(COMPARISON).groupby(TABLE, sort=False).size()
    left_out = [
        {"scope": "left out", **dict(zip(TABLE, key, strict=True)), "n_comparisons": int(count)}
        | {"reason": f"no encoding learned {key[0]} in distribution"}
        for key, count in counts.items()
    ]
    table = table[learned & (table["n_seeds"] > 0)]
    ranks = [
        pd.Series(average_ranks(list(members[statistic]), METRIC_DIRECTIONS[metric]), members.index)
        for (*_, metric), members in table.groupby(COMPARISON, sort=False, dropna=False)
        if len(members) >= 2
    ]
    if not ranks:
        return [], left_out, table[:0]
    table = table.assign(rank=pd.concat(ranks)).dropna(subset=["rank"])
    # first place, shared or not (three tied for first share rank 2, so the comparison's best
    # rank, not 1, is first); a comparison in which every PE ties (all at 0 past L) has none
    by_comparison = table.groupby(COMPARISON, sort=False, dropna=False)["rank"]
    best, worst = by_comparison.transform("min"), by_comparison.transform("max")
    table = table.assign(_first=(table["rank"] == best) & (best < worst))
    # a PE's variants (RoPE base 500 and base 10⁴) rank apart when the folder holds several
    pairs = zip(table["pe"], table["_pe_settings"], strict=True)
    label = [f"{pe} ({settings})" if settings else str(pe) for pe, settings in pairs]
    scopes = [table.assign(scope="all", label=label)]
    if table["task"].nunique(dropna=False) > 1:
        scopes.append(scopes[0].assign(scope=[f"task={task}" for task in table["task"]]))
    scored = pd.concat(scopes).groupby(["scope", "label"], sort=False)
    ranking = scored["rank"].agg(
        mrr=lambda ranks: math.fsum(1.0 / ranks) / len(ranks),
        mean_rank=lambda ranks: math.fsum(ranks) / len(ranks),
        n_comparisons="size",
    )
    ranking = ranking.assign(n_best=scored["_first"].sum().astype(int)).reset_index()
    ranking = ranking.assign(other=ranking["scope"] != "all", minus_mrr=-ranking["mrr"])
    ranking = ranking.sort_values(["other", "scope", "minus_mrr", "label"], kind="stable")
    ranking["position"] = ranking.groupby("scope", sort=False).cumcount() + 1
    ranking = ranking.rename(columns={"label": "pe"})
    order = ["scope", "pe", "mrr", "mean_rank", "n_comparisons", "n_best", "position"]
    ranking = ranking[order].merge(
        _ranked_ratios(pd.concat(scopes), ratios or [], statistic), how="left", on=["scope", "pe"]
    )
    ranking = ranking.astype(object).where(ranking.notna(), None)
    return ranking.to_dict("records"), left_out, table


def _ranked_ratios(ranked: pd.DataFrame, ratios: list[dict], statistic: str) -> pd.DataFrame:
    """Per (scope, PE label): ``rho_<τ>``, the mean of ``statistic`` of ρ_τ over the
    configurations × protocols in which the label was ranked (each counts once)."""
    if not ratios:
        return pd.DataFrame(columns=["scope", "pe"])
    pairs = ranked[["scope", "label", "_hash", "protocol"]].drop_duplicates()
    frame = pd.DataFrame(ratios)[["_hash", "protocol", "tau", statistic]]
    merged = pairs.merge(frame, on=["_hash", "protocol"]).dropna(subset=[statistic])
    means = merged.groupby(["scope", "label", "tau"], sort=False)[statistic].agg(
        lambda values: math.fsum(values) / len(values)
    )
    wide = means.unstack("tau")
    wide.columns = [ratio_column(tau) for tau in wide.columns]
    return wide.reset_index().rename(columns={"label": "pe"})

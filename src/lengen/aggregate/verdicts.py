"""Whether each comparison of a sweep is a test of its claim (issue #47): a comparison whose
arms did not all learn the task in distribution cannot show which encoding extrapolates better,
so the aggregator says so instead of leaving it to the prose.

A *comparison* is one task · model · training length of the folder (a table of summary.md,
all protocols together: whether a run learned is a fact of its training, not of a protocol); its
*arms* are its configurations (the encoding and the settings that set it apart). A run *reached
the in-distribution criterion* when its results.json says ``criterion.reached: true``; a run
trained without a criterion counts when it learned by aggregation's rule (per-token accuracy at
the training length ≥ ``--min-accuracy``); a run with neither (language modelling) cannot be
checked and counts as reaching it, as the ranking counts it (docs/analysis.md, *Not learned*).
An arm learned when at least K of every N of its seeds reached it, and at least K seeds did
(``--test-rule K/N``, default 2/3: one seed is not enough); the comparison is **a test** when it has two arms or more and every arm learned, otherwise
**not a test**, with the arms that did not learn and in how many seeds. No torch here.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict

from lengen.aggregate.load import RunRecord
from lengen.results import load_results, results_name

#: the classes, as summary.csv's ``comparison`` and docs/reproductions.md's verdicts name them
A_TEST, NOT_A_TEST = "a test", "not a test"
#: the default ``--test-rule``: an arm learned when ≥ 2 of 3 of its seeds reached the criterion
DEFAULT_TEST_RULE = "2/3"
COMPARISON = ("task", "model", "train_len")


def parse_test_rule(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N), 1 ≤ K ≤ N; the one-line refusal names the flag and what is allowed."""
    reached, _, of = str(text).partition("/")
    if not (reached.strip().isdigit() and of.strip().isdigit()) or not (
        1 <= int(reached) <= int(of)
    ):
        raise ValueError(
            f"--test-rule {text!r}: allowed: K/N with 1 <= K <= N, e.g. 2/3 (an arm learned "
            "when at least K of every N of its seeds reached the in-distribution criterion)"
        )
    return int(reached), int(of)


def training_criterion(run: RunRecord) -> dict:
    """The criterion of ``run``'s training: its results' ``criterion``; a re-evaluation
    (``--tag``: results.<tag>.json, which eval.py writes without one) reads its run's own
    results.json, as the not-learned flag does ({} where there is none)."""
    if "criterion" in (run.results or {}):
        return run.criterion
    with contextlib.suppress(OSError, ValueError):
        return load_results(run.path / results_name()).get("criterion") or {}
    return {}


def run_reached(run: RunRecord) -> bool | None:
    """Whether ``run`` reached the in-distribution criterion: its training's
    ``criterion.reached`` where it was trained to one, else whether it learned (aggregation's
    flag); None where neither can be known (no criterion, no accuracy: language modelling)."""
    criterion = training_criterion(run)
    if criterion.get("target") is not None:
        return bool(criterion.get("reached"))
    return run.learned


def arm_learned(n_reached: int, n_checked: int, rule: tuple[int, int]) -> bool:
    """K of every N: ``n_reached / n_checked ≥ K / N`` (2 of 3, 4 of 5 with the default), and at
    least K seeds that reached it: one seed of one is no seed range, so under 2/3 it does not
    make a test (``--test-rule 1/1`` asks for one); an arm none of whose runs could be checked
    passes (nothing it could have failed)."""
    reached, of = rule
    return n_checked == 0 or (n_reached * of >= reached * n_checked and n_reached >= reached)


def trained_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs a verdict counts: every run with results, ``--reached-criterion``'s excluded
    ones too (the verdict is about all the seeds that were trained; failed runs have none)."""
    return [run for run in runs if run.status in ("ok", "excluded") and run.results]


def comparison_verdicts(
    runs: list[RunRecord], rule: tuple[int, int], settings: dict[str, str]
) -> list[dict]:
    """One dict per comparison (task, model, train_len): ``class``, ``reason``, ``arms`` (each
    with pe, settings, config_hash, n_seeds, n_reached, n_unchecked, seeds_reached, learned),
    from ``trained_runs(runs)``; ``settings``: config hash -> the keys that set it apart
    (``lengen.aggregate.stats.distinguishing``, passed in: stats calls this module)."""
    trained = trained_runs(runs)
    arms = defaultdict(list)  # (task, model, train_len, config hash) -> its runs
    for run in trained:
        arms[(*(run.results[key] for key in COMPARISON), run.config_hash)].append(run)
    comparisons = defaultdict(list)
    for (*key, digest), members in arms.items():
        members.sort(key=lambda run: run.seed_key)
        reached = [run_reached(run) for run in members]
        checked = [value for value in reached if value is not None]
        arm = {
            "pe": members[0].results["pe"],
            "settings": settings.get(digest, ""),
            "config_hash": digest[:10],
            "n_seeds": len(members),
            "n_reached": sum(checked),
            "n_unchecked": len(reached) - len(checked),
            "seeds_reached": [
                run.seed_label for run, value in zip(members, reached, strict=True) if value
            ],
        }
        arm["learned"] = arm_learned(arm["n_reached"], len(checked), rule)
        comparisons[tuple(key)].append(arm)
    out = []
    for key, members in comparisons.items():
        members.sort(key=lambda arm: (str(arm["pe"]), arm["settings"]))
        out.append({**dict(zip(COMPARISON, key, strict=True)), **classify(members, rule)})
    return sorted(out, key=lambda entry: tuple(str(entry[key]) for key in COMPARISON))


def classify(arms: list[dict], rule: tuple[int, int]) -> dict:
    """``class`` and ``reason`` of a comparison of ``arms`` under ``rule``, and the arms."""
    reached, of = rule
    failed = [arm for arm in arms if not arm["learned"]]
    if len(arms) < 2:
        verdict, reason = NOT_A_TEST, "a single arm: nothing is compared"
    elif failed:
        verdict = NOT_A_TEST
        reason = ", ".join(
            f"{arm_label(arm)} {arm['n_reached']} of {arm['n_seeds']}" for arm in failed
        )
        reason += f" seeds reached the in-distribution criterion (a test needs {reached} of {of})"
    else:
        verdict = A_TEST
        reason = f"every arm reached the in-distribution criterion in ≥ {reached} of {of} seeds"
        if unchecked := sum(arm["n_unchecked"] for arm in arms):
            reason += f" ({unchecked} run(s) not checkable: no accuracy, e.g. language modelling)"
    return {"class": verdict, "reason": reason, "arms": arms}


def arm_label(arm: dict) -> str:
    """``rope`` or ``learned (data.task.positions=coupled, …)``: the arm as its table names it."""
    return f"{arm['pe']} ({arm['settings']})" if arm["settings"] else str(arm["pe"])


def reached_of(arm: dict) -> str:
    """``2/3``: the arm's seeds that reached the criterion / its seeds; ``–/2 (not checkable)``
    where none could be checked (language modelling)."""
    if arm["n_unchecked"] == arm["n_seeds"]:
        return f"–/{arm['n_seeds']} (not checkable)"
    unchecked = f", {arm['n_unchecked']} not checkable" if arm["n_unchecked"] else ""
    return f"{arm['n_reached']}/{arm['n_seeds']}{unchecked}"


def annotate_rows(rows: list[dict], verdicts: list[dict]) -> None:
    """summary.csv's ``comparison`` (the class of the row's comparison) and ``n_reached`` (runs
    of the row's configuration that reached the in-distribution criterion), in place."""
    by_key = {tuple(entry[key] for key in COMPARISON): entry for entry in verdicts}
    for row in rows:
        entry = by_key.get(tuple(row[key] for key in COMPARISON))
        arm = next(
            (
                arm
                for arm in (entry or {}).get("arms", [])
                if arm["config_hash"] == row["config_hash"]
            ),
            None,
        )
        row["comparison"] = entry["class"] if entry else None
        checked = arm is not None and arm["n_unchecked"] < arm["n_seeds"]
        row["n_reached"] = arm["n_reached"] if checked else None  # empty: nothing to check


def verdicts_json(verdicts: list[dict], rule: tuple[int, int]) -> str:
    """verdicts.json: the rule and every comparison with its arms."""
    reached, of = rule
    document = {
        "rule": {"reached": reached, "of": of, "text": f"a test: every arm ≥ {reached} of {of}"},
        "comparisons": verdicts,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def verdict_section(verdicts: list[dict], rule: tuple[int, int]) -> list[str]:
    """summary.md's section: one line per comparison (class, arms reached / seeds, reason)."""
    reached, of = rule
    lines = [
        "## Is each comparison a test?",
        "",
        f"A comparison (task · model · train_len) is **{A_TEST}** when it has two arms or more "
        f"and every arm reached the in-distribution criterion (results.json's "
        f"`criterion.reached`; without a criterion, per-token accuracy at the training length "
        f"≥ the not-learned threshold) in at least {reached} of {of} of its seeds, and in "
        f"{reached} seeds at least (`--test-rule {reached}/{of}`); otherwise **{NOT_A_TEST}**: the arms that did not "
        "learn cannot show how far their encoding extrapolates. Per comparison in "
        "`verdicts.json`; per row `comparison` and `n_reached` in summary.csv.",
        "",
        "| task | model | train_len | class | arms: reached / seeds | reason |",
        "|---|---|---|---|---|---|",
    ]
    for entry in verdicts:
        arms = ", ".join(f"{arm_label(a)} {reached_of(a)}" for a in entry["arms"])
        cells = [entry["task"], entry["model"], entry["train_len"], entry["class"], arms]
        cells.append(entry["reason"])
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return [*lines, ""] if verdicts else lines[:2] + ["No runs with results.", ""]

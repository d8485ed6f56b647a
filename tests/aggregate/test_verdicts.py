"""Whether each comparison of a sweep is a test (lengen.aggregate.verdicts, issue #47): every
arm must reach the in-distribution criterion in at least K of N seeds (default 2 of 3). The
sweeps are constructed (tests/sweep_fixture.py): no training."""

from __future__ import annotations

import csv
import json

import pytest

from lengen.aggregate import aggregate, main, write_outputs
from lengen.aggregate.verdicts import A_TEST, NOT_A_TEST
from sweep_fixture import write_run


def criterion(reached: bool) -> dict:
    """results.json's ``criterion`` of a run trained to exact match 0.95."""
    step = 500 if reached else None
    return {"metric": "val/exact_match", "target": 0.95, "checks": 2, "reached": reached,
            "reached_at_step": step}  # fmt: skip


def arm(folder, pe: str, reached: list[bool], accuracy: float = 0.99) -> None:
    """Three seeds of ``pe``, seed i reaching its criterion as ``reached[i]`` says."""
    for seed, value in enumerate(reached):
        write_run(
            folder,
            f"{pe}_seed{seed}",
            pe=pe,
            seed=seed,
            accuracy={4: accuracy if value else 0.5, 8: 0.3},
            extra={"criterion": criterion(value)},
        )


def only_verdict(summary) -> dict:
    assert len(summary.verdicts) == 1, summary.verdicts
    return summary.verdicts[0]


def test_every_arm_learning_in_two_of_three_seeds_is_a_test(tmp_path):
    arm(tmp_path, "rope", [True, True, False])
    arm(tmp_path, "alibi", [True, True, True])
    assert only_verdict(aggregate(tmp_path))["class"] == A_TEST


def test_an_arm_that_never_learns_makes_the_comparison_not_a_test(tmp_path):
    arm(tmp_path, "rope", [True, True, True])
    arm(tmp_path, "nope", [False, False, False])
    verdict = only_verdict(aggregate(tmp_path))
    assert verdict["class"] == NOT_A_TEST
    assert verdict["reason"].startswith("nope 0 of 3 seeds reached")


def test_the_reason_names_only_the_arms_that_did_not_learn(tmp_path):
    arm(tmp_path, "rope", [True, True, True])
    arm(tmp_path, "nope", [True, False, False])
    assert "rope" not in only_verdict(aggregate(tmp_path))["reason"]


def test_the_criterion_decides_over_the_accuracy(tmp_path):
    """A run at 0.99 per token whose criterion (exact match) was not reached did not reach it."""
    for pe in ("rope", "alibi"):
        for seed in range(3):
            write_run(tmp_path, f"{pe}{seed}", pe=pe, seed=seed, accuracy={4: 0.99, 8: 0.3},
                      extra={"criterion": criterion(pe == "rope")})  # fmt: skip
    verdict = only_verdict(aggregate(tmp_path))
    assert (verdict["class"], verdict["reason"].split(" seeds")[0]) == (NOT_A_TEST, "alibi 0 of 3")


def test_without_a_criterion_the_learned_flag_decides(tmp_path):
    for seed, accuracy in enumerate([0.95, 0.92, 0.5]):
        write_run(tmp_path, f"rope{seed}", pe="rope", seed=seed, accuracy={4: accuracy, 8: 0.1})
        write_run(tmp_path, f"alibi{seed}", pe="alibi", seed=seed, accuracy={4: 0.6, 8: 0.1})
    arms = {a["pe"]: a["n_reached"] for a in only_verdict(aggregate(tmp_path))["arms"]}
    assert arms == {"rope": 2, "alibi": 0}


def test_one_seed_that_reached_it_is_no_test_under_two_of_three(tmp_path):
    arm(tmp_path, "rope", [True])
    arm(tmp_path, "alibi", [True])
    verdict = only_verdict(aggregate(tmp_path))
    assert (verdict["class"], verdict["reason"]) == (
        NOT_A_TEST,
        "rope 1 of 1, alibi 1 of 1 seeds reached the in-distribution criterion (a test needs 2 of 3)"
        if verdict["reason"].startswith("rope")
        else "alibi 1 of 1, rope 1 of 1 seeds reached the in-distribution criterion (a test needs 2 of 3)",
    )


def test_one_seed_makes_a_test_when_the_rule_asks_for_one(tmp_path):
    arm(tmp_path, "rope", [True])
    arm(tmp_path, "alibi", [True])
    assert only_verdict(aggregate(tmp_path, test_rule="1/1"))["class"] == A_TEST


def test_the_rule_is_configurable_in_the_api(tmp_path):
    arm(tmp_path, "rope", [True, True, False])
    arm(tmp_path, "alibi", [True, True, True])
    assert only_verdict(aggregate(tmp_path, test_rule="3/3"))["class"] == NOT_A_TEST


def test_the_rule_is_configurable_on_the_command_line(tmp_path):
    arm(tmp_path / "sweep", "rope", [True, False, False])
    arm(tmp_path / "sweep", "alibi", [True, True, True])
    assert main([str(tmp_path / "sweep"), "--test-rule", "1/3"]) == 0
    document = json.loads((tmp_path / "sweep" / "verdicts.json").read_text())
    assert (document["rule"]["reached"], document["comparisons"][0]["class"]) == (1, A_TEST)


@pytest.mark.parametrize("rule", ["3/2", "0/3", "two", "2/"])
def test_a_bad_rule_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, rule):
    arm(tmp_path, "rope", [True, True, True])
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([str(tmp_path), "--test-rule", rule]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --test-rule {rule!r}: allowed: K/N")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_single_arm_is_not_a_test(tmp_path):
    arm(tmp_path, "rope", [True, True, True])
    assert only_verdict(aggregate(tmp_path))["class"] == NOT_A_TEST


def test_language_modelling_runs_cannot_fail_the_check(tmp_path):
    for pe in ("rope", "alibi"):
        write_run(tmp_path, pe, pe=pe, ppl={4: 20.0, 8: 25.0})
    assert only_verdict(aggregate(tmp_path))["class"] == A_TEST


def test_each_task_is_a_comparison_of_its_own(tmp_path):
    arm(tmp_path / "copy", "rope", [True, True, True])
    arm(tmp_path / "copy", "alibi", [True, True, True])
    for seed in range(3):
        write_run(tmp_path, f"rev{seed}", pe="rope", seed=seed, accuracy={4: 0.3, 8: 0.1},
                  overrides={"data.name": "reverse"})  # fmt: skip
    classes = {v["task"]: v["class"] for v in aggregate(tmp_path).verdicts}
    assert classes == {"copy": A_TEST, "reverse": NOT_A_TEST}


def test_excluded_runs_still_count_against_their_arm(tmp_path):
    """--reached-criterion leaves the runs that missed it out of the statistics, not of the
    verdict: otherwise every arm would have reached it."""
    arm(tmp_path, "rope", [True, True, True])
    arm(tmp_path, "nope", [True, False, False])
    verdict = only_verdict(aggregate(tmp_path, reached_criterion=True))
    assert verdict["class"] == NOT_A_TEST


def test_summary_csv_carries_the_class_and_the_seeds_that_reached(tmp_path):
    arm(tmp_path, "rope", [True, True, False])
    arm(tmp_path, "nope", [False, False, False])
    write_outputs(aggregate(tmp_path))
    with open(tmp_path / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["pe"], r["comparison"], r["n_reached"]) for r in rows} == {
        ("rope", NOT_A_TEST, "2"),
        ("nope", NOT_A_TEST, "0"),
    }


def test_summary_md_states_the_class_and_the_reason(tmp_path):
    arm(tmp_path, "rope", [True, True, True])
    arm(tmp_path, "nope", [False, False, False])
    write_outputs(aggregate(tmp_path))
    text = (tmp_path / "summary.md").read_text()
    assert "| copy | decoder | 4 | not a test | nope 0/3, rope 3/3 | nope 0 of 3 seeds" in text


def test_language_modelling_rows_leave_n_reached_empty(tmp_path):
    """Nothing was checked, so no count: an empty field, not 0 (which would read 'none')."""
    for pe in ("rope", "alibi"):
        write_run(tmp_path, pe, pe=pe, ppl={4: 20.0, 8: 25.0})
    write_outputs(aggregate(tmp_path, metric="ppl"))
    with open(tmp_path / "summary.ppl.csv") as handle:
        assert {row["n_reached"] for row in csv.DictReader(handle)} == {""}


def test_a_tags_verdict_follows_its_runs_training_criterion(tmp_path):
    """results.<tag>.json carries no criterion (eval.py writes none): the run's results.json
    decides, so a re-evaluated run that missed its criterion still counts as not reached."""
    for pe in ("rope", "alibi"):
        for seed in range(3):
            for name, extra in (("results.json", {"criterion": criterion(False)}),
                                ("results.sparse.json", {})):  # fmt: skip
                write_run(tmp_path, f"{pe}{seed}", pe=pe, seed=seed, accuracy={4: 0.99, 8: 0.3},
                          results_file=name, extra=extra)  # fmt: skip
    verdict = only_verdict(aggregate(tmp_path, tag="sparse"))
    assert [arm["n_reached"] for arm in verdict["arms"]] == [0, 0]

"""The papers' own length-generalisation ratio beside ρ_τ (lengen.aggregate.literature, issue
#47): addition in operand digits at exact match > 0.98 (Zhou et al. 2024). Constructed sweeps
(tests/sweep_fixture.py), numbers by hand."""

from __future__ import annotations

import csv

import pytest
from torch.testing import assert_close

from lengen.aggregate import aggregate, write_outputs
from lengen.aggregate.literature import ZHOU_2024, operand_digits, paper_ratio
from sweep_fixture import write_run


def rows(exact: dict[int, float]) -> list[dict]:
    return [{"length": length, "exact_match": value} for length, value in exact.items()]


def test_operand_digits_follow_the_addition_task():
    from lengen.data.tasks.arithmetic import Addition

    assert [operand_digits(n) for n in range(1, 80)] == [
        Addition.widths(n)[0] for n in range(1, 80)
    ]


def test_the_ratio_counts_operand_digits_not_input_symbols():
    """Held to 15 digits from 10: 1.5 in digits, where ρ in input symbols is 31 / 21 = 1.48."""
    ratio = paper_ratio(rows({21: 1.0, 31: 0.99, 41: 0.5}), 21, ZHOU_2024)
    assert_close(ratio, 1.5)


def test_thirty_digits_from_ten_is_three():
    ratio = paper_ratio(rows({21: 1.0, 41: 1.0, 61: 0.99}), 21, ZHOU_2024)
    assert_close(ratio, 3.0)


def test_the_threshold_is_strict():
    """Zhou et al.'s "> 98 %": exactly 0.98 does not pass."""
    assert paper_ratio(rows({21: 1.0, 31: 0.98}), 21, ZHOU_2024) == 1.0


def test_a_training_length_below_the_threshold_gives_zero():
    assert paper_ratio(rows({21: 0.92, 31: 0.99}), 21, ZHOU_2024) == 0.0


def addition_run(folder, seed: int, exact: dict[int, float], pe: str = "rope"):
    write_run(folder, f"{pe}{seed}", pe=pe, seed=seed,
              accuracy={length: 0.99 for length in exact},
              row_fields={length: {"exact_match": v} for length, v in exact.items()},
              overrides={"data.name": "addition", "data.len": 21})  # fmt: skip


def test_paper_ratios_csv_holds_the_mean_over_seeds(tmp_path):
    for seed, exact in enumerate([{21: 1.0, 31: 0.99}, {21: 0.99, 31: 0.5}, {21: 0.9, 31: 0.0}]):
        addition_run(tmp_path, seed, exact)
    write_outputs(aggregate(tmp_path))
    with open(tmp_path / "paper_ratios.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["unit"], row["rule"], row["train_units"]) == (
        "operand digits",
        "exact_match > 0.98",
        "10",
    )
    assert_close(float(row["mean"]), (1.5 + 1.0 + 0.0) / 3)


def test_summary_md_shows_the_papers_ratio_beside_rho(tmp_path):
    addition_run(tmp_path, 0, {21: 1.0, 31: 0.99})
    write_outputs(aggregate(tmp_path))
    text = (tmp_path / "summary.md").read_text()
    assert text.index("## Length-generalisation ratio") < text.index("## The papers' own ratio")


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_tasks_without_a_known_definition_get_no_file(tmp_path, task):
    write_run(tmp_path, "rope0", pe="rope", accuracy={4: 0.99, 8: 0.5},
              overrides={"data.name": task})  # fmt: skip
    write_outputs(aggregate(tmp_path))
    assert not (tmp_path / "paper_ratios.csv").exists()

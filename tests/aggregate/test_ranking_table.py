"""The notebook API's ranking as a DataFrame (``Summary.ranking_table``), as ``table`` and
``ratio_table`` are: ranking.csv's rows and columns (#52 item 4)."""

from __future__ import annotations

import pandas as pd

from lengen.aggregate import aggregate, write_outputs
from lengen.aggregate.ranking import ranking_columns
from sweep_fixture import make_sweep


def test_the_ranking_is_a_dataframe_with_ranking_csvs_rows_and_columns(tmp_path):
    summary = aggregate(make_sweep(tmp_path / "sweep"), metric="accuracy")
    assert summary.ranking  # the fixture's sweep ranks its encodings
    table = summary.ranking_table
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == list(ranking_columns(summary.ratio_thresholds))
    paths = write_outputs(summary)
    written = pd.read_csv(next(p for p in paths if p.name.startswith("ranking")))
    pd.testing.assert_frame_equal(table, written, check_dtype=False)

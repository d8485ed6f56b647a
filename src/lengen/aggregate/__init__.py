"""Aggregate a sweep folder: mean, sample std and 95% CI over training seeds, flags, ranking.

``python scripts/aggregate.py <folder>`` calls :func:`aggregate` then :func:`write_outputs`;
``scripts/plot.py`` reuses the same :class:`Summary`; :func:`load_sweep` gives notebooks every
run × length × protocol as one pandas DataFrame, :func:`load_tables` every table aggregate.py
writes as DataFrames. No torch here (fast to import).
:mod:`.load` finds and reads runs and hashes their configurations, :mod:`.stats` computes
(pandas, scipy.stats: statistics over seeds, settings), :mod:`.ranking` ranks the PEs,
:mod:`.report` writes the files, :mod:`.markdown` is summary.md's text, :mod:`.command` the
command line. The rules (what a run and a configuration are, the statistics, the not-learned
flag, which comparisons are ranked) are in docs/analysis.md.
"""

from lengen.aggregate.command import add_selection_arguments, main, summary_from_arguments
from lengen.aggregate.load import config_hash, load_sweep
from lengen.aggregate.markdown import format_markdown
from lengen.aggregate.ranking import average_ranks
from lengen.aggregate.report import load_tables, warnings_for, write_outputs
from lengen.aggregate.stats import SUMMARY_COLUMNS, Summary, aggregate

__all__ = ["SUMMARY_COLUMNS", "Summary", "add_selection_arguments", "aggregate", "average_ranks"]
__all__ += ["config_hash", "format_markdown", "load_sweep", "main", "summary_from_arguments"]
__all__ += ["load_tables", "warnings_for", "write_outputs"]

"""The command line of scripts/aggregate.py (and the options plot.py shares with it): parse,
aggregate (.stats), refuse bad input in one line, write the outputs (.report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lengen.aggregate.extension import extension_rows
from lengen.aggregate.report import (
    failed_lists,
    unwritable,
    warnings_for,
    write_failure,
    write_outputs,
)
from lengen.aggregate.stats import STATISTICS, Summary, aggregate
from lengen.aggregate.verdicts import DEFAULT_TEST_RULE
from lengen.results import CONFIG_NAME, LEARNED_ACCURACY, METRIC_DIRECTIONS, RATIO_THRESHOLDS

#: the options aggregate.py and plot.py share (which metric, runs and result files) -> argparse
SELECTION = {
    "--metric": dict(default="exact_match", choices=list(METRIC_DIRECTIONS)),
    "--min-accuracy": dict(type=float, default=LEARNED_ACCURACY),
    "--exclude-not-learned": dict(action="store_true"),
    "--reached-criterion": dict(action="store_true"),
    "--tag": dict(default=None),
}
HELP = {
    "--metric": "metric to summarise (default exact_match: the whole answer right, what the "
    "papers compare; accuracy: per-token accuracy; ppl stands in on language-modelling rows, "
    "where accuracy / exact_match are null)",
    "--min-accuracy": "flag runs whose per-token accuracy at the training length is below this "
    f"(default {LEARNED_ACCURACY}); comparisons in which no run of any PE reaches it are not "
    "ranked",
    "--exclude-not-learned": "leave flagged runs out of the statistics (default: keep and flag "
    "them)",
    "--reached-criterion": "aggregate only runs trained to a criterion "
    "(trainer.criterion_target) that reached it; the others are counted in summary.md",
    "--tag": "aggregate the re-evaluations results.<tag>.json instead of results.json (outputs "
    "get .<tag> before their extension)",
}


def add_selection_arguments(parser) -> None:
    """The options aggregate.py and plot.py share (``SELECTION``)."""
    for flag, options in SELECTION.items():
        parser.add_argument(flag, help=HELP[flag], **options)


#: aggregate.py's own options (what its tables report), beside ``SELECTION``
REPORTING = {
    "--statistic": dict(default="mean", choices=list(STATISTICS)),
    "--ratio-thresholds": dict(type=float, nargs="+", default=list(RATIO_THRESHOLDS)),
    "--test-rule": dict(default=DEFAULT_TEST_RULE, metavar="K/N"),
}
HELP |= {
    "--statistic": "what the tables show and the ranking ranks by, over seeds: mean (± 95%% CI, "
    "the default) or max / min, the statistic of papers that report the best seed (e.g. the "
    "Chomsky-hierarchy benchmarks: max over seeds)",
    "--ratio-thresholds": "the τ of the length-generalisation ratio ρ_τ, numbers in (0, 1] "
    "(default 0.9 0.5)",
    "--test-rule": "when a comparison is a test of its claim: every arm reached the "
    "in-distribution criterion in at least K of every N of its seeds (default "
    f"{DEFAULT_TEST_RULE}); otherwise summary.md and verdicts.json call it not a test, naming "
    "the arms that did not learn",
}


def summary_from_arguments(args) -> Summary | None:
    """Aggregate ``args.folder`` (one folder, or several to compare: ``[LABEL=]FOLDER``) as
    the options say (``SELECTION``, and ``REPORTING`` where the parser has them); None (message
    printed) on bad input."""
    flags = [*SELECTION, *(flag for flag in REPORTING if hasattr(args, _dest(flag)))]
    options = {_dest(flag) for flag in flags}
    if args.tag is not None and not _plain_name(args.tag):  # it becomes part of file names
        print(f"error: --tag {args.tag!r}: allowed: a tag as eval.py names them (letters, "
              "digits, '-', '_' and '.')", file=sys.stderr)  # fmt: skip
        return None
    if args.tag in METRIC_DIRECTIONS:  # summary.<tag>.csv would be another metric's file
        print(f"error: --tag {args.tag} is a metric's name; tags that name a metric are not "
              "aggregated (output names carry the metric)", file=sys.stderr)  # fmt: skip
        return None
    try:
        folders = sweep_arguments(args.folder)
        if len(folders) > 1 and getattr(args, "out", None) is None:
            raise ValueError("several folders are compared into a folder of their own: --out DIR")
        return aggregate(folders, **{name: getattr(args, name) for name in options})
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def _plain_name(tag: str) -> bool:
    """eval.py's rule for a tag (``lengen.reeval.check_tag``): ``../x`` would write outside
    the folder, ``a/b`` into folders of its own."""
    return tag.replace("-", "").replace("_", "").replace(".", "").isalnum()


def no_runs(summary: Summary) -> str | None:
    """The refusal of a folder holding no run directory at all (a wrong path, most likely):
    nothing to summarise, so nothing is written into it; None where runs were found."""
    if summary.runs:
        return None
    folders = ", ".join(str(path) for _, path in summary.sources) or str(summary.folder)
    return (
        f"{folders}: no run directories (holding {CONFIG_NAME}) below it; allowed: a sweep "
        "folder or run directory of lengen (results/multiruns/…, results/runs/…)"
    )


class OneLineParser(argparse.ArgumentParser):
    """argparse whose refusals are one line, ``error: …`` as the rest of lengen's (argparse
    prints its whole usage first), exit 2; ``--help`` is unchanged."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def sweep_arguments(values) -> list:
    """The command line's folders: ``FOLDER`` or ``LABEL=FOLDER`` (a comparison's label) ->
    what ``aggregate`` takes (one path, or a list of (label, path))."""
    values = [str(value) for value in (values if isinstance(values, list) else [values])]
    pairs = []
    for value in values:
        label, _, path = value.partition("=")
        if path and not Path(value).exists():
            pairs.append((label, Path(path)))
        else:
            pairs.append((None, Path(value)))
    return [pairs[0][1]] if len(pairs) == 1 and pairs[0][0] is None else pairs


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def main(argv: list[str] | None = None) -> int:
    """The CLI behind scripts/aggregate.py: 0 done (failed runs are listed, not errors), 2 bad
    input or an output folder that cannot be written (nothing written), 4 writing failed on the
    way (a full disk)."""
    parser = OneLineParser(
        prog="aggregate.py",
        description="Summarise a sweep folder: summary.csv, summary.md, ratios.csv, ranking.csv, "
        "failed.csv, runs.csv (mean ± 95% CI over seeds; with --metric other than exact_match "
        "summary.<metric>.csv, …). Several folders ([LABEL=]FOLDER …, with --out): the sweeps "
        "compared, each a setting sweep=LABEL. See docs/analysis.md.",
    )
    parser.add_argument(
        "folder", nargs="+", help="a sweep folder (searched recursively); several: [LABEL=]FOLDER"
    )
    add_selection_arguments(parser)
    for flag, options in REPORTING.items():
        parser.add_argument(flag, help=HELP[flag], **options)
    parser.add_argument(
        "--out", type=Path, default=None, help="write the outputs here (default: the folder)"
    )
    args = parser.parse_args(argv)
    summary = summary_from_arguments(args)
    if summary is None:
        return 2
    if problem := no_runs(summary) or unwritable(out_dir := args.out or summary.folder):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        paths = write_outputs(summary, out_dir, extension_rows(summary))
    except OSError as error:  # after the probe: a disk that filled up, a folder made read-only
        print(f"error: {write_failure(out_dir, error)}", file=sys.stderr)
        return 4
    for line in warnings_for(summary, failed_lists(summary, paths)):  # the lists it wrote
        print(f"warning: {line}", file=sys.stderr)
    configurations = len({row["_hash"] for row in summary.rows})
    print(
        f"{len(summary.aggregated)} run(s) in {configurations} configuration(s) -> "
        + ", ".join(map(str, paths))
    )
    return 0

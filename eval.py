"""Re-evaluate a run: ``python eval.py run=<run dir> eval.lengths=[64,128] [tag=long]``.

Writes ``results.<tag>.json`` and ``extrapolation.<tag>.png`` beside the run's results; nothing
already there is overwritten. Arguments are key=value: ``run=`` (required), ``tag=`` (default:
eval-<date>-<time>), and overrides of the run's evaluation (``eval.*``) or of its encoding's
length extension (``pe.scaling=yarn pe.scaling_factor=4``). Exit 0 done, 2 bad input, 4 the
results could not be written (a full disk), 5 out of memory, 130 Ctrl-C. See ``lengen.reeval``
and docs/analysis.md.
"""

import sys

from lengen.caches import use_lengen_caches
from lengen.checks import ConfigError, EvaluationOutOfMemory
from lengen.errors import ResultsWriteError

use_lengen_caches()  # before anything imports matplotlib or torch (docs/scaling.md)


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):  # before any check: help is not bad input
        print(__doc__.strip())
        sys.exit(0)
    from lengen.process import outlive_closed_output
    from lengen.reeval import evaluate_run

    outlive_closed_output()  # `eval.py … | head` or a closed terminal: the evaluation goes on

    try:
        evaluate_run(sys.argv[1:])
    except (ConfigError, EvaluationOutOfMemory, ResultsWriteError) as error:
        print(f"error: {error}", file=sys.stderr)
        statuses = ((ConfigError, 2), (ResultsWriteError, 4), (EvaluationOutOfMemory, 5))
        sys.exit(next(status for kind, status in statuses if isinstance(error, kind)))
    except KeyboardInterrupt:  # a results file is written whole (atomically) or not at all
        print("eval.py interrupted by SIGINT (Ctrl-C)", file=sys.stderr)
        sys.exit(130)

"""Re-evaluate a run: ``python eval.py run=<run dir> eval.lengths=[64,128] [tag=long]``.

Writes ``results.<tag>.json`` and ``extrapolation.<tag>.png`` beside the run's results; nothing
already there is overwritten. See ``lengen.reeval``.
"""

import sys

from lengen.caches import use_lengen_caches
from lengen.checks import ConfigError, EvaluationOutOfMemory

use_lengen_caches()  # before anything imports matplotlib or torch (docs/scaling.md)


if __name__ == "__main__":
    from lengen.reeval import evaluate_run

    try:
        evaluate_run(sys.argv[1:])
    except (ConfigError, EvaluationOutOfMemory) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2 if isinstance(error, ConfigError) else 5)
    except KeyboardInterrupt:  # a results file is written whole (atomically) or not at all
        print("eval.py interrupted by SIGINT (Ctrl-C)", file=sys.stderr)
        sys.exit(130)

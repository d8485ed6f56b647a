"""What the attention diagnostics cost (``eval.diagnostics``, docs/analysis.md): evaluation of one
model at the same lengths with the diagnostics off and on, back to back, best of ``--repeat``.

python scripts/bench_diagnostics.py [--run DIR] [overrides …] [--repeat 3]

Without ``--run``, the default experiment's model (untrained: the cost does not depend on the
weights) and data, with the given overrides (e.g. ``data.len=64 eval.samples=512``); with
``--run``, a finished run's model. Prints one line per setting and the ratio; record the
numbers in docs/benchmarks.md with the machine they ran on.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lengen.caches import use_lengen_caches

use_lengen_caches()


def build_model(run: Path | None, overrides: list[str]):
    """(cfg, data, model, lengths) of a run, or of the default experiment with overrides."""
    if run is not None:
        import lengen

        loaded = lengen.load_run(run, overrides)
        return loaded.config, loaded.data, loaded.model, loaded.lengths
    from hydra import compose, initialize_config_dir

    from lengen.build import build
    from lengen.config import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    return (cfg, *build(cfg))


def seconds(cfg, data, model, lengths, diagnostics: bool, repeat: int) -> float:
    """Best wall time of ``repeat`` evaluations (rows and, when on, the diagnostics)."""
    from omegaconf import OmegaConf

    from lengen.evaluation import evaluate

    settings = OmegaConf.merge(cfg.eval, {"diagnostics": diagnostics})
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        evaluate(data, model, lengths, settings=settings, report={}, progress=False)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_diagnostics.py", description=__doc__)
    parser.add_argument("--run", type=Path, default=None, help="a finished run directory")
    parser.add_argument("--repeat", type=int, default=3, help="evaluations per setting (best)")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. eval.samples=512")
    args = parser.parse_args(argv)
    cfg, data, model, lengths = build_model(args.run, args.overrides)
    model.eval()
    off = seconds(cfg, data, model, lengths, False, args.repeat)
    on = seconds(cfg, data, model, lengths, True, args.repeat)
    samples = cfg.eval.get("diagnostics_samples", 4)
    print(f"lengths {lengths}, eval.samples {cfg.eval.samples}, diagnostics_samples {samples}")
    print(f"evaluation, diagnostics off: {off:.2f} s")
    print(f"evaluation, diagnostics on:  {on:.2f} s  ({on / off:.3f}x, +{on - off:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A LongRoPE-style search for per-dimension RoPE rescale factors on a trained RoPE run, at
lengen's scale (issue #48 item 3; docs/pe.md, "Per-dimension rescale factors by search").

python scripts/search_rope_factors.py --run <rope run dir> --length 64 --out factors.json
       [--generations 4] [--population 8] [--parents 4] [--mutations 4] [--crossovers 2]
       [--step 0.25] [--max-factor <length / training positions>] [--samples 64] [--seed 0]

Pair i of RoPE turns at θ_i / λ_i instead of θ_i, with factors 1 ≤ λ_0 ≤ λ_1 ≤ … ≤ λ_max
(non-decreasing: low frequencies are stretched more; LongRoPE's ``dim_mono`` constraint). The
factors are searched by an evolutionary search as microsoft/LongRoPE's
``evolution/algorithms/genetic_base.py`` (``run_genetic_algorithm``: keep the best ``parents``,
add ``mutations`` mutated and ``crossovers`` crossed-over children per generation) and
``evolution/algorithms/dim_mono.py`` (``mutate``: each factor, with probability 0.3, redrawn on
a grid of ``step`` between its neighbours; ``crossover``: each factor taken from the other
parent with probability 0.3 · 0.5; children that break monotonicity or repeat one already seen
are redrawn). The population starts from NTK-aware factors (λ_i = s^(2i/(d−2)), the
frequencies of ``pe.scaling=ntk``) and their mutations.

**Objective**, LongRoPE2's "needle-driven" perplexity in spirit (Shang et al., 2025, arXiv
2502.20082; the paper's text is not stored here, so its exact needle selection is not
reproduced): the teacher-forced loss on the task's scored answer tokens only, at ``--length``,
over ``--samples`` held-out instances (the evaluation seed's, the same for every candidate, so
candidates are compared on paired instances). On retrieval tasks (``data=passkey``,
``niah_multikey``) the scored tokens are the needle's. Not done here: LongRoPE2's critical
dimension (factors below it fixed by theory) and its mixed-context fine-tuning.

The search touches only this process's copy of the model: the run directory is read, not
written. ``--out`` receives the best factors, their loss, the losses of plain RoPE, PI and NTK
at the same length and instances, and every candidate evaluated (JSON, written whole).
Exit 0 done, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lengen.caches import use_lengen_caches

use_lengen_caches()  # before anything imports matplotlib or torch (docs/scaling.md)


class Refusal(Exception):
    """An option or run this script cannot use: one line, exit status 2."""


# -- the search space (numpy; no torch) ---------------------------------------------------------
def ntk_factors(pairs: int, scale: float) -> np.ndarray:
    """λ_i = s^(2i/(d−2)), d = 2 · pairs: NTK-aware RoPE's θ_i / θ'_i (1 at the fastest pair,
    s at the slowest)."""
    if pairs == 1:
        return np.ones(1)
    return scale ** (np.arange(pairs) / (pairs - 1))


def is_monotone(factors: np.ndarray) -> bool:
    return bool(np.all(np.diff(factors) >= 0))


def mutate(factors: np.ndarray, rng, *, max_factor: float, step: float, seen) -> np.ndarray:
    """A monotone child of ``factors`` not in ``seen`` (dim_mono.mutate): each factor, with
    probability 0.3, redrawn on the grid of ``step`` between its neighbours (1 below the first,
    ``max_factor`` above the last)."""
    for _ in range(1000):
        child = factors.copy()
        for dim in range(len(child)):
            if rng.random() >= 0.3:
                continue
            low = child[dim - 1] if dim > 0 else 1.0
            high = child[dim + 1] if dim < len(child) - 1 else max_factor
            grid = np.arange(low, high + step / 2, step)
            grid = grid[(grid >= low) & (grid <= high)]
            if len(grid):
                child[dim] = grid[rng.integers(len(grid))]
        if is_monotone(child) and not any(np.allclose(child, other) for other in seen):
            return child
    return factors.copy()  # the space around it is exhausted: the parent again


def crossover(first: np.ndarray, second: np.ndarray, rng, *, seen, tries: int = 16):
    """A monotone child taking each factor from ``second`` with probability 0.3 · 0.5, else
    ``first``'s (dim_mono.crossover); None where the parents agree or no try is new."""
    if np.allclose(first, second):
        return None
    for _ in range(tries):
        child = first.copy()
        for dim in range(len(child)):
            if rng.random() < 0.3 and rng.random() < 0.5:
                child[dim] = second[dim]
        if is_monotone(child) and not any(np.allclose(child, other) for other in seen):
            return child
    return None


def evolve(evaluate, initial: np.ndarray, *, generations: int, population: int, parents: int,
           mutations: int, crossovers: int, max_factor: float, step: float, seed: int):  # fmt: skip
    """run_genetic_algorithm at lengen's scale: ``evaluate(factors) -> loss`` -> (best factors,
    best loss, history [(factors, loss)] in evaluation order)."""
    rng = np.random.default_rng(seed)
    history: list[tuple[np.ndarray, float]] = []

    def scored(factors):
        history.append((factors, float(evaluate(factors))))
        return history[-1]

    seen = lambda: [f for f, _ in history]  # noqa: E731 - every candidate so far
    pool = [scored(initial)]
    while len(pool) < population:
        pool.append(scored(mutate(initial, rng, max_factor=max_factor, step=step, seen=seen())))
    for _ in range(generations):
        best = sorted(pool, key=lambda item: item[1])[:parents]
        pool = list(best)
        for _ in range(mutations):
            parent = best[rng.integers(len(best))][0]
            pool.append(scored(mutate(parent, rng, max_factor=max_factor, step=step,
                                      seen=seen())))  # fmt: skip
        for _ in range(crossovers):
            if len(best) < 2:
                break
            one, two = sorted(rng.choice(len(best), 2, replace=False))
            child = crossover(best[one][0], best[two][0], rng, seen=seen())
            if child is None:  # as the reference: mutate the first parent instead
                child = mutate(best[one][0], rng, max_factor=max_factor, step=step, seen=seen())
            pool.append(scored(child))
    factors, loss = min(pool, key=lambda item: item[1])
    return factors, loss, history


# -- the model ------------------------------------------------------------------------------------
def rope_modules(model):
    """The model's RoPE encodings (one per stack), refused unless it has exactly plain RoPE."""
    from lengen.pe.rope import RoPE

    found = [module for module in model.modules() if type(module) is RoPE]
    if not found:
        raise Refusal("--run: the run's encoding is not pe=rope; allowed: a RoPE run")
    for pe in found:
        if pe.axes != 1 or pe.cfg.scaling != "none" or pe.extension is not None:
            raise Refusal(
                "--run: the run's RoPE already scales or re-maps positions (pe.scaling, "
                "pe.extension) or sits on a grid; allowed: plain RoPE on sequences"
            )
    return found


def set_factors(encodings, factors: np.ndarray) -> None:
    """θ'_i = θ_i / λ_i for every RoPE of the model, on this process's copy only: RoPE keeps
    its static frequencies per device in ``_inv_freq`` (no buffer, nothing in checkpoints)."""
    import torch

    for pe in encodings:
        base = getattr(pe, "_searched_base", None)
        if base is None:
            base = pe._searched_base = pe._inv_freq["cpu"].clone()
        scaled = (base.double() / torch.as_tensor(factors, dtype=torch.float64)).float()
        pe._inv_freq = {"cpu": scaled}


def answer_loss(run, length: int, samples: int) -> float:
    """The teacher-forced loss on the scored (answer) tokens at ``length``."""
    from lengen.evaluation.tasks import score_lengths

    (row,) = score_lengths(run.model, run.data, [length], samples=samples, progress=False)
    return float(row["loss"])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--parents", type=int, default=4)
    parser.add_argument("--mutations", type=int, default=4)
    parser.add_argument("--crossovers", type=int, default=2)
    parser.add_argument("--step", type=float, default=0.25)
    parser.add_argument("--max-factor", type=float, default=None)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for key in ("length", "generations", "population", "parents", "samples"):
        if getattr(args, key) < 1:
            raise Refusal(f"--{key}={getattr(args, key)}: allowed: an integer >= 1")
    if args.parents > args.population:
        raise Refusal(f"--parents={args.parents}: allowed: at most --population")
    if not args.step > 0:
        raise Refusal(f"--step={args.step}: allowed: a number > 0")
    if args.out.exists():
        raise Refusal(f"--out={args.out}: exists; allowed: a new file (nothing is overwritten)")
    if not args.out.parent.is_dir():
        raise Refusal(f"--out={args.out}: its folder does not exist")

    from lengen.api import load_run

    run = load_run(args.run)
    if run.config.data.get("name") == "text":
        raise Refusal("--run: a language-modelling run; allowed: a task run (data=passkey, …)")
    encodings = rope_modules(run.model)
    train = encodings[0].train_positions or 1
    scale = args.max_factor or max(1.0, args.length / run.config.data.len)
    if scale < 1:
        raise Refusal(f"--max-factor={scale}: allowed: a number >= 1")
    pairs = len(encodings[0]._inv_freq["cpu"])

    def evaluate(factors):
        set_factors(encodings, factors)
        return answer_loss(run, args.length, args.samples)

    baselines = {
        "none": evaluate(np.ones(pairs)),
        "pi": evaluate(np.full(pairs, scale)),
        "ntk": evaluate(ntk_factors(pairs, scale)),
    }
    factors, loss, history = evolve(
        evaluate, ntk_factors(pairs, scale), generations=args.generations,
        population=args.population, parents=args.parents, mutations=args.mutations,
        crossovers=args.crossovers, max_factor=scale, step=args.step, seed=args.seed,
    )  # fmt: skip
    report = {
        "run": str(args.run),
        "length": args.length,
        "train_positions": train,
        "samples": args.samples,
        "max_factor": scale,
        "factors": [float(f) for f in factors],
        "loss": loss,
        "baselines": baselines,
        "history": [{"factors": [float(x) for x in f], "loss": value} for f, value in history],
        "settings": {
            key: getattr(args, key)
            for key in (
                "generations",
                "population",
                "parents",
                "mutations",
                "crossovers",
                "step",
                "seed",
            )
        },  # fmt: skip
    }
    from lengen.atomic import atomic_write

    atomic_write(args.out, json.dumps(report, indent=1) + "\n")
    print(f"best loss {loss:.4f} at {args.length} (none {baselines['none']:.4f}, "
          f"pi {baselines['pi']:.4f}, ntk {baselines['ntk']:.4f}); factors: {args.out}")  # fmt: skip
    return report


if __name__ == "__main__":
    from lengen.checks import ConfigError

    try:
        main()
    except (Refusal, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)

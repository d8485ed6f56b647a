#!/usr/bin/env bash
# Sinks by encoding at CPU scale (issue #48; docs/reproductions.md (k)): Gu et al. 2025, "When
# Attention Sink Emerges in Language Models: An Empirical View" (ICLR, arXiv 2410.10781) find a
# first-token sink under every encoding (their Table 3: NoPE, absolute, learnable, relative,
# ALiBi, RoPE), moved onto a learned key bias (Table 4) and gone under sigmoid attention without
# normalisation (Table 6). WikiText-2 language models (experiment=sinks_small), 3 seeds per arm:
#   encodings  pe=nope,sinusoidal,learned,t5,alibi,rope          (Table 3's six)
#   kv_bias    pe=rope model.kv_bias=true     a learned key and value per head (Table 4, "KV biases")
#   attn_sinks pe=rope model.attn_sinks=true  gpt-oss's learned sink logit (no Gu et al. row; the
#                                             nearest is Table 4's key bias with value 0)
#   sigmoid    pe=rope model.attn_fn=sigmoid  sigmoid(l − log n), no normalisation (Table 6's
#                                             sigmoid row has no −log n bias: Ramapuram et al.'s)
# then scripts/aggregate.py's tables and verdict classes, and per arm Gu et al.'s Sink^ε_1
# (eval.diagnostics' sink_rate at 64 tokens, ε = 0.3, 100 windows) as mean ± 95% t interval
# over seeds beside the paper's cell and the trivial baseline (uniform causal attention: α =
# H_64 / 64 = 0.074 < ε, rate 0), and perplexity at 128:
# sinks.md / sinks.csv in the sweep folder, printed. Hydra multiruns through hydra/launcher=local
# (one run per core, one torch thread each), resume=auto (a re-run trains only what is missing).
#   bash scripts/reproduce_sinks_by_encoding.sh [sweep dir] [overrides…]   (default
#        results/multiruns/sinks_small; overrides reach every run)
#   ENCODINGS=rope OPTIONS= SEEDS=0 bash scripts/reproduce_sinks_by_encoding.sh   (a subset)
#   DRY=1 bash scripts/reproduce_sinks_by_encoding.sh    (the commands; nothing runs or is written)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/sinks_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
encodings=${ENCODINGS-nope,sinusoidal,learned,t5,alibi,rope}
options=${OPTIONS-kv_bias attn_sinks sigmoid}
seeds=${SEEDS:-0,1,2}
status=0  # a run that fails is listed by the sweep's report; the others and the table go on
common=(experiment=sinks_small seed="$seeds" resume=auto hydra.sweep.dir="$sweep"
        hydra/launcher=local)
train() {
    if [[ -n ${DRY:-} ]]; then
        echo "+ $python train.py -m ${common[*]} $*"
    else
        "$python" train.py -m "${common[@]}" "$@" || status=$?
    fi
}
declare -A option_overrides=([kv_bias]=model.kv_bias=true [attn_sinks]=model.attn_sinks=true
                              [sigmoid]=model.attn_fn=sigmoid)
for option in $options; do  # refused before anything trains
    if [[ -z ${option_overrides[$option]:-} ]]; then
        echo "error: OPTIONS: unknown option '$option'; allowed: kv_bias, attn_sinks, sigmoid" >&2
        exit 2
    fi
done
[[ -n $encodings ]] && train pe="$encodings" "$@"
for option in $options; do
    train pe=rope "${option_overrides[$option]}" "$@"
done
if [[ -n ${DRY:-} ]]; then  # the sweep's estimate, as the sweeper prints it before its first run
    echo "+ $python scripts/aggregate.py $sweep --metric ppl"
    echo "+ (the per-arm table: $sweep/sinks.md, sinks.csv)"
    "$python" - "$encodings" "$options" "$seeds" "$@" <<'EOF'
import os
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from lengen.sweep_estimate import planned_runs, total_line

encodings, options, seeds, *extra = sys.argv[1:]
extra = [o for o in extra if not o.startswith("hydra")]  # launcher keys: not the runs' configs
flags = {"kv_bias": "model.kv_bias=true", "attn_sinks": "model.attn_sinks=true",
         "sigmoid": "model.attn_fn=sigmoid"}
arms = [[f"pe={pe}"] for pe in encodings.split(",") if pe]
arms += [["pe=rope", flags[option]] for option in options.split()]
with initialize_config_dir(config_dir=str(Path("configs").resolve()), version_base="1.3"):
    configs = [compose("train", ["experiment=sinks_small", f"seed={seed}", *arm, *extra])
               for arm in arms for seed in seeds.split(",")]
print(total_line(planned_runs(configs, [1] * len(configs)), workers=os.cpu_count() or 1))
EOF
    exit 0
fi
# the sweep's tables and verdict classes (summary.ppl.csv, verdicts.json, …), then the sink table
"$python" scripts/aggregate.py "$sweep" --metric ppl || status=$?
"$python" - "$sweep" <<'EOF' || status=$?
"""Per arm: Gu et al.'s Sink^ε_1 at 64 tokens over seeds beside their cell and the baseline."""
import csv
import io
import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from lengen.atomic import atomic_write
from lengen.aggregate.stats import seed_statistics
from lengen.evaluation.diagnostics import uniform_first_token_alpha, uniform_sink_rate

LENGTH, TRAIN_LEN = 64, 128
# Gu et al.'s Sink^ε_1 (%) per arm, 60M LLaMA models on 5B Pile tokens. Table 3 (encodings):
# from a third-party summary of the paper (viktor-shcherb/msc_thesis,
# references/2025-04-attention-sink-emerges/analysis.md); the stored paper copy shows only
# its abstract. Tables 4 and 6: also in the code's README images (sail-sg/Attention-Sink
# assets/model2.png, assets/model1.png), read there.
PAPER = {
    "nope": "20.35 (Table 3)", "sinusoidal": "32.73 (Table 3, absolute)",
    "learned": "33.13 (Table 3, learnable)", "t5": "35.53 (Table 3, relative)",
    "alibi": "20.78 (Table 3)", "rope": "18.18 (Table 3)",
    "rope + kv_bias": "0.04; 72.76 on the bias (Table 4, KV biases)",
    "rope + attn_sinks": "none (Table 4's key bias with v = 0: 0.00; 73.34 on it)",
    "rope + sigmoid": "0.44, proxy (Table 6, sigmoid without normalisation)",
}


def arm(config) -> str:
    model, extras = config.model, []
    extras += ["kv_bias"] if model.get("kv_bias") else []
    extras += ["attn_sinks"] if model.get("attn_sinks") else []
    extras += ["sigmoid"] if model.get("attn_fn", "softmax") != "softmax" else []
    return " + ".join([config.pe.name, *extras])


sweep = Path(sys.argv[1])
rates, ppls = {}, {}
for results_path in sorted(sweep.glob("*/results.json")):
    results = json.loads(results_path.read_text())
    name = arm(OmegaConf.load(results_path.parent / "config.yaml"))
    entry = results.get("attention_diagnostics", {}).get("lengths", {}).get(str(LENGTH), {})
    if entry.get("sink_rate") is not None:
        rates.setdefault(name, []).append(100 * entry["sink_rate"])
    ppls.setdefault(name, []).extend(
        row["ppl"] for row in results["eval"] if row["length"] == TRAIN_LEN and row["ppl"])
if not rates:
    sys.exit(f"error: {sweep}: no finished run with a sink rate at {LENGTH} tokens")
rows = []
for name in sorted(rates, key=lambda n: (list(PAPER).index(n) if n in PAPER else 99, n)):
    stat, ppl = seed_statistics(rates[name], True), seed_statistics(ppls.get(name, []), False)
    half = None if stat["std"] is None else stat["ci95_high"] - stat["mean"]
    rows.append({"arm": name, "seeds": stat["n"], "sink_rate_pct": round(stat["mean"], 2),
                 "ci95_half_width": None if half is None else round(half, 2),
                 "min": round(stat["min"], 2), "max": round(stat["max"], 2),
                 "ppl_at_128": None if ppl["mean"] is None else round(ppl["mean"], 1),
                 "gu_et_al": PAPER.get(name, "none")})
baseline = 100 * uniform_sink_rate(LENGTH)
alpha = uniform_first_token_alpha(LENGTH)
table = io.StringIO()
writer = csv.DictWriter(table, fieldnames=list(rows[0]), lineterminator="\n")
writer.writeheader()
writer.writerows(rows)
atomic_write(sweep / "sinks.csv", table.getvalue())
lines = [f"Sink^ε_1 (%) at {LENGTH} tokens, ε = 0.3, mean ± 95% t half-width over seeds "
         f"(trivial baseline, uniform causal attention: {baseline:.2f}, α = {alpha:.3f} < ε)", "",
         "| arm | seeds | sink rate (%) | min–max | ppl at 128 | Gu et al. (%) |",
         "|---|---|---|---|---|---|"]
for r in rows:
    spread = "" if r["ci95_half_width"] is None else f" ± {r['ci95_half_width']:.2f}"
    lines.append(f"| {r['arm']} | {r['seeds']} | {r['sink_rate_pct']:.2f}{spread} | "
                 f"{r['min']:.2f}–{r['max']:.2f} | {r['ppl_at_128']} | {r['gu_et_al']} |")
lines.append(f"| uniform attention (baseline) | – | {baseline:.2f} | – | – | – |")
atomic_write(sweep / "sinks.md", "\n".join(lines) + "\n")
print("\n".join(lines))
EOF
exit "$status"

"""One line per run of this pilot: accuracy at 16 and 32, the largest share of attention any
head puts on the previous token (distance 1, length 16: a previous-token head, the first half of
copying by induction), and, for PoPE, where δ ended (checkpoints/last.ckpt: a δ above 0 is used
as 0 by the clamp). Usage: python summarize.py <run dir>…"""

import json
import sys
from pathlib import Path

import torch

for run in map(Path, sys.argv[1:]):
    results = json.loads((run / "results.json").read_text())
    rows = {row["length"]: row for row in results["eval"]}
    layers = results["attention_diagnostics"]["lengths"]["16"]["layers"].values()
    previous = max(head[1] for layer in layers for head in layer["bucket_mass"])
    line = (
        f"{run.name:22s} acc16 {rows[16]['accuracy']:.3f} exact16 {rows[16]['exact_match']:.3f}"
        f" acc32 {rows[32]['accuracy']:.3f} | previous-token mass, best head {previous:.2f}"
    )
    checkpoint = run / "checkpoints" / "last.ckpt"
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
        deltas = [value for key, value in state.items() if key.endswith("phase_bias")]
        if deltas:
            delta = deltas[0]  # (H, hd), one PoPE module shared by the layers
            line += (
                f" | δ above 0 {float((delta > 0).float().mean()):.2f}"
                f" range [{float(delta.min()):.2f}, {float(delta.max()):.2f}]"
                f" mean |δ| {float(delta.abs().mean()):.3f}"
            )
    print(line)

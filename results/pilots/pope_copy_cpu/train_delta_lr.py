"""A diagnostic, not lengen: train.py with PoPE's δ (pe.phase_bias) in an AdamW group of its own
at DELTA_LR (an environment variable; every other parameter keeps optim.lr and its group), so
one learning rate can be changed for δ alone or for everything but δ. AdamW's decay of δ is kept
(δ is a 2-d parameter: lit.configure_optimizers decays it). The schedule multiplies every
group's rate alike (the scheduler is made again over the three groups). Usage: DELTA_LR=1e-3 python train_delta_lr.py optim.lr=3e-3 <overrides>."""

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[3])  # the repository
sys.path.insert(0, ROOT)

# an absolute config root: imported as a module, train.py's relative "configs" would be a package
os.environ.setdefault("LENGEN_CONFIG_DIR", os.path.join(ROOT, "configs"))
import torch  # noqa: E402
import train  # noqa: E402

from lengen import lit  # noqa: E402

_original = lit.LitModel.configure_optimizers


def configure_optimizers(self):
    out = _original(self)
    optimizer = out["optimizer"]
    delta = {id(p) for n, p in self.model.named_parameters() if n.endswith("phase_bias")}
    decayed = optimizer.param_groups[0]
    moved = [p for p in decayed["params"] if id(p) in delta]
    decayed["params"] = [p for p in decayed["params"] if id(p) not in delta]
    rate = float(os.environ["DELTA_LR"])
    optimizer.add_param_group({**{k: v for k, v in decayed.items() if k != "params"},
                               "params": moved, "lr": rate, "initial_lr": rate})  # fmt: skip
    # a scheduler made before the new group would leave it at a constant rate: make it again
    # with the same schedule (a function of the step) over all three groups
    table = out["lr_scheduler"]["scheduler"].lr_lambdas[0]
    out["lr_scheduler"]["scheduler"] = torch.optim.lr_scheduler.LambdaLR(optimizer, table)
    print(f"[diagnostic] δ ({len(moved)} parameter) at lr {rate}", file=sys.stderr)
    return out


lit.LitModel.configure_optimizers = configure_optimizers
if __name__ == "__main__":
    train.main()

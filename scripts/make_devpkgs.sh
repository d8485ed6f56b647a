#!/usr/bin/env bash
# Fill .devpkgs/ (git-ignored) with the pure-Python packages lengen needs that a lent GPU machine
# lacks (/work/.library/device/KINDS.md lists what it has: torch, pytorch-lightning, pandas,
# matplotlib, scipy, tokenizers, joblib; not hydra-core, omegaconf, antlr4-python3-runtime), copied
# from this checkout's virtualenv. scripts/device_run.sh puts .devpkgs and src on PYTHONPATH; the
# device call must carry it: run(command="bash scripts/device_run.sh", carry=[".devpkgs"]).
#
#   bash scripts/make_devpkgs.sh            # from .venv (or VENV=/path/to/venv)
#
# Copied: hydra, omegaconf, antlr4 (the grammar runtime of omegaconf and hydra) and the joblib
# launcher's plugin (hydra/launcher=local), with their .dist-info (versions). Not the submitit
# launcher (submitit is not on the machine; lengen's own SLURM launcher is in src/), not wandb or
# datasets (lengen imports them only when a run asks for them). All pure Python: the virtualenv's
# Python 3.11 copies serve the machine's Python 3.12.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DEST=$ROOT/.devpkgs
rm -rf "$DEST"
mkdir -p "$DEST/hydra_plugins"
for package in hydra omegaconf antlr4; do
    cp -r "$SITE/$package" "$DEST/"
done
cp -r "$SITE/hydra_plugins/hydra_joblib_launcher" "$DEST/hydra_plugins/"
for info in hydra_core omegaconf antlr4_python3_runtime hydra_joblib_launcher; do
    cp -r "$SITE"/"$info"-*.dist-info "$DEST/"
done
find "$DEST" -name __pycache__ -type d -prune -exec rm -rf {} +
echo "$DEST: $(du -sh "$DEST" | cut -f1) ($(ls "$DEST" | tr '\n' ' '))"

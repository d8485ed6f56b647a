"""Train short, evaluate long: ``python train.py pe=rope data.len=16 [model=…] [-m …]``.

A thin Hydra entry point; the work is ``lengen.train.run``. Config root: configs/train.yaml.
"""

import sys

import hydra
from omegaconf import DictConfig

from lengen.config import ConfigError, check_group_overrides


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    from lengen.cli import train_main

    train_main(cfg)


if __name__ == "__main__":
    from lengen.cli import already_finished, check_override_keys

    try:  # unknown group choices and keys fail here, before Hydra composes anything
        check_group_overrides(sys.argv[1:])
        check_override_keys(sys.argv[1:])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if already_finished(sys.argv[1:]):  # resume=true on a finished run: not even Hydra's logs
        sys.exit(0)
    main()

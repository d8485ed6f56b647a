"""Train short, evaluate long: ``python train.py pe=rope data.len=16 [model=…] [-m …]``.

A thin Hydra entry point; the work is ``lengen.train.run``. Config root: configs/train.yaml.
"""

import os
import signal
import sys


def _stop_before_start(signum, frame):
    print("interrupted by SIGINT (Ctrl-C) before the run started; nothing written", file=sys.stderr)
    sys.stderr.flush()
    # at once: nothing is written yet, and an exception raised here could land where a library
    # swallows it (a __del__, a callback), and the command would run on
    os._exit(128 + signum)


# Ctrl-C before the run starts (imports, the checks) writes nothing, so it needs no traceback
if __name__ == "__main__":
    signal.signal(signal.SIGINT, _stop_before_start)

import hydra  # noqa: E402 - after the handler: Ctrl-C during imports stops quietly too
from omegaconf import DictConfig  # noqa: E402

from lengen.caches import use_lengen_caches  # noqa: E402
from lengen.checks import ConfigError  # noqa: E402

use_lengen_caches()  # before anything imports matplotlib or torch (docs/scaling.md)


# LENGEN_CONFIG_DIR: a config root of your own (lengen.config.CONFIG_DIR)
@hydra.main(
    version_base="1.3",
    config_path=os.environ.get("LENGEN_CONFIG_DIR") or "configs",
    config_name="train",
)
def main(cfg: DictConfig) -> str:
    from lengen.cli import train_main

    return train_main(cfg)


if __name__ == "__main__":
    from lengen.process import install_preemption_handlers, outlive_closed_output

    outlive_closed_output()  # `train.py … | head` or a closed terminal: the run goes on
    install_preemption_handlers()  # from here to exit, SIGTERM/SIGUSR1 stop with a record
    from lengen.preflight import precheck

    try:  # every refusal happens here, before Hydra creates or touches a run directory
        status = precheck(sys.argv[1:])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if status is not None:  # e.g. resume on a finished run: nothing to do, nothing touched
        sys.exit(status)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the run records a Ctrl-C
    main()

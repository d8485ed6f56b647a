"""lengen: length-extrapolation studies of Transformer positional encodings."""

__version__ = "0.1.0"


def load_run(run_dir, overrides=()):
    """A finished run as a ``lengen.api.Run``: config, model with weights, data, results."""
    from lengen.api import load_run as load

    return load(run_dir, overrides)

"""lengen: length-extrapolation studies of Transformer positional encodings."""

__version__ = "0.1.0"

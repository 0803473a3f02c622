"""The package's version, stamped into pickles and model files."""

__version__ = "0.1.0"

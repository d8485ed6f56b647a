"""Data: pure task generators (tasks.py) and their formatting per model kind (datamodule.py)."""

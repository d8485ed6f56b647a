"""The mixers' typed configs, without torch: one module per mixer (``<Class>Config``), and
the rules that resolve ``model.mixer`` / ``model.mixers`` to a plan per layer (``base``)."""

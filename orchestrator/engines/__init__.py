"""The engines bench knows (images/<name>/engine.yaml), the option combinations they refuse, and the
Python environments bench makes for them (``bench env create``)."""

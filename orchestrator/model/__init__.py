"""The model every engine trains: its analytic layer list (parameter counts, FLOPs) and the shared initial weights."""

"""The ``bench`` command line (Typer + Rich)."""

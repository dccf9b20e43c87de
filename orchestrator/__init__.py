"""bench: a containerized multi-framework deep-learning benchmark orchestrator."""

__version__ = "0.1.0"

"""``python -m orchestrator`` is the ``bench`` command."""

from orchestrator.cli.app import entry

entry()

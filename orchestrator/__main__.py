"""``python -m orchestrator`` is the ``bench`` command."""

from orchestrator.cli.app import main

main()

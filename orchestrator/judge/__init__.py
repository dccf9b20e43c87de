"""Judging what ran: an engine's result read as evidence, parity, statistics, trust warnings, the summary,
and two artifacts compared."""

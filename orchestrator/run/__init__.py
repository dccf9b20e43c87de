"""Running a scenario: every run through its runtime, the maximal batch search, resuming an artifact."""

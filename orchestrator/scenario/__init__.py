"""Scenarios: YAML -> schema -> overrides -> typed Scenario (its workload, matrix, measurement...) -> semantic checks -> run plans."""

from orchestrator.scenario.load import Scenario, load_scenario, resolve_scenario_path
from orchestrator.scenario.matrix import RunPlan, expand

__all__ = ["RunPlan", "Scenario", "expand", "load_scenario", "resolve_scenario_path"]

"""Scenarios: YAML -> schema -> semantic checks -> overrides -> matrix of run plans."""

from orchestrator.scenario.load import Scenario, load_scenario, resolve_scenario_path
from orchestrator.scenario.matrix import RunPlan, expand

__all__ = ["RunPlan", "Scenario", "expand", "load_scenario", "resolve_scenario_path"]

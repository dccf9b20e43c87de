"""Engine options are validated once, by the JSON Schema in images/<engine>/engine.yaml, and the
defaults an engine applies in code are that schema's ``default`` values (no framework needed)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.engines import get_engine
from orchestrator.errors import BadInput
from tests.engines.readback_helpers import add_paths


def schema_defaults(engine: str) -> dict[str, Any]:
    properties = get_engine(engine).options_schema["properties"]
    return {name: prop["default"] for name, prop in properties.items() if "default" in prop}


def code_defaults(engine: str) -> dict[str, Any]:
    add_paths(engine)
    if engine == "jax":
        from bench_jax.options import OPTION_DEFAULTS
    else:
        from bench_tensorflow.options import OPTION_DEFAULTS
    return OPTION_DEFAULTS


@pytest.mark.parametrize("engine", ["jax", "tensorflow"])
def test_code_defaults_are_the_schema_defaults(engine: str) -> None:
    defaults = code_defaults(engine)
    assert defaults and defaults == schema_defaults(engine)
    get_engine(engine).check_options(defaults, f"engines.{engine}.options")  # the defaults are valid options


@pytest.mark.parametrize(("options", "named"), [
    ({"xla": "sometimes"}, "xla"),
    ({"no_such_option": 1}, "no_such_option"),
    ({"steps_per_dispatch": 0}, "steps_per_dispatch"),
    ({"steps_per_dispatch": "many"}, "steps_per_dispatch"),
    ({"tf_function": "yes"}, "tf_function"),
])
def test_tensorflow_schema_refuses_bad_options(options: dict[str, Any], named: str) -> None:
    """The options TensorFlow's prepare used to re-validate are refused by its schema, the option named."""
    with pytest.raises(BadInput, match=rf"engines\.tensorflow\.options\.{named}"):
        get_engine("tensorflow").check_options(options, "engines.tensorflow.options")


def test_jax_options_resolve_over_the_defaults() -> None:
    add_paths("jax")
    from bench_jax.options import donate, engine_options

    assert engine_options({}) == code_defaults("jax")
    assert donate(engine_options({}), True, "train", "cpu", "fp32") and not donate(engine_options({}), False, "train", "cpu", "fp32")
    assert not donate(engine_options({"engine_options": {"donate": True}}), True, "infer", "cpu", "fp32")


def test_jax_auto_donation_stays_off_where_it_was_measured_wrong() -> None:
    """auto does not donate at bf16 on a GPU (non-finite gradients on the H200) and says why; an explicit true still donates."""
    add_paths("jax")
    from bench_jax.options import donate, donation_declined, engine_options

    auto = engine_options({})
    assert not donate(auto, True, "train", "cuda", "bf16")
    assert donate(auto, True, "train", "cuda", "tf32") and donate(auto, True, "train", "cpu", "bf16")
    assert "non-finite" in (donation_declined(auto, True, "train", "cuda", "bf16") or "")
    assert donation_declined(auto, True, "train", "cuda", "tf32") is None
    forced = engine_options({"engine_options": {"donate": True}})
    assert donate(forced, True, "train", "cuda", "bf16") and donation_declined(forced, True, "train", "cuda", "bf16") is None


def test_tensorflow_switches_resolve_over_the_defaults() -> None:
    add_paths("tensorflow")
    from bench_engine.api import UnsupportedError
    from bench_tensorflow.options import resolve_switches

    optimized = resolve_switches({"path": "optimized", "engine_options": {}})
    assert (optimized.xla, optimized.compile_function, optimized.steps_per_dispatch) == (True, True, "auto")
    baseline = resolve_switches({"path": "baseline"})
    assert (baseline.xla, baseline.compile_function) == (False, True)
    assert not resolve_switches({"path": "optimized", "engine_options": {"xla": False, "tf_function": False}}).compile_function
    with pytest.raises(UnsupportedError, match="tf_function"):  # a combination the schema cannot express
        resolve_switches({"path": "optimized", "engine_options": {"tf_function": False}})

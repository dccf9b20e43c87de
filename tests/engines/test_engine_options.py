"""Engine options are validated once, by the JSON Schema in images/<engine>/engine.yaml, and the
defaults an engine applies in code are that schema's ``default`` values (no framework needed)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.engines.registry import get_engine
from orchestrator.errors import BadInput
from tests.engines.readback_helpers import add_paths


def unset(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Remove ``name`` from the environment for this test only (``delenv`` of an absent variable records nothing,
    so what the code under test then sets would outlive the test: an engine run later would inherit it)."""
    monkeypatch.setenv(name, "")
    monkeypatch.delenv(name)


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
    from bench_jax.options import JaxOptions, donate, engine_options
    from tests.conftest import run_spec

    defaults = JaxOptions.of({})
    assert {name: getattr(defaults, name) for name in code_defaults("jax")} == code_defaults("jax")
    assert (defaults.xla_flags, defaults.preallocate) == (None, None)  # unset: JAX's own
    assert engine_options(run_spec(engine_options={"donate": True, "xla_flags": "--x"})) == JaxOptions(donate=True, xla_flags="--x")
    assert donate(defaults, True, "train", "cpu", "fp32") and not donate(defaults, False, "train", "cpu", "fp32")
    assert not donate(JaxOptions.of({"donate": True}), True, "infer", "cpu", "fp32")


def test_jax_auto_donation_stays_off_where_it_was_measured_wrong() -> None:
    """auto does not donate at bf16 on a GPU (non-finite gradients on the H200) and says why; an explicit true still donates."""
    add_paths("jax")
    from bench_jax.options import JaxOptions, donate, donation_declined

    auto = JaxOptions.of({})
    assert not donate(auto, True, "train", "cuda", "bf16")
    assert donate(auto, True, "train", "cuda", "tf32") and donate(auto, True, "train", "cpu", "bf16")
    assert "non-finite" in (donation_declined(auto, True, "train", "cuda", "bf16") or "")
    assert donation_declined(auto, True, "train", "cuda", "tf32") is None
    forced = JaxOptions.of({"donate": True})
    assert donate(forced, True, "train", "cuda", "bf16") and donation_declined(forced, True, "train", "cuda", "bf16") is None


def test_tensorflow_switches_resolve_over_the_defaults() -> None:
    add_paths("tensorflow")
    from bench_engine.api import UnsupportedError
    from bench_tensorflow.options import resolve_switches
    from tests.conftest import run_spec

    optimized = resolve_switches(run_spec(path="optimized"))
    assert (optimized.xla, optimized.compile_function, optimized.steps_per_dispatch) == (True, True, "auto")
    baseline = resolve_switches(run_spec(path="baseline"))
    assert (baseline.xla, baseline.compile_function) == (False, True)
    assert not resolve_switches(run_spec(path="optimized", engine_options={"xla": False, "tf_function": False})).compile_function
    with pytest.raises(UnsupportedError, match="tf_function"):  # a combination the schema cannot express
        resolve_switches(run_spec(path="optimized", engine_options={"tf_function": False}))


def test_jax_command_buffers_auto_on_the_optimized_path_where_a_gpu_may_run_it() -> None:
    """auto adds XLA's command buffers over convolutions and loops on the optimized path (device cuda or auto), never on a CPU."""
    add_paths("jax")
    from bench_jax.options import JaxOptions, command_buffer_flags

    auto = JaxOptions.of({})
    flag = command_buffer_flags(auto, "optimized", "cuda")
    assert flag.startswith("--xla_gpu_enable_command_buffer=") and {"CONVOLUTION", "WHILE", "FUSION"} <= set(flag.split("=")[1].split(","))
    assert command_buffer_flags(auto, "optimized", "auto") == flag
    assert command_buffer_flags(auto, "optimized", "cpu") == "" and command_buffer_flags(auto, "baseline", "cuda") == ""
    assert command_buffer_flags(JaxOptions.of({"command_buffers": False}), "optimized", "cuda") == ""
    assert command_buffer_flags(JaxOptions.of({"command_buffers": True}), "baseline", "cuda") == flag


def test_jax_configure_process_puts_the_users_xla_flags_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench's command-buffer flag comes before the xla_flags option (XLA keeps the last), and the switch says which won."""
    add_paths("jax")
    from bench_jax.environment import configure_process
    from bench_jax.options import COMMAND_BUFFER_FLAG, REMAT_FLAG, command_buffers_switch

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
    unset(monkeypatch, "XLA_PYTHON_CLIENT_MEM_FRACTION")  # a cuda spec sets it: removed again after the test
    from tests.conftest import run_spec

    added = configure_process(run_spec(path="optimized", device="cuda"))
    import os

    assert added == COMMAND_BUFFER_FLAG and os.environ["XLA_FLAGS"] == f"--xla_dump_to=/nowhere {COMMAND_BUFFER_FLAG} {REMAT_FLAG}"
    assert command_buffers_switch(added, os.environ["XLA_FLAGS"], "cuda").applied is True
    assert command_buffers_switch(added, os.environ["XLA_FLAGS"], "cpu").applied is False

    monkeypatch.delenv("XLA_FLAGS")
    user = "--xla_gpu_enable_command_buffer=FUSION"
    added = configure_process(run_spec(path="optimized", device="cuda", engine_options={"xla_flags": user}))
    assert os.environ["XLA_FLAGS"] == f"{COMMAND_BUFFER_FLAG} {REMAT_FLAG} {user}"
    switch = command_buffers_switch(added, os.environ["XLA_FLAGS"], "cuda")
    assert switch.applied is False and user in switch.detail

    monkeypatch.delenv("XLA_FLAGS")
    added = configure_process(run_spec(path="baseline", device="cuda"))
    assert added == "" and os.environ["XLA_FLAGS"] == REMAT_FLAG  # the same work on both paths: no recomputation
    assert command_buffers_switch(added, "", "cuda") == (False, "XLA's default command buffer types (no convolutions or loops)")


def test_jax_rematerialization_is_off_wherever_a_gpu_may_run_unless_asked() -> None:
    """auto disables XLA's rematerialization pass on a GPU (device cuda or auto) on both paths, never on a CPU; true keeps XLA's default."""
    add_paths("jax")
    from bench_jax.options import REMAT_FLAG, JaxOptions, remat_flags

    auto = JaxOptions.of({})
    assert REMAT_FLAG == "--xla_disable_hlo_passes=rematerialization"
    assert remat_flags(auto, "cuda") == REMAT_FLAG and remat_flags(auto, "auto") == REMAT_FLAG
    assert remat_flags(auto, "cpu") == ""
    assert remat_flags(JaxOptions.of({"rematerialization": True}), "cuda") == ""
    assert remat_flags(JaxOptions.of({"rematerialization": False}), "cpu") == REMAT_FLAG


def test_jax_rematerialization_switch_reads_the_flag_that_won() -> None:
    """The switch is applied only where the last --xla_disable_hlo_passes XLA reads names the pass; a user's later one replaces bench's."""
    add_paths("jax")
    from bench_jax.options import REMAT_FLAG, remat_switch

    assert remat_switch(REMAT_FLAG, f"--xla_dump_to=/x {REMAT_FLAG}", "cuda").applied is True
    both = "--xla_disable_hlo_passes=fusion,rematerialization"
    assert remat_switch(REMAT_FLAG, f"{REMAT_FLAG} {both}", "cuda").applied is True
    user = "--xla_disable_hlo_passes=fusion"
    replaced = remat_switch(REMAT_FLAG, f"{REMAT_FLAG} {user}", "cuda")
    assert replaced.applied is False and user in replaced.detail
    assert remat_switch("", "", "cuda") == (False, "XLA's default: activations may be recomputed to fit the device's memory")
    assert remat_switch("", "", "cpu").applied is False


def test_jax_memory_fraction_gives_xla_the_device_wherever_a_gpu_may_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto: 95% of each GPU for XLA's allocator (JAX's own default is 75%), nothing on a CPU; a number as given;
    jaxlib's new variable name is removed (jaxlib refuses both at once); the switch reads what the process ran with."""
    add_paths("jax")
    from bench_jax.environment import configure_process
    from bench_jax.options import GPU_MEMORY_FRACTION, JaxOptions, memory_fraction, memory_fraction_switch
    from tests.conftest import run_spec

    auto = JaxOptions.of({})
    assert GPU_MEMORY_FRACTION == 0.95
    assert memory_fraction(auto, "cuda") == 0.95 and memory_fraction(auto, "auto") == 0.95
    assert memory_fraction(auto, "cpu") is None
    assert memory_fraction(JaxOptions.of({"memory_fraction": 0.6}), "cpu") == 0.6

    unset(monkeypatch, "XLA_FLAGS")
    monkeypatch.setenv("XLA_CLIENT_MEM_FRACTION", "0.5")
    unset(monkeypatch, "XLA_PYTHON_CLIENT_MEM_FRACTION")
    import os

    configure_process(run_spec(path="optimized", device="cuda"))
    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.95" and "XLA_CLIENT_MEM_FRACTION" not in os.environ
    configure_process(run_spec(path="baseline", device="cuda", engine_options={"memory_fraction": 1}))
    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "1.0"
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION")
    configure_process(run_spec(path="optimized", device="cpu"))
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in os.environ

    applied = memory_fraction_switch({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"}, "cuda", int(132.8 * 2**30))
    assert applied.applied is True and "0.95" in applied.detail and "132.8 GiB" in applied.detail
    assert memory_fraction_switch({"XLA_CLIENT_MEM_FRACTION": "0.9"}, "cuda", None).applied is True
    default = memory_fraction_switch({}, "cuda", int(104.85 * 2**30))
    assert default.applied is False and "75%" in default.detail and "104.8 GiB" in default.detail
    assert memory_fraction_switch({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"}, "cpu", None).applied is False


@pytest.mark.parametrize(  # a non-finite number: refused where the scenario is read
    ("value", "why"),
    [(0, "less than or equal to the minimum of 0"), (-0.5, "less than or equal to the minimum of 0"),
     (1.5, "greater than the maximum of 1"), ("all", "is not of type 'number'"), (True, "is not of type 'number'")],
)
def test_jax_schema_refuses_a_memory_fraction_outside_zero_to_one(value: Any, why: str) -> None:
    with pytest.raises(BadInput) as refused:
        get_engine("jax").check_options({"memory_fraction": value}, "engines.jax.options")
    message = str(refused.value)  # the field, then why each allowed form refuses the value (not "any of the given")
    assert message.startswith("engines.jax.options.memory_fraction: ") and "'auto' was expected" in message
    assert why in message and "any of the given schemas" not in message


@pytest.mark.parametrize("value", ["auto", 0.75, 1])
def test_jax_schema_takes_a_memory_fraction_in_zero_to_one(value: Any) -> None:
    get_engine("jax").check_options({"memory_fraction": value}, "engines.jax.options")

"""PyTorch's captured step: the optimizer is built capturable (and fused where asked) for every parity
optimizer and precision, fp16 loss scaling stays on the device, and what cannot be captured is
either refused up front (explicit options) or falls back with the reason said (auto)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.core.cli_helpers import run_cli
from tests.engines.readback_helpers import add_paths

add_paths("pytorch")

SETTINGS = {
    "sgd": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-5, "nesterov": False},
    "adam": {"name": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0},
}
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
SEED = Path(__file__).resolve().parents[2] / "scenarios" / "opennn_seed.yaml"


def spec(optimizer: str, precision: str, **options: Any) -> Any:
    from bench_engine.contract import RunSpec
    from tests.conftest import spec_doc

    doc = spec_doc(path="optimized", engine_options=options, parity={"mode": "train", "precision": precision, "devices": 1})
    doc["parity"]["optimizer"] = SETTINGS[optimizer]
    return RunSpec.from_json(doc)


def build(optimizer: str, fused: bool, capturable: bool) -> Any:
    import torch

    from bench_pytorch.optimizer import OptimizerSettings, make_optimizer

    module = torch.nn.Linear(4, 3)
    module(torch.randn(2, 4)).sum().backward()
    return module, make_optimizer(module.parameters(), OptimizerSettings.from_spec(SETTINGS[optimizer]), fused, capturable)


@contextmanager
def pretend_capture() -> Iterator[None]:
    """torch's capture health check sees a CUDA stream that is capturing (the check that failed on the H200)."""
    import torch

    class Capturing:
        def is_capturing(self) -> bool:
            return True

    with mock.patch.object(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda")), \
            mock.patch.object(torch.accelerator, "current_stream", lambda device=None: Capturing()):
        yield


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_optimizer_for_a_graph_is_capturable_and_fused(optimizer: str) -> None:
    from bench_pytorch.optimizer import is_capturable, is_fused

    _, built = build(optimizer, fused=True, capturable=True)
    assert is_fused(built) and is_capturable(built)
    assert all(group["fused"] for group in built.param_groups)
    if optimizer == "adam":
        assert all(group["capturable"] for group in built.param_groups)
    with pretend_capture():
        built.step()  # passes torch's capture health check


def test_adam_without_capturable_fails_the_capture_check() -> None:
    """The H200 crash, on CPU: the check above can fail."""
    from bench_pytorch.optimizer import is_capturable

    _, built = build("adam", fused=True, capturable=False)
    assert not is_capturable(built)
    with pretend_capture(), pytest.raises(RuntimeError, match="capturable is False"):
        built.step()


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fused_scaled_step_reads_nothing_on_the_host(optimizer: str) -> None:
    """GradScaler with the fused optimizer hands grad_scale/found_inf over on the device; unfused it calls .item()."""
    import torch

    def host_read(_self: Any) -> Any:
        raise AssertionError("host read")

    for fused in (True, False):
        module, built = build(optimizer, fused=fused, capturable=fused)
        scaler = torch.amp.GradScaler("cpu")
        for index in range(2):  # the first step initialises the scale and the state, as the warmup steps do
            built.zero_grad()
            scaler.scale(module(torch.randn(2, 4)).sum()).backward()
            no_host = mock.patch.object(torch.Tensor, "item", host_read) if index else contextlib.nullcontext()
            with no_host, contextlib.nullcontext() if fused or not index else pytest.raises(AssertionError, match="host read"):
                scaler.step(built)
                scaler.update()


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_plan_on_cuda_captures_with_a_capturable_optimizer(optimizer: str, precision: str) -> None:
    from bench_pytorch.optimizer import is_capturable, is_fused
    from bench_pytorch.options import resolve_plan

    plan = resolve_plan(spec(optimizer, precision), cuda=True)
    assert plan.cuda_graphs and plan.optimizations["cuda_graphs"].applied
    assert plan.fused_optimizer and plan.capturable_optimizer
    detail = plan.optimizations["fused_optimizer"].detail
    assert detail.startswith(f"auto: {'Adam' if optimizer == 'adam' else 'SGD'} fused implementation")
    _, built = build(optimizer, plan.fused_optimizer, plan.capturable_optimizer)
    assert is_fused(built) and is_capturable(built)


def test_auto_graphs_fall_back_for_fp16_unfused_and_say_why() -> None:
    from bench_pytorch.options import resolve_plan

    plan = resolve_plan(spec("adam", "fp16", fused_optimizer=False), cuda=True)
    assert not plan.cuda_graphs and not plan.capturable_optimizer
    assert not plan.optimizations["cuda_graphs"].applied
    assert "unfused Adam" in plan.optimizations["cuda_graphs"].detail
    assert resolve_plan(spec("adam", "bf16", fused_optimizer=False), cuda=True).capturable_optimizer  # foreach Adam, captured


def test_engine_refuses_what_engine_yaml_refuses() -> None:
    """Every engine.yaml refuse rule is one the engine itself cannot run (the two stay in step)."""
    from bench_engine.api import UnsupportedError
    from bench_pytorch.options import resolve_plan
    from orchestrator.engines.registry import get_engine

    rules = get_engine("pytorch").refuse
    assert rules
    for rule in rules:
        for precision in rule.precisions:
            for optimizer in rule.optimizers or ("sgd", "adam"):
                with pytest.raises(UnsupportedError, match="cuda_graphs"):
                    resolve_plan(spec(optimizer, precision, **rule.options), cuda=True)


def test_report_configuration_is_expressible_and_said_plainly() -> None:
    """The OpenNN report's PyTorch: channels-last, torch.compile, no CUDA graph, default (unfused) Adam."""
    from bench_pytorch.options import resolve_plan

    options = {"cuda_graphs": False, "fused_optimizer": False, "compile": True, "channels_last": True}
    plan = resolve_plan(spec("adam", "tf32", **options), cuda=True)
    assert (plan.channels_last, plan.compile, plan.cuda_graphs, plan.fused_optimizer, plan.capturable_optimizer) == \
        (True, True, False, False, False)
    said = {k: (v.applied, v.detail) for k, v in plan.optimizations.items()}
    assert said["cuda_graphs"] == (False, "option: off, one launch per kernel")
    assert said["fused_optimizer"] == (False, "option: Adam default (not fused; foreach on CUDA) implementation")
    assert said["compile"] == (True, "option: torch.compile(mode='default')")
    assert said["channels_last"] == (True, "option: NHWC on cuda")
    from orchestrator.engines.registry import get_engine

    get_engine("pytorch").check_options(options, "engines.pytorch.options")


def _scenario(tmp_path: Path, options: str, precisions: str = "[tf32, fp16]") -> Path:
    text = SEED.read_text()  # the seed scenario carries no engine options: these are the test's
    assert "\nengines:" not in text and "precisions: [tf32, bf16]" in text and "\nclaims:" in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace("precisions: [tf32, bf16]", f"precisions: {precisions}")
                    .replace("\nclaims:", f"\nengines:\n  pytorch:\n    options: {options}\n\nclaims:", 1))
    return path


def test_uncapturable_options_are_refused_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = _scenario(tmp_path, "{cuda_graphs: true, fused_optimizer: false}")
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "engines.pytorch.options.cuda_graphs: true with fused_optimizer: false" in err and "fp16" in err


def test_freezing_a_training_run_is_refused_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(_scenario(tmp_path, "{freezing: true}")))
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "engines.pytorch.options.freezing: true" in err and "inference only" in err
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(_scenario(tmp_path, "{freezing: false}")))
    assert code == 0, err


def test_kernel_tuning_without_compile_is_refused_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = _scenario(tmp_path, "{inductor_kernel_tuning: true, compile: false}")
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "engines.pytorch.options.inductor_kernel_tuning: true" in err
    assert "needs compile" in err
    for options in ("{inductor_kernel_tuning: true}", "{inductor_kernel_tuning: auto, compile: false}"):
        code, _, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(_scenario(tmp_path, options)))
        assert code == 0, err
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(_scenario(tmp_path, "{inductor_kernel_tuning: sometimes}")))
    assert code == 2 and "inductor_kernel_tuning" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("options", "precisions"), [
    ("{cuda_graphs: true, fused_optimizer: true}", "[tf32, fp16]"),  # fused: captured
    ("{cuda_graphs: auto, fused_optimizer: false}", "[tf32, fp16]"),  # auto: the engine falls back and says so
    ("{cuda_graphs: true, fused_optimizer: false}", "[tf32, bf16]"),  # no loss scaling: captured
])
def test_capturable_combinations_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch, options: str, precisions: str) -> None:
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(_scenario(tmp_path, options, precisions)))
    assert code == 0, err
    assert "valid" in out


@pytest.mark.parametrize(("rule", "named"), [
    ({"options": {"cuda_graph": True}, "reason": "x"}, "refuse.0.options.cuda_graph: not an option"),
    ({"options": {"cuda_graphs": "auto"}, "reason": "x"}, "refuse.0.options.cuda_graphs: 'auto' is not an explicit value"),
    ({"options": {"cuda_graphs": "yes"}, "reason": "x"}, "refuse.0.options.cuda_graphs: 'yes' is not an explicit value"),
    ({"options": {"cuda_graphs": True}, "precisions": ["fp8"], "reason": "x"}, "refuse.0.precisions: fp8 not among"),
    ({"options": {"cuda_graphs": True}}, "refuse.0: 'reason' is a required property"),
    ({"options": {"cuda_graphs": True}, "reason": "x", "devices": [2]}, "refuse.0: Additional properties"),
])
def test_refuse_rules_are_checked(rule: dict[str, Any], named: str) -> None:
    """A rule that could never fire (a misspelt option, an auto value) is refused when engine.yaml is read."""
    from orchestrator.engines.refusals import parse_rules
    from orchestrator.engines.registry import get_engine
    from orchestrator.errors import BadInput

    engine = get_engine("pytorch")
    with pytest.raises(BadInput, match=named.replace(".", r"\.").replace("(", r"\(")):
        parse_rules({"refuse": [rule]}, Path("engine.yaml"), engine.options_schema, engine.precisions)


def test_refuse_rule_matches_only_what_it_names() -> None:
    from orchestrator.engines.refusals import PlanFacts
    from orchestrator.engines.registry import get_engine

    engine = get_engine("pytorch")
    refused = {"cuda_graphs": True, "fused_optimizer": False}
    assert engine.refusal(PlanFacts(refused, "fp16", "adam", "optimized", "train"))
    assert engine.refusal(PlanFacts(refused, "fp16", "sgd", "optimized", "train"))
    for facts in (PlanFacts(refused, "bf16", "adam", "optimized", "train"), PlanFacts(refused, "fp16", "adam", "baseline", "train"),
                  PlanFacts(refused, "fp16", "adam", "optimized", "infer"),
                  PlanFacts({"cuda_graphs": "auto", "fused_optimizer": False}, "fp16", "adam", "optimized", "train"),
                  PlanFacts({"cuda_graphs": True}, "fp16", "adam", "optimized", "train")):
        assert engine.refusal(facts) is None, facts


def test_workload_builds_the_plans_optimizer_and_reads_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build_workload passes the plan's fused/capturable to the optimizer; the read-back reports the live object."""
    import bench_pytorch.workload as workload
    from bench_pytorch.engine import PyTorchEngine
    from bench_pytorch.options import resolve_plan
    from tests.engines.readback_helpers import prepared_mismatches, tiny_dataset, tiny_spec

    def graph_plan(spec: Any, cuda: bool) -> Any:
        plan = resolve_plan(spec, cuda)
        plan.fused_optimizer = plan.capturable_optimizer = True  # what a CUDA plan sets; the runner stays eager on CPU
        return plan

    monkeypatch.setattr(workload, "resolve_plan", graph_plan)
    built: list[Any] = []
    real = workload.make_optimizer
    monkeypatch.setattr(workload, "make_optimizer", lambda *args, **kwargs: built.append(real(*args, **kwargs)) or built[-1])
    spec = tiny_spec("pytorch", tiny_dataset(tmp_path), optimizer=SETTINGS["adam"])
    assert prepared_mismatches(PyTorchEngine(), spec) == []
    assert built and all(group["capturable"] and group["fused"] for group in built[0].param_groups)
    from bench_pytorch.readback import optimizer_readback

    read = optimizer_readback(built[0])
    assert (read.class_, read.fused, read.capturable) == ("torch.optim.adam.Adam", True, True)

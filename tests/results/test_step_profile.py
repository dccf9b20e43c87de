"""benchmarks/probes/step_profile.py's arithmetic: the union of kernel intervals, idle share, classes."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "probes"))

import run_folder
from run_folder import use_bench_compile_caches
from step_profile import busy_us, classify, family, kernels_of_trace, main, reclassify, summarise

REPO = Path(__file__).resolve().parents[2]


def test_overlapping_kernels_count_once_and_gaps_not_at_all() -> None:
    assert busy_us([(0, 10), (5, 12), (20, 25), (21, 22)]) == pytest.approx(17)
    assert busy_us([]) == 0.0


def test_summary_per_step_idle_share_and_classes() -> None:
    kernels = [("sm90_xmma_fprop_implicit_gemm", 0.0, 6.0), ("triton_poi_fused_relu", 6.0, 2.0),
               ("sm90_xmma_fprop_implicit_gemm", 10.0, 6.0), ("triton_poi_fused_relu", 16.0, 2.0)]
    out = summarise(kernels, steps=2, wall_s=40e-6, top=5)
    assert out["gpu_busy_ms_per_step"] == pytest.approx(0.008)
    assert out["gpu_idle_share"] == pytest.approx(2 / 18, abs=1e-4)  # the 2 us gap in an 18 us span
    assert out["launches_per_step"] == 2
    assert out["classes"]["convolution"]["share"] == pytest.approx(0.75)
    assert out["top_kernels"][0]["name"].startswith("sm90_xmma") and out["top_kernels"][0]["calls_per_step"] == 1
    assert summarise([], 2, 1.0, 5) == {"error": "no kernel was traced"}


def test_only_gpu_events_are_read_from_the_trace() -> None:
    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 2},
                             {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 9},
                             {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 8, "dur": 1}]}
    assert kernels_of_trace(trace) == [("k", 5.0, 2.0), ("Memcpy HtoD", 8.0, 1.0)]
    assert classify("Memcpy HtoD") == "copy" and classify("loop_add_fusion") == "fusion/elementwise"
    assert classify("cutlass_80_tensorop_gemm") == "gemm" and classify("mystery") == "other"


def test_inductor_kernels_are_classified_by_their_kind_not_the_operations_they_fuse() -> None:
    # names from session 19's H100 profiles: Inductor names a kernel after what it fuses
    assert classify("triton_poi_fused__native_batch_norm_legit_functional_add_convolution_backward_native_batch_norm_b") == \
        "fusion/elementwise"
    assert classify("triton_red_fused__native_batch_norm_legit_functional_convolution_1") == "fusion/elementwise"
    assert classify("triton_per_fused_convolution_backward_sum_2") == "fusion/elementwise"
    assert classify("triton_tem_fused_convolution_3") == "convolution" and classify("triton_tem_fused_addmm_4") == "gemm"
    assert classify("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc") == "convolution"


def test_kernel_families_say_which_library_made_a_kernel() -> None:
    # names from session 20's H100 profiles and session 10's JAX one
    assert family("triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_6") == "inductor reduction"
    assert family("triton_poi_fused__native_batch_norm_legit_functional_add_convolution_relu_21") == "inductor pointwise"
    assert family("triton_per_fused__native_batch_norm_legit_functional_copy__44") == "inductor persistent reduction"
    assert family("triton_tem_fused_convolution_8") == "inductor template"
    assert family("sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64") == "cudnn"
    assert family("void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<") == "cudnn"
    assert family("nvjet_sm90_tst_64x32_64x16_1x2_h_bz_splitK_NTT") == "cublas"
    assert family("void cublasLt::splitKreduce_kernel<32, 16, int, float>") == "cublas"
    assert family("Memset (Unknown)") == "memcpy/memset" and family("Memcpy DtoD (Device -> Device)") == "memcpy/memset"
    assert family("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>") == "aten"
    assert family("loop_add_fusion_3") == "xla fusion" and family("input_reduce_fusion") == "xla fusion"
    assert family("mystery") == "other"
    out = summarise([("triton_red_fused_x_0", 0.0, 3.0), ("nvjet_sm90_tst", 3.0, 1.0)], steps=1, wall_s=4e-6, top=1)
    assert out["families"] == {"inductor reduction": {"ms_per_step": 0.003, "share": 0.75, "kernels_per_step": 1.0},
                               "cublas": {"ms_per_step": 0.001, "share": 0.25, "kernels_per_step": 1.0}}


def test_session_20s_profiles_split_max_autotunes_gain_by_family() -> None:
    """The published H100 profiles, classified again: the README's figures of where max-autotune's gain lies."""
    lines = (REPO / "docs/results/h100/issue26_session20/step_profiles.jsonl").read_text().splitlines()
    autotune, default = (reclassify(json.loads(line))["families"] for line in lines)
    saved = {name: default[name]["ms_per_step"] - autotune.get(name, {"ms_per_step": 0.0})["ms_per_step"] for name in default}
    assert saved["inductor reduction"] == pytest.approx(1.30, abs=0.01)
    assert saved["inductor pointwise"] == pytest.approx(0.30, abs=0.01)
    assert autotune["inductor template"]["ms_per_step"] == pytest.approx(1.61, abs=0.01) and "inductor template" not in default
    assert saved["cudnn"] - autotune["inductor template"]["ms_per_step"] == pytest.approx(-0.05, abs=0.02)
    lines = (REPO / "docs/results/h100/issue26_session20/kernel_tuning/step_profiles.jsonl").read_text().splitlines()
    tuned, default = (reclassify(json.loads(line))["families"] for line in lines)
    inductor = [name for name in default if name.startswith("inductor")]
    assert sum(default[n]["ms_per_step"] - tuned[n]["ms_per_step"] for n in inductor) == pytest.approx(1.53, abs=0.01)
    assert default["inductor reduction"]["ms_per_step"] - tuned["inductor reduction"]["ms_per_step"] == pytest.approx(1.22, abs=0.01)
    libraries = ("cudnn", "cublas")
    assert sum(tuned[n]["ms_per_step"] - default[n]["ms_per_step"] for n in libraries) == pytest.approx(0.09, abs=0.01)


def test_a_profile_keeps_every_kernel_and_can_be_classified_again() -> None:
    kernels = [("sm90_xmma_fprop_implicit_gemm", 0.0, 6.0), ("triton_poi_fused_add_convolution_relu_0", 6.0, 2.0),
               ("sm90_xmma_fprop_implicit_gemm", 10.0, 6.0), ("triton_poi_fused_add_convolution_relu_0", 16.0, 2.0)]
    out = summarise(kernels, steps=2, wall_s=40e-6, top=1)
    assert out["kernels"] == [["sm90_xmma_fprop_implicit_gemm", 0.006, 1.0], ["triton_poi_fused_add_convolution_relu_0", 0.002, 1.0]]
    assert out["classes"]["fusion/elementwise"]["ms_per_step"] == pytest.approx(0.002)
    written = {**out, "classes": {"convolution": {"ms_per_step": 0.008, "share": 1.0, "kernels_per_step": 2.0}}}  # the old order
    assert reclassify(written)["classes"] == out["classes"]
    old = {"classes": {"convolution": {"ms_per_step": 1.0, "share": 1.0, "kernels_per_step": 1.0}}}
    assert reclassify(old)["classes"] == old["classes"] and "before session 19" in reclassify(old)["note"]
    choice = {"num_choices": 3, "best_kernel": "mm"}  # an autotune choice line of the same log
    assert reclassify(choice) == choice


def test_reclassify_reads_a_profiles_file_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = summarise([("triton_poi_fused_convolution_0", 0.0, 4.0)], steps=1, wall_s=1e-5, top=1)
    written = {**out, "classes": {"convolution": {"ms_per_step": 0.004, "share": 1.0, "kernels_per_step": 1.0}}}
    profiles = tmp_path / "step_profiles.jsonl"
    profiles.write_text(json.dumps(written) + "\n\n")
    assert main(["--reclassify", str(profiles)]) == 0
    assert list(json.loads(capsys.readouterr().out)["classes"]) == ["fusion/elementwise"]
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    for name, why in [("missing.jsonl", "No such file"), ("bad.jsonl", "Expecting property name"), ("list.jsonl", "not a JSON object")]:
        with pytest.raises(SystemExit) as stop:
            main(["--reclassify", str(tmp_path / name)])
        assert stop.value.code == 2 and why in capsys.readouterr().err.strip().splitlines()[-1]


def test_importing_a_probe_leaves_the_environment_alone() -> None:
    before = dict(os.environ)
    importlib.reload(run_folder)
    assert dict(os.environ) == before


def test_the_probes_use_bench_compile_caches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "environ", dict(os.environ))  # every key it sets goes with the test
    monkeypatch.setenv("BENCH_COMPILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    use_bench_compile_caches()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "inductor")
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "mine")  # a caller's own stays


def test_every_step_is_handed_to_the_workload_and_a_call_stays_inside_its_epoch() -> None:
    """The probe divides by the steps it issues: each is one ``step`` call, in whole calls of k inside an epoch."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "common"))
    from step_profile import issue_steps

    from bench_engine.dispatch import StepQueue

    calls: list[list[int]] = []

    class Queued:  # what a k-steps-per-call engine does with the batches it is handed
        def __init__(self, k: int) -> None:
            self.queue = StepQueue(k, 8, lambda b: calls.append([b.index]), lambda bs: calls.append([b.index for b in bs]))

        def step(self, batch) -> None:
            self.queue.push(batch)

    counter = issue_steps(Queued(10), 50, 10, per_epoch=25, batch=8, counter=0)
    assert [len(c) for c in calls] == [10] * 5  # 50 steps: five calls of ten, none run one by one
    assert calls[2] == list(range(10)) and all(c[-1] < 25 for c in calls)  # the call that would cross the epoch starts the next
    assert counter == 60  # epochs 0 and 1 hold two calls each (the last 5 steps of each skipped), epoch 2 one


def test_the_probes_find_every_engine_package_whatever_the_callers_pythonpath(tmp_path: Path) -> None:
    """Session 9's campaign ran the probe with the tree and ``images/common`` only on PYTHONPATH: both engines'
    profiles failed on ``import bench_pytorch`` / ``bench_jax``. The probes' start puts bench's engine folders on
    ``sys.path`` itself."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import run_folder, importlib.util as u; "
            "print([n for n in ('bench_pytorch.workload', 'bench_jax.prepare', 'bench_engine.data') "
            "if u.find_spec(n.split('.')[0]) is None])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code, str(root / "benchmarks" / "probes")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_engine_option_is_read_as_yaml_and_a_malformed_one_refused() -> None:
    import argparse

    import pytest
    from step_profile import parse_option

    assert parse_option("steps_per_dispatch=1") == ("steps_per_dispatch", 1)
    assert parse_option("cuda_graphs=false") == ("cuda_graphs", False)
    for bad in ("steps_per_dispatch", "=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
            parse_option(bad)


def test_a_multi_step_jax_call_is_flagged_and_a_single_step_one_is_not() -> None:
    from step_profile import loop_trace_warning

    assert "steps_per_dispatch=1" in (loop_trace_warning("jax", 5) or "")
    assert loop_trace_warning("jax", 1) is None
    assert loop_trace_warning("pytorch", 5) is None

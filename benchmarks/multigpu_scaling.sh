#!/usr/bin/env bash
# Data-parallel scaling, 1 vs 2 GPUs: ResNet-50 v1.5 training, 3 repeats, local runtime.
#   cifar: scenarios/cifar_resnet50.yaml (32x32, batch 128 per device, 2 epochs of 50,000)
#   224:   scenarios/imagenet_resnet50.yaml (224x224, batch 256 per device, 16,384 samples x EPOCHS)
# One engine and one precision per call, so a call fits in about 9 minutes (BUDGET_S); the full
# table is 8 calls (cifar and 224, pytorch and jax, tf32 and bf16), e.g.
#   benchmarks/multigpu_scaling.sh cifar pytorch bf16 docs/results/h200x2
#   benchmarks/multigpu_scaling.sh 224 jax tf32 docs/results/h200x2
# Each call is one artifact with both device counts, so `bench results show DIR` prints the
# speedup and efficiency of 2 devices over 1. A call cut by the budget is interrupted cleanly
# (valid artifact, manifest incomplete) and can be finished with `bench scenario resume DIR`.
# Usage: benchmarks/multigpu_scaling.sh cifar|224 ENGINE PRECISION[,PRECISION] OUT_DIR
# Environment: DEVICES (default "1,2"), REPEATS (3), EPOCHS (224 only, default 5: a steady state
# of about 10-20 s on one H200), BUDGET_S (540), STALL_S (180: a run with no progress for that
# long after setup fails as stalled, every rank's Python stacks in its engine.log), SETUP_STALL_S
# (300), RUN_TIMEOUT_S (420), VERBOSE=1 to echo every engine line.
set -euo pipefail
if [[ $# -ne 4 ]]; then
  sed -n '2,18p' "$0" >&2
  exit 2
fi
geometry=$1 engine=$2 precisions=$3 out=$4
case "$geometry" in
  cifar) scenario=scenarios/cifar_resnet50.yaml; extra=() ;;
  224) scenario=scenarios/imagenet_resnet50.yaml; extra=(--set "workload.epochs=${EPOCHS:-5}") ;;
  *) echo "multigpu_scaling.sh: geometry must be cifar or 224, not '$geometry'" >&2; exit 2 ;;
esac
# NVLink multicast stays off on a shared multi-GPU host (bench sets these too; kept here for anything else started)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
name=$(basename "$scenario" .yaml)
mkdir -p "$out"
status=0
timeout -s INT -k 30 "${BUDGET_S:-540}" python3 -m orchestrator scenario run "$scenario" --device cuda --runtime local \
  --engines "$engine" --precisions "$precisions" --repeats "${REPEATS:-3}" --set "matrix.devices=[${DEVICES:-1,2}]" \
  --set "measurement.stall_s=${STALL_S:-180}" --set "measurement.setup_stall_s=${SETUP_STALL_S:-300}" \
  --set "measurement.timeout_s=${RUN_TIMEOUT_S:-420}" "${extra[@]}" --out "$out" ${VERBOSE:+--verbose} || status=$?
artifact=$(ls -td "$out/$name"/*/ 2>/dev/null | head -1)
if [[ -n "$artifact" ]]; then
  python3 -m orchestrator results show "$artifact" || true
fi
exit "$status"

// Drives OpenNN's own mini-batch machinery (Optimizer::train's set-up, OpenNN's CUDA warmup,
// Optimizer::train_epoch with its CUDA-graph path) over bench's schedule: one train_epoch call per
// harness block, in dataset order, with a device synchronisation before and after each timed
// block. Optimizer::train() itself times whole epochs, shuffles and drops nothing we can see;
// this keeps OpenNN's code path and gives bench its per-window timings.
#pragma once

// OpenNN's headers assume its precompiled header (<span>, <ranges>, omp.h, json.h) came first.
#include "opennn/pch.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "plan.h"
#include "opennn/back_propagation.h"
#include "opennn/batch.h"
#include "opennn/dataset.h"
#include "opennn/forward_propagation.h"
#include "opennn/loss.h"
#include "opennn/optimizer.h"
#include "opennn/training_result.h"

namespace bench {

struct TrainerSettings {
    opennn::Index batch = 0;
    // Optimizer::train() runs one full step (then restores the weights) before its epochs:
    // allocations, cuDNN plans and, with CUDA graphs, the capture of a one-step graph.
    bool opennn_cuda_warmup = true;
    // Drop the graphs OpenNN's warmup captured before the timed blocks (see README "OpenNN":
    // Optimizer::train keeps the warmup's one-step graph in training_graph_execs[0], which its
    // device-resident path then replays for every even group of 8 steps).
    bool reset_graphs_after_warmup = true;
};

struct BlockResult {
    double seconds = 0.0;
    float loss = 0.0f;  // OpenNN's mean training error over the block's steps
};

class Trainer {
public:
    Trainer(opennn::Optimizer& optimizer, opennn::Loss& loss, opennn::Dataset& dataset, const TrainerSettings& settings);
    ~Trainer();

    void setup();
    BlockResult run(const Block& block);
    void finish();

    void synchronize() const;
    std::int64_t steps_applied();      // optimizer updates OpenNN really applied (read back)
    bool graph_update_armed() const;   // OpenNN's CUDA-graph update closure is set
    int graph_execs() const;           // instantiated training graphs
    double cuda_warmup_s() const { return cuda_warmup_seconds; }

private:
    opennn::Optimizer& optimizer;
    opennn::Loss& loss;
    opennn::Dataset& dataset;
    TrainerSettings settings;
    bool on_gpu = false;
    bool guard_active = false;
    double cuda_warmup_seconds = 0.0;

    std::vector<opennn::Index> inputs, decoders, targets;
    opennn::BatchPools pools;
    std::unique_ptr<opennn::ForwardPropagation> forward;
    std::unique_ptr<opennn::BackPropagation> backward;
    opennn::OptimizerData optimizer_data;
    std::function<void(opennn::BackPropagation&)> update;
    std::unique_ptr<opennn::device::CudaAllocationGrowthGuard> growth_guard;
};

}  // namespace bench

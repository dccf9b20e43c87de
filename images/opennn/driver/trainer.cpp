#include "trainer.h"

#include <chrono>

#include "opennn/device_backend.h"
#include "opennn/neural_network.h"

namespace bench {

using namespace opennn;

namespace {

// Optimizer's set-up and per-epoch members are protected (Optimizer::train() is their only
// caller). A pointer to a protected member formed through a derived class may be applied to any
// Optimizer ([class.protected]); virtual calls still dispatch to Adam's / SGD's own overrides,
// so the state (graph execs, update closure, slots) stays in OpenNN's own optimizer object.
struct Access : Optimizer {
    static void do_setup_batch_pools(Optimizer& o, BatchPools& pools, Dataset& data, NeuralNetwork& network, Index batch)
    { (o.*&Access::setup_batch_pools)(pools, data, network, batch, batch, false); }
    static void do_setup_device_training(Optimizer& o) { (o.*&Access::setup_device_training)(); }
    static void do_teardown_device_training(Optimizer& o) { (o.*&Access::teardown_device_training)(); }
    static void do_reset_graph_capture(Optimizer& o) { (o.*&Access::reset_graph_capture)(); }
    static void do_setup_optimizer_data(Optimizer& o, OptimizerData& data, Index parameters, Device device, bool on_gpu)
    { (o.*&Access::setup_optimizer_data)(data, parameters, device, on_gpu); }
    static void do_update_parameters(Optimizer& o, BackPropagation& back, OptimizerData& data)
    { (o.*&Access::update_parameters)(back, data); }
    static void warmup(Optimizer& o, ForwardPropagation& forward, BackPropagation& back, ThreadSafeQueue<Batch*>& queue,
                       const vector<vector<Index>>& batches, const vector<Index>& in, const vector<Index>& dec,
                       const vector<Index>& tgt, const function<void(BackPropagation&)>& update, Batch* fixed)
    { (o.*&Access::warmup_device_training)(forward, back, queue, batches, in, dec, tgt, update, nullptr, nullptr, nullptr, fixed); }
    static Loss::EvaluationResult do_train_epoch(Optimizer& o, ForwardPropagation& forward, BackPropagation& back,
                                              ThreadSafeQueue<Batch*>& queue, const vector<vector<Index>>& batches,
                                              const vector<Index>& in, const vector<Index>& dec, const vector<Index>& tgt,
                                              const function<void(BackPropagation&)>& update, Batch* fixed)
    { return (o.*&Access::train_epoch)(forward, back, queue, batches, in, dec, tgt, update, fixed); }
    static bool graph_update_set(const Optimizer& o) { return bool(o.*&Access::graph_update); }
    static int count_graph_execs(const Optimizer& o)
    {
        int n = 0;
        for (const auto& exec : o.*&Access::training_graph_execs) n += exec ? 1 : 0;
        return n;
    }
};

vector<vector<Index>> batches_of(const Block& block)
{
    vector<vector<Index>> out;
    for (const Step& step : block.steps) {
        vector<Index> rows(std::size_t(step.size));
        for (Index i = 0; i < step.size; ++i) rows[std::size_t(i)] = step.start + i;
        out.push_back(std::move(rows));
    }
    return out;
}

}  // namespace

Trainer::Trainer(Optimizer& optimizer, Loss& loss, Dataset& dataset, const TrainerSettings& settings)
    : optimizer(optimizer), loss(loss), dataset(dataset), settings(settings) {}

Trainer::~Trainer() = default;

void Trainer::synchronize() const
{
    if (on_gpu) device::synchronize(Backend::get_compute_stream());
}

void Trainer::setup()
{
    NeuralNetwork* network = loss.get_neural_network();
    on_gpu = network->is_gpu();
    inputs = dataset.get_feature_indices("Input");
    targets = dataset.get_feature_indices("Target");
    decoders = dataset.get_feature_indices("Decoder");

    // The order of Optimizer::train(): pools, propagations, device residency, optimizer state.
    Access::do_setup_batch_pools(optimizer, pools, dataset, *network, settings.batch);
    forward = std::make_unique<ForwardPropagation>(settings.batch, network);
    loss.set_normalization_coefficient();
    backward = std::make_unique<BackPropagation>(settings.batch, &loss);
    Access::do_setup_device_training(optimizer);
    Access::do_reset_graph_capture(optimizer);
    const Index parameters = network->get_parameters_size();
    Access::do_setup_optimizer_data(optimizer, optimizer_data, parameters, network->get_device(), on_gpu);
    update = [this](BackPropagation& back) { Access::do_update_parameters(optimizer, back, optimizer_data); };

    guard_active = on_gpu && device::is_cuda_build();
    if (guard_active && settings.opennn_cuda_warmup) {
        const auto t0 = std::chrono::steady_clock::now();
        vector<vector<Index>> first(1, vector<Index>(std::size_t(settings.batch)));
        for (Index i = 0; i < settings.batch; ++i) first[0][std::size_t(i)] = i;
        Access::warmup(optimizer, *forward, *backward, pools.training_empty_queue, first, inputs, decoders, targets,
                       update, pools.fixed_training_batch.get());
        if (settings.reset_graphs_after_warmup) Access::do_reset_graph_capture(optimizer);
        // As train(): a fresh optimizer state after the warmup step (which also re-arms the
        // CUDA-graph update closure that reset_graph_capture cleared).
        Access::do_setup_optimizer_data(optimizer, optimizer_data, parameters, network->get_device(), on_gpu);
        synchronize();
        cuda_warmup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (guard_active) growth_guard = std::make_unique<device::CudaAllocationGrowthGuard>(true);
}

BlockResult Trainer::run(const Block& block)
{
    const vector<vector<Index>> batches = batches_of(block);
    synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const Loss::EvaluationResult result = Access::do_train_epoch(optimizer, *forward, *backward, pools.training_empty_queue, batches,
                                                              inputs, decoders, targets, update, pools.fixed_training_batch.get());
    synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    return {std::chrono::duration<double>(t1 - t0).count(), result.error};
}

void Trainer::finish()
{
    growth_guard.reset();
    Access::do_teardown_device_training(optimizer);
}

std::int64_t Trainer::steps_applied()
{
    std::int64_t steps = optimizer_data.iteration;
    if (on_gpu && optimizer_data.graph_step.data) {
        int graph_steps = 0;
        device::copy_async(&graph_steps, optimizer_data.graph_step.data, Index(sizeof(int)), device::CopyKind::DeviceToHost,
                           Backend::get_compute_stream());
        synchronize();
        steps += graph_steps;
    }
    return steps;
}

bool Trainer::graph_update_armed() const { return Access::graph_update_set(optimizer); }

int Trainer::graph_execs() const { return Access::count_graph_execs(optimizer); }

}  // namespace bench

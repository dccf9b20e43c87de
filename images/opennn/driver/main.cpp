// bench_opennn_driver PLAN: trains ResNet-50 v1.5 with OpenNN on bench's canonical split,
// following the harness schedule in PLAN, and writes its events (events.h) for bench_opennn.
//
// Exit codes: 0 done; 1 failed (crash, out of memory); 2 the plan could not be read;
// 3 OpenNN cannot do what the plan asks (unsupported). Every failure after the plan was read is
// also an `error` event, so the adapter keeps what was measured before it.

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

#include "opennn/pch.h"

#include "events.h"
#include "npy.h"
#include "npy_dataset.h"
#include "plan.h"
#include "trainer.h"

#include "opennn/adaptive_moment_estimation.h"
#include "opennn/configuration.h"
#include "opennn/device_backend.h"
#include "opennn/json.h"
#include "opennn/layer.h"
#include "opennn/random_utilities.h"
#include "opennn/standard_networks.h"
#include "opennn/stochastic_gradient_descent.h"
#include "opennn/training_strategy.h"

using namespace opennn;

namespace {

struct Unsupported : std::runtime_error { using std::runtime_error::runtime_error; };

const char* dtype_name(Type type)
{
    switch (type) {
        case Type::BF16: return "bfloat16";
        case Type::FP32: return "float32";
        default: return "auto";
    }
}

std::string fmt_double(double value)
{
    std::ostringstream out;
    out.precision(17);
    out << value;
    return out.str();
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)); }

// The trainable parameters: the sizes of the tensors OpenNN's layers declare as parameters
// (Layer::get_parameter_specs), without the 64-byte alignment padding each tensor gets in the
// flat buffer (NeuralNetwork::get_parameters_size counts the padding).
Index trainable_parameters(const NeuralNetwork& network, Index& tensors)
{
    Index total = 0;
    tensors = 0;
    for (const auto& layer_specs : network.get_parameter_specs())
        for (const TensorSpec& spec : layer_specs) {
            total += spec.shape.size();
            ++tensors;
        }
    return total;
}

std::string dims_text(const Shape& shape)
{
    std::string out;
    for (std::size_t d = 0; d < shape.rank; ++d) out += (d ? "," : "") + std::to_string(shape[d]);
    return out;
}

// Where each parameter and state tensor sits in OpenNN's flat buffers (layers in order, each
// layer's tensors in order, each padded to 64 bytes), checked against the buffers' real sizes.
void report_layout(bench::Events& events, const NeuralNetwork& network)
{
    const auto emit = [&](const char* kind, const vector<vector<TensorSpec>>& specs, Index buffer) {
        Index offset = 0;
        for (std::size_t i = 0; i < specs.size(); ++i)
            for (std::size_t j = 0; j < specs[i].size(); ++j) {
                events.line(std::string("layout ") + kind + " " + network.get_layer(Index(i))->get_label() + " " + std::to_string(j) + " "
                            + std::to_string(offset) + " " + dims_text(specs[i][j].shape));
                offset += get_aligned_size(specs[i][j].shape.size());
            }
        if (offset != buffer)
            throw std::runtime_error(std::string("OpenNN's ") + kind + " buffer holds " + std::to_string(buffer) + " floats, its tensors "
                                     + std::to_string(offset) + ": unexpected packing");
    };
    emit("param", network.get_parameter_specs(), network.get_parameters_size());
    emit("state", network.get_state_specs(), network.get_states_buffer_size());
}

void copy_raw(const std::string& path, float* data, Index floats, bool load)
{
    const auto bytes = std::size_t(floats) * sizeof(float);
    if (load) {
        std::FILE* in = std::fopen(path.c_str(), "rb");
        if (!in) throw std::runtime_error("cannot read " + path);
        const std::size_t got = std::fread(data, 1, bytes, in);
        const bool extra = std::fgetc(in) != EOF;
        std::fclose(in);
        if (got != bytes || extra) throw std::runtime_error(path + ": expected " + std::to_string(bytes) + " bytes");
    } else {
        std::FILE* out = std::fopen(path.c_str(), "wb");
        if (!out || std::fwrite(data, 1, bytes, out) != bytes) throw std::runtime_error("cannot write " + path);
        std::fclose(out);
    }
}

// The network's parameters and states (host buffers until training starts) to or from raw files.
void transfer(NeuralNetwork& network, const std::string& params, const std::string& states, bool load)
{
    if (network.get_parameters_device() != Device::CPU) throw std::runtime_error("parameters are not on the host before training");
    copy_raw(params, network.get_parameters_data(), network.get_parameters_size(), load);
    copy_raw(states, network.get_states_data(), network.get_states_buffer_size(), load);
}

void check_precision(const std::string& precision, bool cuda)
{
    if (precision == "fp16") throw Unsupported("OpenNN has no fp16 training policy (Type::FP32 and Type::BF16 only)");
    if (precision == "bf16" && !cuda)
        throw Unsupported("OpenNN trains in float32 on the CPU (NeuralNetwork::get_forward_specs forces FP32): bf16 needs --device cuda");
    if (precision != "fp32" && precision != "tf32" && precision != "bf16")
        throw Unsupported("unknown precision " + precision);
}

// The precision really in effect, read back from OpenNN: the network's training type, the dtype
// OpenNN allocates for the first convolution's output, and OpenNN's TF32 switches (its cuBLAS
// handle uses CUBLAS_TF32_TENSOR_OP_MATH and CUBLAS_COMPUTE_32F_FAST_TF32; its cuDNN graphs
// compute in FLOAT, which cuDNN runs on TF32 tensor cores unless NVIDIA_TF32_OVERRIDE=0).
void report_precision(bench::Events& events, const NeuralNetwork& network, Index batch)
{
    const bool cuda = network.is_gpu();
    events.applied("training_type", dtype_name(network.get_training_type()));
    const auto forward_specs = network.get_forward_specs(batch);
    for (std::size_t i = 0; i < network.get_layers().size(); ++i)
        if (network.get_layer(Index(i))->get_type() == LayerType::Convolutional && !forward_specs[i].empty()) {
            events.applied("observed_compute_dtype", dtype_name(forward_specs[i].front().dtype));
            break;
        }
    for (std::size_t i = forward_specs.size(); i-- > 0;)
        if (!forward_specs[i].empty()) {
            events.applied("logits_dtype", dtype_name(forward_specs[i].front().dtype));
            break;
        }
    // the trainable values live in NeuralNetwork::parameters, a float buffer (get_parameters_data() is
    // float*) that the optimizer updates; a BF16 run computes with a bf16 mirror of it
    static_assert(std::is_same_v<decltype(std::declval<NeuralNetwork&>().get_parameters_data()), float*>);
    events.applied("param_dtype", "float32");
    std::string spec_dtypes;
    for (const auto& layer_specs : network.get_parameter_specs())
        for (const TensorSpec& spec : layer_specs)
            if (spec_dtypes.find(dtype_name(spec.dtype)) == std::string::npos) spec_dtypes += std::string(spec_dtypes.empty() ? "" : ",") + dtype_name(spec.dtype);
    events.applied("param_compute_dtypes", spec_dtypes);
    const char* override_value = std::getenv("NVIDIA_TF32_OVERRIDE");
    const bool overridden = override_value && std::string(override_value) == "0";
    const bool tf32_library = CUBLAS_COMPUTE_DTYPE == CUBLAS_COMPUTE_32F_FAST_TF32;
    events.applied("tf32_matmul", cuda && tf32_library && !overridden ? "1" : "0");
    events.applied("tf32_conv", cuda && !overridden ? "1" : "0");
    events.applied("tf32_override", override_value ? override_value : "-");
}

Optimizer* configure_optimizer(TrainingStrategy& strategy, const bench::Plan& plan, Index batch, std::string& events_note)
{
    const std::string name = plan.text("optimizer");
    Loss* loss = strategy.get_loss();
    const double weight_decay = plan.number("weight_decay");
    // Coupled weight decay (g += wd * w) is OpenNN's L2 regularisation (l2_regularization_gradient).
    loss->set_regularization(weight_decay > 0 ? Loss::Regularization::L2 : Loss::Regularization::NoRegularization);
    loss->set_regularization_weight(float(weight_decay));

    if (name == "adam") {
        strategy.set_optimization_algorithm("AdaptiveMomentEstimation");
        auto* adam = dynamic_cast<AdaptiveMomentEstimation*>(strategy.get_optimization_algorithm());
        if (!close(plan.number("eps"), double(EPSILON)))
            throw Unsupported("OpenNN's Adam epsilon is the constant EPSILON = FLT_EPSILON = 1.1920928955078125e-07 (opennn_types.h); the spec asks "
                              + plan.text("eps"));
        adam->set_batch_size(batch);
        adam->set_learning_rate(float(plan.number("lr")));
        adam->set_beta_1(float(plan.number("beta1")));
        adam->set_beta_2(float(plan.number("beta2")));
        events_note = "lr " + fmt_double(adam->get_learning_rate()) + " eps " + fmt_double(double(EPSILON));
        return adam;
    }
    if (name == "sgd") {
        strategy.set_optimization_algorithm("StochasticGradientDescent");
        auto* sgd = dynamic_cast<StochasticGradientDescent*>(strategy.get_optimization_algorithm());
        sgd->set_batch_size(batch);
        sgd->set_initial_learning_rate(float(plan.number("lr")));
        sgd->set_initial_decay(0.0f);
        sgd->set_momentum(float(plan.number("momentum")));
        sgd->set_nesterov(plan.flag("nesterov"));
        events_note = "lr " + fmt_double(sgd->get_initial_learning_rate());
        return sgd;
    }
    throw Unsupported("optimizer " + name + " (OpenNN engine: adam, sgd)");
}

// The optimizer and loss as OpenNN serialises them (its own to_JSON), one line.
std::string optimizer_json(const Optimizer& optimizer)
{
    JsonWriter writer;
    optimizer.to_JSON(writer);
    std::string text = writer.c_str(0);
    for (char& c : text) if (c == '\n') c = ' ';
    return text;
}

int train(const bench::Plan& plan, bench::Events& events)
{
    const bool cuda = plan.text("device") == "cuda";
    const std::string precision = plan.text("precision");
    const Index batch = plan.integer("batch");
    check_precision(precision, cuda);
    if (cuda && !device::is_cuda_build()) throw Unsupported("this OpenNN build is CPU-only (-DOpenNN_DISABLE_CUDA=ON): build the CUDA variant");
    if (plan.text("arch") != "resnet50_v1.5") throw Unsupported("model " + plan.text("arch") + " (OpenNN engine: resnet50_v1.5)");
    if (plan.text("mode") != "train") throw Unsupported("mode " + plan.text("mode") + " (OpenNN engine: train)");
    for (const bench::Block& block : plan.blocks)
        for (const bench::Step& step : block.steps)
            if (step.size != batch)
                throw Unsupported("a partial batch of " + std::to_string(step.size) + " samples: OpenNN's trainer runs full batches only "
                                  "(Optimizer::train drops the remainder); set workload.batch.drop_last: true");

    set_seed(unsigned(plan.integer("seed")));
    Configuration::instance().set(cuda ? Device::CUDA : Device::CPU, precision == "bf16" ? Type::BF16 : Type::FP32);
    const std::string autotune = plan.text("conv_autotune", "default");
    const std::string cap = plan.text("conv_workspace_cap", "default");
    if (cuda) {
        if (autotune != "default") device::set_conv_autotune(autotune == "on");
        if (cap == "auto") device::set_conv_workspace_cap(-1);
        else if (cap == "off") device::set_conv_workspace_cap(0);
        else if (cap != "default") device::set_conv_workspace_cap(std::stoll(cap) * 1024 * 1024);
        events.applied("conv_autotune", device::conv_autotune_enabled() ? "1" : "0");
        events.applied("conv_workspace_cap_bytes", std::to_string(device::conv_workspace_limit_bytes()));
        events.applied("gpu", device::gpu_info_string());
    }

    const Shape plan_input{plan.integer("height"), plan.integer("width"), plan.integer("channels")};
    if (plan.text("layout_only", "0") != "0") {  // bench_opennn's first pass for shared initial weights
        ResNet network(plan_input, {3, 4, 6, 3}, Shape{64, 128, 256, 512}, Shape{plan.integer("num_classes")}, /*use_bottleneck=*/true);
        report_layout(events, network);
        transfer(network, plan.text("dump_params"), plan.text("dump_states"), false);
        events.line("done nan");
        return 0;
    }
    const bench::NpyArray images = bench::read_npy(plan.text("images"));
    const std::vector<std::int64_t> labels = bench::npy_integers(bench::read_npy(plan.text("labels")), plan.text("labels"));
    bench::NpyDataset dataset(images, labels, plan.integer("num_classes"));
    const Shape input = dataset.get_shape("Input");
    if (input[0] != plan.integer("height") || input[1] != plan.integer("width") || input[2] != plan.integer("channels"))
        throw bench::NpyError("images.npy: geometry does not match the spec's input");
    const bool resident = plan.flag("gpu_resident");
    if (resident && !cuda) throw Unsupported("gpu_resident needs --device cuda");
    if (resident) dataset.set_storage_mode(Dataset::StorageMode::GPUPersistantData);

    ResNet network(input, {3, 4, 6, 3}, Shape{64, 128, 256, 512}, dataset.get_shape("Target"), /*use_bottleneck=*/true);
    if (!plan.text("init_params", "").empty()) {  // bench's shared initial weights, in OpenNN's layout
        transfer(network, plan.text("init_params"), plan.text("init_states"), true);
        if (network.is_gpu()) network.cast_parameters_to_bf16();
        transfer(network, plan.text("dump_params"), plan.text("dump_states"), false);  // read back for the hash
        events.applied("init", "shared");
    }
    Index tensors = 0;
    events.applied("trainable_parameters", std::to_string(trainable_parameters(network, tensors)));
    events.applied("parameter_tensors", std::to_string(tensors));
    events.applied("parameter_buffer_floats", std::to_string(network.get_parameters_size()));
    events.applied("layers", std::to_string(network.get_layers_number()));
    events.applied("device", network.is_gpu() ? "cuda" : "cpu");
    events.applied("num_classes", std::to_string(network.get_layers().back()->get_output_shape()[0]));
    events.applied("input_shape", std::to_string(input[0]) + "," + std::to_string(input[1]) + "," + std::to_string(input[2]));
    if (network.is_gpu() != cuda) throw Unsupported(std::string("OpenNN resolved the device to ") + (network.is_gpu() ? "cuda" : "cpu"));
    report_precision(events, network, batch);

    TrainingStrategy strategy(&network, &dataset);
    strategy.set_loss("CrossEntropy");
    std::string optimizer_values;
    Optimizer* optimizer = configure_optimizer(strategy, plan, batch, optimizer_values);
    events.applied("optimizer_values", optimizer_values);
    optimizer->set_display(false);
    optimizer->set_shuffle(false);
    optimizer->set_gradient_clip_norm(0.0f);
    optimizer->set_cuda_graph(plan.flag("cuda_graph"));
    if (plan.integer("workers") > 0) optimizer->set_workers_number(int(plan.integer("workers")));
    events.applied("optimizer_json", optimizer_json(*optimizer));
    events.applied("loss", strategy.get_loss()->get_error() == Loss::Error::CrossEntropy ? "CrossEntropy" : "other");
    events.applied("regularization", strategy.get_loss()->get_regularization_method());
    events.applied("cuda_graph_requested", optimizer->get_cuda_graph() ? "1" : "0");
    events.applied("shuffle", optimizer->get_shuffle() ? "1" : "0");

    bench::TrainerSettings settings;
    settings.batch = batch;
    settings.opennn_cuda_warmup = plan.flag("opennn_cuda_warmup");
    settings.reset_graphs_after_warmup = plan.flag("reset_graphs_after_warmup");
    bench::Trainer trainer(*optimizer, *strategy.get_loss(), dataset, settings);
    trainer.setup();
    events.applied("gpu_resident", dataset.is_device_resident() ? "1" : "0");
    events.applied("storage_mode", dataset.get_storage_mode_string());
    events.applied("opennn_cuda_warmup_s", fmt_double(trainer.cuda_warmup_s()));
    events.applied("graph_update_armed", trainer.graph_update_armed() ? "1" : "0");
    events.line("setup_done " + fmt_double(bench::monotonic_seconds()));

    int epoch_steps = 0;
    std::int64_t epoch_samples = 0;
    double epoch_seconds = 0.0;
    float last_loss = NAN;
    for (const bench::Block& block : plan.blocks) {
        const bench::BlockResult result = trainer.run(block);
        std::int64_t samples = 0;
        for (const bench::Step& step : block.steps) samples += step.size;
        last_loss = result.loss;
        events.line("block " + std::to_string(block.epoch) + " " + (block.warmup ? "1 " : "0 ") + std::to_string(block.steps.size()) + " "
                    + std::to_string(samples) + " " + fmt_double(result.seconds) + " " + fmt_double(result.loss));
        epoch_steps += int(block.steps.size());
        epoch_samples += samples;
        epoch_seconds += result.seconds;
        if (block.last_of_epoch) {
            events.line("epoch " + std::to_string(block.epoch) + " " + std::to_string(epoch_steps) + " " + std::to_string(epoch_samples) + " "
                        + fmt_double(epoch_seconds));
            epoch_steps = 0;
            epoch_samples = 0;
            epoch_seconds = 0.0;
        }
    }
    events.applied("graph_execs", std::to_string(trainer.graph_execs()));
    events.applied("steps_applied", plan.text("optimizer") == "adam" ? std::to_string(trainer.steps_applied()) : "-1");
    trainer.finish();  // OpenNN's teardown copies the trained parameters back to the host
    if (!plan.text("final_params", "").empty()) {  // the trained weights: bench_opennn measures how far they moved
        transfer(network, plan.text("final_params"), plan.text("final_states"), false);
        events.applied("final_dumped", "1");
    }
    events.line("done " + fmt_double(last_loss));
    return 0;
}

bool is_out_of_memory(const std::string& message)
{
    return message.find("out of memory") != std::string::npos || message.find("OUT_OF_MEMORY") != std::string::npos;
}

}  // namespace

int main(int argc, char* argv[])
{
    if (argc != 2) {
        std::cerr << "usage: bench_opennn_driver PLAN (written by bench_opennn)\n";
        return 2;
    }
    bench::Plan plan;
    try {
        plan = bench::read_plan(argv[1]);
    } catch (const std::exception& error) {
        std::cerr << "bench_opennn_driver: " << error.what() << "\n";
        return 2;
    }
    std::unique_ptr<bench::Events> events;
    try {
        events = std::make_unique<bench::Events>(plan.text("events"));
    } catch (const std::exception& error) {
        std::cerr << "bench_opennn_driver: " << error.what() << "\n";
        return 2;
    }
    try {
        return train(plan, *events);
    } catch (const Unsupported& error) {
        events->line(std::string("error unsupported ") + error.what());
        std::cerr << "bench_opennn_driver: unsupported: " << error.what() << "\n";
        return 3;
    } catch (const std::bad_alloc&) {
        events->line("error oom std::bad_alloc");
        std::cerr << "bench_opennn_driver: out of memory\n";
        return 1;
    } catch (const std::exception& error) {
        const std::string kind = is_out_of_memory(error.what()) ? "oom" : "crash";
        events->line("error " + kind + " " + error.what());
        std::cerr << "bench_opennn_driver: " << kind << ": " << error.what() << "\n";
        return 1;
    }
}

#include "npy_dataset.h"

#include <string>

namespace bench {

using opennn::Index;

NpyDataset::NpyDataset(const NpyArray& images, const std::vector<std::int64_t>& labels, Index classes)
{
    if (images.descr != "|u1" || images.shape.size() != 4)
        throw NpyError("images.npy: expected uint8 N x H x W x C, got dtype " + images.descr);
    const Index samples = images.shape[0];
    const Index height = images.shape[1], width = images.shape[2], channels = images.shape[3];
    const Index pixels = height * width * channels;
    if (Index(labels.size()) != samples)
        throw NpyError("labels.npy: " + std::to_string(labels.size()) + " labels for " + std::to_string(samples) + " images");

    data.resize(samples, pixels + classes);
    data.setZero();
    for (Index i = 0; i < samples; ++i) {
        const unsigned char* source = images.bytes.data() + i * pixels;
        float* row = &data(i, 0);
        for (Index p = 0; p < pixels; ++p) row[p] = float(source[p]) / 127.5f - 1.0f;
        const std::int64_t label = labels[std::size_t(i)];
        if (label < 0 || label >= classes)
            throw NpyError("labels.npy: label " + std::to_string(label) + " of sample " + std::to_string(i) + " is outside [0, " + std::to_string(classes) + ")");
        row[pixels + label] = 1.0f;
    }

    input_shape = {height, width, channels};
    target_shape = {classes};

    variables.assign(2, opennn::Variable());
    opennn::Variable& image = variables[0];
    image.name = "image";
    image.type = opennn::VariableType::Numeric;
    image.role = opennn::VariableRole::Input;
    image.features = pixels;
    opennn::Variable& target = variables[1];
    target.name = "Class";
    target.role = opennn::VariableRole::Target;
    target.type = opennn::VariableType::Categorical;
    std::vector<std::string> categories;
    for (Index c = 0; c < classes; ++c) categories.push_back(std::to_string(c));
    target.set_categories(categories);
    target.scaler = opennn::ScalerMethod::None;

    sample_roles.assign(std::size_t(samples), opennn::SampleRole::Training);
    storage_mode = StorageMode::Matrix;
    display = false;
}

void NpyDataset::from_JSON(const opennn::JsonDocument&)
{
    throw std::runtime_error("NpyDataset is built from .npy files, not from JSON");
}

void NpyDataset::fill_inputs(const std::vector<Index>& samples, const std::vector<Index>& features, float* out,
                             opennn::FillMode, int contiguous) const
{
    opennn::fill_tensor_data(data, samples, features, out, contiguous);
}

void NpyDataset::fill_targets(const std::vector<Index>& samples, const std::vector<Index>& features, float* out,
                              opennn::FillMode, int contiguous) const
{
    opennn::fill_tensor_data(data, samples, features, out, contiguous);
}

}  // namespace bench

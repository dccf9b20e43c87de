// bench's canonical split as an OpenNN Dataset: the uint8 NHWC images normalised the way every
// bench engine does it (x / 127.5 - 1, bench_engine.data.normalize) into OpenNN's row-major
// sample matrix, followed by the one-hot targets OpenNN's cross-entropy reads. No image files
// and no OpenNN image cache are involved. Training fills then copy rows (host), or, with
// StorageMode::GPUPersistantData, OpenNN uploads the matrix once and gathers rows on the device.
#pragma once

// OpenNN's headers assume its precompiled header (<span>, <ranges>, omp.h, json.h) came first.
#include "opennn/pch.h"

#include <cstdint>
#include <vector>

#include "npy.h"
#include "opennn/dataset.h"

namespace bench {

class NpyDataset final : public opennn::Dataset {
public:
    NpyDataset(const NpyArray& images, const std::vector<std::int64_t>& labels, opennn::Index classes);

    void from_JSON(const opennn::JsonDocument&) override;

    // Rows of the sample matrix, as OpenNN's tabular datasets fill them (already scaled).
    void fill_inputs(const std::vector<opennn::Index>&, const std::vector<opennn::Index>&, float*, opennn::FillMode, int) const override;
    void fill_targets(const std::vector<opennn::Index>&, const std::vector<opennn::Index>&, float*, opennn::FillMode, int) const override;
};

}  // namespace bench

// A minimal reader of NumPy .npy files (format versions 1-3, C order, little-endian): enough for
// bench's canonical splits, images.npy (uint8 N x H x W x C) and labels.npy (int32 N).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

struct NpyError : std::runtime_error { using std::runtime_error::runtime_error; };

struct NpyArray {
    std::string descr;               // e.g. "|u1", "<i4"
    std::vector<std::int64_t> shape;
    std::vector<unsigned char> bytes;

    std::int64_t elements() const;
    std::size_t item_size() const;
};

NpyArray read_npy(const std::string& path);

// The labels as int64, whatever integer dtype the file holds.
std::vector<std::int64_t> npy_integers(const NpyArray& array, const std::string& path);

}  // namespace bench

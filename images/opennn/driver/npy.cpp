#include "npy.h"

#include <cstring>
#include <fstream>
#include <regex>

namespace bench {

std::int64_t NpyArray::elements() const
{
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
}

std::size_t NpyArray::item_size() const
{
    if (descr.size() < 3) return 0;
    return std::size_t(std::stoi(descr.substr(2)));
}

static std::string header_value(const std::string& header, const std::string& key, const std::string& path)
{
    const std::regex pattern("'" + key + "'\\s*:\\s*('[^']*'|\\([^)]*\\)|True|False)");
    std::smatch match;
    if (!std::regex_search(header, match, pattern)) throw NpyError(path + ": .npy header has no '" + key + "'");
    return match[1].str();
}

NpyArray read_npy(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw NpyError("cannot read " + path);
    char magic[8] = {};
    in.read(magic, 8);
    if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw NpyError(path + ": not a .npy file");
    const int major = static_cast<unsigned char>(magic[6]);
    std::uint32_t header_length = 0;
    if (major == 1) {
        unsigned char length[2] = {};
        in.read(reinterpret_cast<char*>(length), 2);
        header_length = std::uint32_t(length[0]) | (std::uint32_t(length[1]) << 8);
    } else if (major == 2 || major == 3) {
        unsigned char length[4] = {};
        in.read(reinterpret_cast<char*>(length), 4);
        header_length = std::uint32_t(length[0]) | (std::uint32_t(length[1]) << 8)
                      | (std::uint32_t(length[2]) << 16) | (std::uint32_t(length[3]) << 24);
    } else {
        throw NpyError(path + ": unsupported .npy version " + std::to_string(major));
    }
    std::string header(header_length, '\0');
    in.read(header.data(), header_length);
    if (!in) throw NpyError(path + ": truncated .npy header");

    NpyArray array;
    const std::string descr = header_value(header, "descr", path);
    array.descr = descr.substr(1, descr.size() - 2);
    if (header_value(header, "fortran_order", path) != "False") throw NpyError(path + ": Fortran-ordered arrays are not supported");
    if (array.descr.size() < 3 || (array.descr[0] != '<' && array.descr[0] != '|'))
        throw NpyError(path + ": dtype " + array.descr + " is not little-endian");
    const std::string shape = header_value(header, "shape", path);
    const std::regex number("[0-9]+");
    for (auto it = std::sregex_iterator(shape.begin(), shape.end(), number); it != std::sregex_iterator(); ++it)
        array.shape.push_back(std::stoll(it->str()));

    const auto bytes = std::size_t(array.elements()) * array.item_size();
    array.bytes.resize(bytes);
    in.read(reinterpret_cast<char*>(array.bytes.data()), std::streamsize(bytes));
    if (std::size_t(in.gcount()) != bytes) throw NpyError(path + ": truncated data (" + std::to_string(in.gcount()) + " of " + std::to_string(bytes) + " bytes)");
    return array;
}

std::vector<std::int64_t> npy_integers(const NpyArray& array, const std::string& path)
{
    std::vector<std::int64_t> out(std::size_t(array.elements()));
    const auto kind = array.descr.substr(1);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const unsigned char* p = array.bytes.data() + i * array.item_size();
        if (kind == "i4") { std::int32_t v; std::memcpy(&v, p, 4); out[i] = v; }
        else if (kind == "i8") { std::int64_t v; std::memcpy(&v, p, 8); out[i] = v; }
        else if (kind == "u1") { out[i] = *p; }
        else throw NpyError(path + ": labels must be an integer array, got dtype " + array.descr);
    }
    return out;
}

}  // namespace bench

#include "events.h"

#include <ctime>
#include <stdexcept>

namespace bench {

Events::Events(const std::string& path) : file(std::fopen(path.c_str(), "w"))
{
    if (!file) throw std::runtime_error("cannot write events file " + path);
}

Events::~Events()
{
    if (file) std::fclose(file);
}

void Events::line(const std::string& text)
{
    std::string clean = text;
    for (char& c : clean) if (c == '\n' || c == '\r') c = ' ';
    std::fputs(clean.c_str(), file);
    std::fputc('\n', file);
    std::fflush(file);
}

double monotonic_seconds()
{
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

}  // namespace bench

// What the driver reports, one line per event, flushed as it happens, so a crash or a kill still
// leaves everything measured so far (bench_opennn merges the lines into the engine result):
//   applied KEY VALUE...      a setting read back from OpenNN's objects
//   setup_done MONOTONIC_S    CLOCK_MONOTONIC at the end of setup (same clock as Python's time.monotonic)
//   block EPOCH WARMUP STEPS SAMPLES SECONDS LOSS
//   epoch EPOCH STEPS SAMPLES SECONDS
//   done FINAL_LOSS
//   error KIND MESSAGE        KIND: unsupported, oom, crash
#pragma once

#include <cstdio>
#include <string>

namespace bench {

class Events {
public:
    explicit Events(const std::string& path);
    ~Events();
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;

    void line(const std::string& text);
    void applied(const std::string& key, const std::string& value) { line("applied " + key + " " + value); }

private:
    std::FILE* file = nullptr;
};

double monotonic_seconds();

}  // namespace bench

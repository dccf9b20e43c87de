// The run plan bench_opennn (Python) writes for this driver: flat "key value" lines plus the
// harness's blocks (warmup block, then timing windows), so the schedule is computed once, by
// bench_engine.harness.timing_blocks, and the driver only follows it.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

struct PlanError : std::runtime_error { using std::runtime_error::runtime_error; };

struct Step { std::int64_t start = 0; std::int64_t size = 0; };

struct Block {
    int epoch = 1;
    bool warmup = false;
    bool last_of_epoch = false;
    std::vector<Step> steps;
};

struct Plan {
    std::map<std::string, std::string> values;
    std::vector<Block> blocks;

    const std::string& text(const std::string& key) const;
    std::string text(const std::string& key, const std::string& fallback) const;
    double number(const std::string& key) const;
    std::int64_t integer(const std::string& key) const;
    bool flag(const std::string& key) const;
};

Plan read_plan(const std::string& path);

}  // namespace bench

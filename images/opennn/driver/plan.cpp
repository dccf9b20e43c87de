#include "plan.h"

#include <fstream>
#include <sstream>

namespace bench {

const std::string& Plan::text(const std::string& key) const
{
    const auto it = values.find(key);
    if (it == values.end()) throw PlanError("plan: missing key '" + key + "'");
    return it->second;
}

std::string Plan::text(const std::string& key, const std::string& fallback) const
{
    const auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
}

double Plan::number(const std::string& key) const
{
    try { return std::stod(text(key)); }
    catch (const std::invalid_argument&) { throw PlanError("plan: '" + key + "' is not a number"); }
}

std::int64_t Plan::integer(const std::string& key) const
{
    try { return std::stoll(text(key)); }
    catch (const std::invalid_argument&) { throw PlanError("plan: '" + key + "' is not an integer"); }
}

bool Plan::flag(const std::string& key) const { return integer(key) != 0; }

// block EPOCH WARMUP LAST START:SIZE ...
static Block parse_block(std::istringstream& fields, int line_number)
{
    Block block;
    int warmup = 0, last = 0;
    if (!(fields >> block.epoch >> warmup >> last))
        throw PlanError("plan line " + std::to_string(line_number) + ": block needs EPOCH WARMUP LAST");
    block.warmup = warmup != 0;
    block.last_of_epoch = last != 0;
    std::string item;
    while (fields >> item) {
        const auto colon = item.find(':');
        if (colon == std::string::npos)
            throw PlanError("plan line " + std::to_string(line_number) + ": step '" + item + "' is not START:SIZE");
        block.steps.push_back({std::stoll(item.substr(0, colon)), std::stoll(item.substr(colon + 1))});
    }
    if (block.steps.empty()) throw PlanError("plan line " + std::to_string(line_number) + ": block without steps");
    return block;
}

Plan read_plan(const std::string& path)
{
    std::ifstream in(path);
    if (!in) throw PlanError("cannot read plan " + path);
    Plan plan;
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        if (line_number == 1) {
            if (line != "bench-opennn-plan 1") throw PlanError(path + ": not a bench-opennn-plan 1 file");
            continue;
        }
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string key;
        fields >> key;
        if (key == "block") { plan.blocks.push_back(parse_block(fields, line_number)); continue; }
        std::string rest;
        std::getline(fields, rest);
        const auto first = rest.find_first_not_of(' ');
        plan.values[key] = first == std::string::npos ? "" : rest.substr(first);
    }
    if (plan.blocks.empty()) throw PlanError(path + ": no blocks");
    return plan;
}

}  // namespace bench

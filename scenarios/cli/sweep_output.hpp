// Writing a sweep result file (`sweep -o`, `merge -o`, `plan -o`): the dptwin.sweep/1
// document with the "dptwin" key of the build that wrote it, as --json prints it, so a
// saved file says which build produced it. The sweep reader accepts that key.
#pragma once
#include <string>

#include "engine/io/atomic_file.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::cli {

inline void write_sweep_file(const scenario::SweepResult& r, const std::string& path) {
  write_file_atomic(path, with_version(scenario::sweep_result_to_json(r)).dump(1) + "\n", {.create_parent_dirs = true});
}

}  // namespace dpt::cli

// Running a simulation in its own process.
//
// SimGrid allows one Engine per process and does not restart its clock, so every
// simulation (a test case, a bench sweep, a predict run) runs in a forked child:
// the child creates the Engine with dptwin's configuration, builds the platform,
// runs, and writes its result (a string, usually JSON) to a pipe; the parent reads
// it and waits for the child. An exception in the child is carried back and
// rethrown in the parent with its message: std::invalid_argument as
// std::invalid_argument, dpt::OutOfMemory as dpt::OutOfMemory, anything else as
// std::runtime_error. A child that dies without a result (signal, exit) is a
// std::runtime_error naming the signal or exit status.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <simgrid/s4u/Engine.hpp>

#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// Runs fn in a forked child and returns what it returned (see above). Call it from a
// single-threaded parent (the child gets only the calling thread). The child's stdout
// and stderr stay the parent's.
std::string run_in_child_process(const std::function<std::string()>& fn);

// Creates the process's Engine with dptwin's settings: network/model:CM02,
// network/crosstraffic:0, network/TCP-gamma:0 (exact alpha-beta; the default LV08
// model adds latency and bandwidth factors) and --log=root.thres:warning
// (plus xbt_cfg.thres:warning for the configuration chatter). Call once per process.
std::unique_ptr<simgrid::s4u::Engine> make_engine();

// In a forked child: make_engine(), Platform::build(hw), setup(platform) (create the
// actors), Engine::run(), then finish(platform) gives the result string.
std::string run_simulation(const HardwareSpec& hw, const std::function<void(Platform&)>& setup,
                           const std::function<std::string(Platform&)>& finish);

}  // namespace dpt::sim

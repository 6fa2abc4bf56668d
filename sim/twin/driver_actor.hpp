// The actor that drives a run on the twin (verify's measurements, its correctness
// checks) and what became of it: the error its body threw, or whether it ran to
// the end. A simulation that ends with the driver neither finished nor failed had
// its actors deadlocked (SimGrid stops when no actor can run).
#pragma once
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include <simgrid/s4u/Actor.hpp>

namespace dpt::sim {

struct DriverOutcome {
  std::string error;      // what the body threw, "" when it threw nothing
  bool finished = false;  // the body returned or threw

  // After the run: throws std::runtime_error "CONTEXT: ERROR" for a failed body,
  // "CONTEXT: UNFINISHED" for one that never ended; returns for a finished one.
  void check(const std::string& context, const std::string& unfinished) const {
    if (!error.empty()) throw std::runtime_error(context + ": " + error);
    if (!finished) throw std::runtime_error(context + ": " + unfinished);
  }
};

// Starts an actor `name` on `host` that runs `body` and records its outcome, which
// must outlive the simulation.
inline void start_driver(simgrid::s4u::Host* host, const std::string& name, std::function<void()> body,
                         DriverOutcome& outcome) {
  simgrid::s4u::Actor::create(name, host, [body = std::move(body), &outcome] {
    try {
      body();
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    outcome.finished = true;
  });
}

}  // namespace dpt::sim

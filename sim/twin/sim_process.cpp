// Forked-child simulations: see sim_process.hpp.
#include "sim/twin/sim_process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include <fmt/format.h>
#include <xbt/log.h>

#include "engine/core/device.hpp"

namespace dpt::sim {

namespace {

// One tag byte says what the payload is: the result or an exception's message.
constexpr char kTagResult = 'R';
constexpr char kTagInvalidArgument = 'I';
constexpr char kTagOutOfMemory = 'O';
constexpr char kTagError = 'E';

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the parent is gone; nothing left to tell
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string run_in_child_process(const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  // Buffered output would otherwise be written twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      out = kTagResult + fn();
    } catch (const std::invalid_argument& e) {
      out = kTagInvalidArgument + std::string(e.what());
    } catch (const dpt::OutOfMemory& e) {
      out = kTagOutOfMemory + std::string(e.what());
    } catch (const std::exception& e) {
      out = kTagError + std::string(e.what());
    } catch (...) {
      out = kTagError + std::string("unknown exception in the simulation process");
    }
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    write_all(fds[1], out);
    ::close(fds[1]);
    ::_exit(0);  // no atexit handlers: they belong to the parent (SimGrid's included)
  }
  ::close(fds[1]);
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (data.empty()) {
    if (WIFSIGNALED(status))
      throw std::runtime_error(fmt::format("simulation process killed by signal {} ({})", WTERMSIG(status),
                                           strsignal(WTERMSIG(status))));
    throw std::runtime_error(fmt::format("simulation process exited with status {} without a result",
                                         WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  const char tag = data[0];
  std::string payload = data.substr(1);
  switch (tag) {
    case kTagResult: return payload;
    case kTagInvalidArgument: throw std::invalid_argument(payload);
    case kTagOutOfMemory: throw dpt::OutOfMemory(payload);
    default: throw std::runtime_error(payload);
  }
}

std::unique_ptr<simgrid::s4u::Engine> make_engine() {
  static char arg0[] = "dptwin-sim";
  static char cfg_model[] = "--cfg=network/model:CM02";
  static char cfg_cross[] = "--cfg=network/crosstraffic:0";
  static char cfg_gamma[] = "--cfg=network/TCP-gamma:0";
  // The full max-min solver: SimGrid 3.32's default lazy update occasionally lets flows
  // exceed a link's bandwidth (seen: 8 flows into one GPU at 3x its PCIe bandwidth in a
  // 49-GPU tree all-reduce, 19 % faster than max-min sharing allows); the full solver
  // recomputes every share at every event and costs about a quarter more simulator time.
  static char cfg_optim[] = "--cfg=network/optim:Full";
  // Event times resolved to 1 ps, not SimGrid's default 1 ns: pipelined chains whose hops
  // share links settle into a phase pattern that depends on the order of near-simultaneous
  // events, and 1 ns rounding (5e-6 of a 200 us broadcast) was enough to flip it: a
  // 24-GPU broadcast on dgx-h100-cluster moved 2 % for 0.0014 % more bytes, and the
  // large-N replay (exact arithmetic) differed from it by up to 3.8 %. At 1 ps the two
  // agree to 1e-5 (the same pattern at 1e-10 .. 1e-14); sim_collectives_test holds it.
  static char cfg_precision[] = "--cfg=surf/precision:1e-12";
  static char log_root[] = "--log=root.thres:warning";
  static char log_cfg[] = "--log=xbt_cfg.thres:warning";
  static char* argv[] = {arg0, cfg_model, cfg_cross, cfg_gamma, cfg_optim, cfg_precision, log_root, log_cfg, nullptr};
  int argc = 8;
  return std::make_unique<simgrid::s4u::Engine>(&argc, argv);
}

std::string run_simulation(const HardwareSpec& hw, const std::function<void(Platform&)>& setup,
                           const std::function<std::string(Platform&)>& finish) {
  return run_in_child_process([&]() {
    // The Engine is deliberately not destroyed: the child ends with _exit right after,
    // and tearing SimGrid down costs time and buys nothing.
    simgrid::s4u::Engine* engine = make_engine().release();
    auto platform = Platform::build(*engine, hw);
    setup(*platform);
    engine->run();
    return finish(*platform);
  });
}

}  // namespace dpt::sim

#include "engine/cuda/rendezvous.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

namespace dpt {

// ---- environment ----------------------------------------------------------------

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

std::string require_var(const EnvLookup& env, const std::string& name, const std::string& launcher) {
  auto v = env(name);
  if (!v) throw std::invalid_argument(fmt::format("{} is not set (needed for a {} launch)", name, launcher));
  if (v->empty()) throw std::invalid_argument(fmt::format("{} is set but empty (needed for a {} launch)", name, launcher));
  return *v;
}

int parse_int_var(const std::string& name, const std::string& value, long lo, long hi) {
  long out = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec != std::errc() || ptr != last || value.empty())
    throw std::invalid_argument(fmt::format("{}='{}' is not an integer", name, value));
  if (out < lo || out > hi)
    throw std::invalid_argument(fmt::format("{}={} is outside [{}, {}]", name, out, lo, hi));
  return static_cast<int>(out);
}

}  // namespace

std::string slurm_first_host(const std::string& nodelist) {
  if (nodelist.empty()) throw std::invalid_argument("SLURM_JOB_NODELIST is empty");
  // The first top-level item: commas inside brackets separate ranges, not hosts.
  int depth = 0;
  size_t end = nodelist.size();
  for (size_t i = 0; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == '[') {
      if (++depth > 1) throw std::invalid_argument(fmt::format("SLURM_JOB_NODELIST='{}': nested '['", nodelist));
    } else if (c == ']') {
      if (--depth < 0) throw std::invalid_argument(fmt::format("SLURM_JOB_NODELIST='{}': unmatched ']'", nodelist));
    } else if (c == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  if (depth != 0 && end == nodelist.size())
    throw std::invalid_argument(fmt::format("SLURM_JOB_NODELIST='{}': unmatched '['", nodelist));
  const std::string item = nodelist.substr(0, end);
  // Each bracket expression contributes the first value of its first range.
  std::string host;
  for (size_t i = 0; i < item.size(); ++i) {
    if (item[i] != '[') {
      host += item[i];
      continue;
    }
    const size_t close = item.find(']', i);
    const std::string inner = item.substr(i + 1, close - i - 1);
    const std::string first = inner.substr(0, inner.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(
          fmt::format("SLURM_JOB_NODELIST='{}': range '[{}]' does not start with a number", nodelist, inner));
    host += first;
    i = close;
  }
  if (host.empty()) throw std::invalid_argument(fmt::format("SLURM_JOB_NODELIST='{}': empty first host", nodelist));
  return host;
}

RendezvousConfig rendezvous_from_env(const EnvLookup& env) {
  RendezvousConfig c;
  constexpr long kMaxRanks = 1L << 24;
  if (env("RANK")) {
    c.launcher = "torchrun";
    c.world_size = parse_int_var("WORLD_SIZE", require_var(env, "WORLD_SIZE", c.launcher), 1, kMaxRanks);
    c.rank = parse_int_var("RANK", require_var(env, "RANK", c.launcher), 0, c.world_size - 1);
    c.local_rank = parse_int_var("LOCAL_RANK", require_var(env, "LOCAL_RANK", c.launcher), 0, c.world_size - 1);
    c.master_addr = require_var(env, "MASTER_ADDR", c.launcher);
    c.master_port = parse_int_var("MASTER_PORT", require_var(env, "MASTER_PORT", c.launcher), 1, 65535);
    return c;
  }
  if (env("SLURM_PROCID")) {
    c.launcher = "slurm";
    c.world_size = parse_int_var("SLURM_NTASKS", require_var(env, "SLURM_NTASKS", c.launcher), 1, kMaxRanks);
    c.rank = parse_int_var("SLURM_PROCID", require_var(env, "SLURM_PROCID", c.launcher), 0, c.world_size - 1);
    c.local_rank =
        parse_int_var("SLURM_LOCALID", require_var(env, "SLURM_LOCALID", c.launcher), 0, c.world_size - 1);
    if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
      c.master_addr = *addr;
    } else if (auto list = env("SLURM_JOB_NODELIST"); list) {
      c.master_addr = slurm_first_host(*list);
    } else {
      throw std::invalid_argument("neither MASTER_ADDR nor SLURM_JOB_NODELIST is set (needed for a slurm launch)");
    }
    c.master_port = kDefaultMasterPort;
    if (auto port = env("MASTER_PORT"); port) c.master_port = parse_int_var("MASTER_PORT", *port, 1, 65535);
    return c;
  }
  throw std::invalid_argument(
      "no launcher environment: set torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, "
      "or run under Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST)");
}

// ---- TCP exchange -----------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'D', 'P', 'T', 'R', 'D', 'Z', 'V', '1'};
constexpr std::uint32_t kStatusOk = 0, kStatusRejected = 1;
constexpr std::uint32_t kMaxPayload = 1 << 20;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { if (fd_ >= 0) ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

std::string errno_text(int e) { return fmt::format("{} (errno {})", std::strerror(e), e); }

// Waits until fd is ready for `events` or the deadline passes; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) throw RendezvousError("rendezvous: poll failed: " + errno_text(errno));
  }
}

void write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& who) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, deadline)) throw RendezvousError(who + ": timed out while sending");
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw RendezvousError(who + ": send failed: " + errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& who) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) throw RendezvousError(who + ": timed out while receiving");
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) throw RendezvousError(who + ": the peer closed the connection");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw RendezvousError(who + ": receive failed: " + errno_text(errno));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void put_u32(std::vector<char>& buf, std::uint32_t v) {
  const std::uint32_t be = htonl(v);
  const auto* b = reinterpret_cast<const char*>(&be);
  buf.insert(buf.end(), b, b + 4);
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t be = 0;
  std::memcpy(&be, p, 4);
  return ntohl(be);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw RendezvousError("rendezvous: fcntl(O_NONBLOCK) failed: " + errno_text(errno));
}

void send_reply(int fd, std::uint32_t status, const std::vector<std::uint8_t>& payload, Clock::time_point deadline,
                const std::string& who) {
  std::vector<char> msg(kMagic, kMagic + 8);
  put_u32(msg, status);
  put_u32(msg, static_cast<std::uint32_t>(payload.size()));
  msg.insert(msg.end(), payload.begin(), payload.end());
  write_all(fd, msg.data(), msg.size(), deadline, who);
}

std::vector<std::uint8_t> serve(const RendezvousConfig& c, const std::vector<std::uint8_t>& id,
                                Clock::time_point deadline, Seconds timeout) {
  Fd listener(::socket(AF_INET6, SOCK_STREAM, 0));
  bool v6 = listener.get() >= 0;
  if (!v6) listener = Fd(::socket(AF_INET, SOCK_STREAM, 0));
  if (listener.get() < 0) throw RendezvousError("rendezvous: rank 0 could not create a socket: " + errno_text(errno));
  const int one = 1, zero = 0;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = -1;
  if (v6) {  // dual stack: IPv4 peers arrive as v4-mapped addresses
    ::setsockopt(listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<std::uint16_t>(c.master_port));
    bound = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<std::uint16_t>(c.master_port));
    bound = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (bound < 0 || ::listen(listener.get(), 128) < 0)
    throw RendezvousError(fmt::format("rendezvous: rank 0 could not listen on port {} (MASTER_PORT): {}",
                                      c.master_port, errno_text(errno)));
  set_nonblocking(listener.get());
  std::vector<bool> arrived(static_cast<size_t>(c.world_size), false);
  arrived[0] = true;
  int waiting = c.world_size - 1;
  const std::string who = "rendezvous: rank 0";
  while (waiting > 0) {
    if (!wait_fd(listener.get(), POLLIN, deadline)) {
      std::string missing;
      int shown = 0;
      for (int r = 1; r < c.world_size; ++r)
        if (!arrived[static_cast<size_t>(r)] && shown++ < 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      if (waiting > 16) missing += ", ...";
      throw RendezvousError(fmt::format("{} waited {:.1f} s on port {} for {} of {} ranks to connect; missing ranks: {}",
                                        who, timeout, c.master_port, waiting, c.world_size - 1, missing));
    }
    Fd conn(::accept(listener.get(), nullptr, nullptr));
    if (conn.get() < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
      throw RendezvousError(who + ": accept failed: " + errno_text(errno));
    }
    set_nonblocking(conn.get());
    char hello[16];
    read_all(conn.get(), hello, sizeof hello, deadline, who + " reading a peer's hello");
    if (std::memcmp(hello, kMagic, 8) != 0) {
      // Something else on the port (a scanner, a stale job): ignore it and keep listening.
      continue;
    }
    const auto peer_rank = static_cast<int>(get_u32(hello + 8));
    const auto peer_world = static_cast<int>(get_u32(hello + 12));
    std::string problem;
    if (peer_world != c.world_size)
      problem = fmt::format("rank {} announced world size {}, rank 0 has {}", peer_rank, peer_world, c.world_size);
    else if (peer_rank <= 0 || peer_rank >= c.world_size)
      problem = fmt::format("a peer announced rank {}, outside [1, {})", peer_rank, c.world_size);
    else if (arrived[static_cast<size_t>(peer_rank)])
      problem = fmt::format("rank {} connected twice", peer_rank);
    if (!problem.empty()) {
      send_reply(conn.get(), kStatusRejected, std::vector<std::uint8_t>(problem.begin(), problem.end()), deadline, who);
      throw RendezvousError(who + ": " + problem);
    }
    send_reply(conn.get(), kStatusOk, id, deadline, who);
    arrived[static_cast<size_t>(peer_rank)] = true;
    --waiting;
  }
  return id;
}

// Non-blocking connect bounded by the deadline; an invalid Fd with `err` set on failure.
Fd try_connect(const addrinfo* ai, Clock::time_point deadline, int& err) {
  Fd fd(::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol));
  if (fd.get() < 0) { err = errno; return Fd(); }
  set_nonblocking(fd.get());
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) < 0) {
    if (errno != EINPROGRESS) { err = errno; return Fd(); }
    if (!wait_fd(fd.get(), POLLOUT, deadline)) { err = ETIMEDOUT; return Fd(); }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) { err = so_error; return Fd(); }
  }
  return fd;
}

std::vector<std::uint8_t> join(const RendezvousConfig& c, Clock::time_point deadline, Seconds timeout) {
  const std::string who = fmt::format("rendezvous: rank {}", c.rank);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(c.master_port);
  const int gai = ::getaddrinfo(c.master_addr.c_str(), port.c_str(), &hints, &res);
  if (gai != 0)
    throw RendezvousError(fmt::format("{}: cannot resolve MASTER_ADDR='{}': {}", who, c.master_addr, gai_strerror(gai)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(res, &::freeaddrinfo);
  int last_err = 0;
  Fd fd;
  // Rank 0 may start listening after us: retry refused connections until the deadline.
  for (;;) {
    for (const addrinfo* ai = addrs.get(); ai && fd.get() < 0; ai = ai->ai_next) fd = try_connect(ai, deadline, last_err);
    if (fd.get() >= 0) break;
    if (remaining_ms(deadline) == 0)
      throw RendezvousError(fmt::format("{}: could not connect to rank 0 at MASTER_ADDR={} MASTER_PORT={} within "
                                        "{:.1f} s (last error: {})",
                                        who, c.master_addr, c.master_port, timeout, errno_text(last_err)));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, remaining_ms(deadline))));
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> hello(kMagic, kMagic + 8);
  put_u32(hello, static_cast<std::uint32_t>(c.rank));
  put_u32(hello, static_cast<std::uint32_t>(c.world_size));
  write_all(fd.get(), hello.data(), hello.size(), deadline, who);
  char head[16];
  read_all(fd.get(), head, sizeof head, deadline, who + " waiting for rank 0's reply");
  if (std::memcmp(head, kMagic, 8) != 0) throw RendezvousError(who + ": rank 0's reply is not a dptwin rendezvous message");
  const std::uint32_t status = get_u32(head + 8), len = get_u32(head + 12);
  if (len > kMaxPayload) throw RendezvousError(fmt::format("{}: rank 0 sent a {}-byte payload (limit {})", who, len, kMaxPayload));
  std::vector<std::uint8_t> payload(len);
  read_all(fd.get(), payload.data(), len, deadline, who + " receiving the id");
  if (status == kStatusRejected)
    throw RendezvousError(fmt::format("{}: rank 0 rejected this rank: {}", who, std::string(payload.begin(), payload.end())));
  if (status != kStatusOk) throw RendezvousError(fmt::format("{}: rank 0 replied with unknown status {}", who, status));
  return payload;
}

}  // namespace

std::vector<std::uint8_t> rendezvous_exchange(const RendezvousConfig& config, const std::vector<std::uint8_t>& id,
                                              Seconds timeout) {
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size)
    throw std::invalid_argument(fmt::format("rendezvous: rank {} is outside a world of size {}", config.rank,
                                            config.world_size));
  if (config.master_port < 1 || config.master_port > 65535)
    throw std::invalid_argument(fmt::format("rendezvous: MASTER_PORT={} is outside [1, 65535]", config.master_port));
  if (!(timeout > 0)) throw std::invalid_argument(fmt::format("rendezvous: timeout {} s must be positive", timeout));
  if (config.rank == 0 && id.size() > kMaxPayload)
    throw std::invalid_argument(fmt::format("rendezvous: id of {} bytes exceeds {}", id.size(), kMaxPayload));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
  if (config.rank == 0) return config.world_size == 1 ? id : serve(config, id, deadline, timeout);
  return join(config, deadline, timeout);
}

}  // namespace dpt

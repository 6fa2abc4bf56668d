// The multi-process rendezvous without CUDA: launcher environments (torchrun,
// Slurm) parsed with clear errors, Slurm host lists, and the TCP id exchange on
// loopback, including its failures (nobody listening, a rank that never comes,
// a world-size mismatch), each bounded by its timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "engine/cuda/rendezvous.hpp"
#include "verify/support/error_text.hpp"
#include "verify/support/rc_cases.hpp"

using namespace dpt;
using dpt::test::invalid_argument_text;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> torchrun_env() {
  return {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"}};
}

std::map<std::string, std::string> slurm_env() {
  return {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"},
          {"SLURM_JOB_NODELIST", "gpu[003-006,010],login1"}};
}

// A TCP port that was free a moment ago (bind to port 0, read it back, close).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

RendezvousConfig loopback(int rank, int world, int port) {
  RendezvousConfig c;
  c.launcher = "test";
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.rank = rank;
  c.world_size = world;
  c.local_rank = rank;
  return c;
}

std::vector<std::uint8_t> id_128() {
  std::vector<std::uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>((i * 37 + 11) & 0xff);
  return id;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(RendezvousEnv, ReadsTorchrun) {
  const auto c = rendezvous_from_env(env_of(torchrun_env()));
  EXPECT_EQ(c.launcher, "torchrun");
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.master_addr, "node7");
  EXPECT_EQ(c.master_port, 29400);
}

TEST(RendezvousEnv, ReadsSlurmWithFirstHostAndDefaultPort) {
  const auto c = rendezvous_from_env(env_of(slurm_env()));
  EXPECT_EQ(c.launcher, "slurm");
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.world_size, 16);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.master_addr, "gpu003");
  EXPECT_EQ(c.master_port, 29500);  // torchrun's default master port
}

TEST(RendezvousEnv, SlurmTakesMasterAddrAndPortWhenSet) {
  auto vars = slurm_env();
  vars["MASTER_ADDR"] = "10.0.0.9";
  vars["MASTER_PORT"] = "12345";
  const auto c = rendezvous_from_env(env_of(vars));
  EXPECT_EQ(c.master_addr, "10.0.0.9");
  EXPECT_EQ(c.master_port, 12345);
}

TEST(RendezvousEnv, TorchrunWinsWhenBothAreSet) {
  auto vars = slurm_env();
  for (auto& [k, v] : torchrun_env()) vars[k] = v;
  EXPECT_EQ(rendezvous_from_env(env_of(vars)).launcher, "torchrun");
}

TEST(RendezvousEnv, BadValuesNameTheVariable) {
  auto with = [](std::map<std::string, std::string> base, const std::string& k, const std::string& v) {
    base[k] = v;
    return env_of(base);
  };
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(torchrun_env(), "RANK", "abc")); }),
            "RANK='abc' is not an integer");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(torchrun_env(), "RANK", "8")); }),
            "RANK=8 is outside [0, 7]");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(torchrun_env(), "WORLD_SIZE", "0")); }),
            "WORLD_SIZE=0 is outside [1, 16777216]");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(torchrun_env(), "MASTER_PORT", "70000")); }),
            "MASTER_PORT=70000 is outside [1, 65535]");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(torchrun_env(), "MASTER_PORT", "29500x")); }),
            "MASTER_PORT='29500x' is not an integer");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(torchrun_env(), "LOCAL_RANK", "-1")); }),
            "LOCAL_RANK=-1 is outside [0, 7]");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(slurm_env(), "SLURM_NTASKS", "")); }),
            "SLURM_NTASKS is set but empty (needed for a slurm launch)");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(with(slurm_env(), "SLURM_PROCID", "16")); }),
            "SLURM_PROCID=16 is outside [0, 15]");
  auto no_addr = torchrun_env();
  no_addr.erase("MASTER_ADDR");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(env_of(no_addr)); }),
            "MASTER_ADDR is not set (needed for a torchrun launch)");
  auto no_list = slurm_env();
  no_list.erase("SLURM_JOB_NODELIST");
  EXPECT_EQ(invalid_argument_text([&] { rendezvous_from_env(env_of(no_list)); }),
            "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set (needed for a slurm launch)");
  const std::string none = invalid_argument_text([&] { rendezvous_from_env(env_of({})); });
  EXPECT_NE(none.find("no launcher environment"), std::string::npos) << none;
  EXPECT_NE(none.find("SLURM_PROCID"), std::string::npos) << none;
  EXPECT_NE(none.find("MASTER_PORT"), std::string::npos) << none;
}

TEST(SlurmHostList, FirstHostOfTypicalLists) {
  EXPECT_EQ(slurm_first_host("node01"), "node01");
  EXPECT_EQ(slurm_first_host("a,b,c"), "a");
  EXPECT_EQ(slurm_first_host("gpu[03-07,9],login1"), "gpu03");
  EXPECT_EQ(slurm_first_host("gpu[7,3-5]"), "gpu7");  // Slurm keeps the listed order
  EXPECT_EQ(slurm_first_host("rack[1-2]-n[01-04]"), "rack1-n01");
  EXPECT_EQ(slurm_first_host("x-[0010-0020].cluster"), "x-0010.cluster");
}

TEST(SlurmHostList, MalformedListsAreErrors) {
  EXPECT_NE(invalid_argument_text([] { slurm_first_host("gpu[01-02"); }).find("unmatched '['"), std::string::npos);
  EXPECT_NE(invalid_argument_text([] { slurm_first_host("gpu01]"); }).find("unmatched ']'"), std::string::npos);
  EXPECT_NE(invalid_argument_text([] { slurm_first_host("gpu[a-b]"); }).find("does not start with a number"),
            std::string::npos);
  EXPECT_NE(invalid_argument_text([] { slurm_first_host(""); }).find("empty"), std::string::npos);
}

namespace {
// Property body shared by the real parser and the planted bug: a host list built
// from generated parts (prefix, zero-padded ranges, suffix, further hosts).
template <typename FirstHost> void first_host_property(FirstHost first_host) {
  const auto prefix = *rc::gen::container<std::string>(*rc::gen::inRange<size_t>(1, 6), rc::gen::elementOf(std::string("abcxyz-")));
  const int width = *rc::gen::inRange(1, 5);
  const int start = *rc::gen::inRange(0, 50);
  const int stop = start + *rc::gen::inRange(0, 30);
  const bool more_ranges = *rc::gen::arbitrary<bool>();
  const bool trailing_host = *rc::gen::arbitrary<bool>();
  const std::string suffix = *rc::gen::element(std::string(""), std::string(".ib"), std::string("-eth"));
  const std::string first = fmt::format("{:0{}}", start, width);
  std::string list = prefix + "[" + first + "-" + fmt::format("{:0{}}", stop, width) +
                     (more_ranges ? fmt::format(",{:0{}}", stop + 2, width) : "") + "]" + suffix;
  if (trailing_host) list += ",other[1-2]";
  // Invariant: the first host is the prefix, the first number of the first range
  // with its zero padding, then the suffix; later ranges and hosts do not matter.
  RC_ASSERT(first_host(list) == prefix + first + suffix);
}
}  // namespace

TEST(SlurmHostList, FirstHostProperty) {
  DPT_EXPECT_PROPERTY("slurm first host keeps prefix, padding and suffix", 200,
                      [] { first_host_property(slurm_first_host); });
}

TEST(SlurmHostList, FirstHostPropertyCatchesLostPadding) {
  // Planted bug: a parser that reads the first number as an integer drops zero padding.
  auto broken = [](const std::string& list) {
    const std::string host = slurm_first_host(list);
    const size_t b = list.find('['), e = list.find_first_of("-,]", b);
    const std::string digits = list.substr(b + 1, e - b - 1);
    return host.substr(0, b) + std::to_string(std::stoi(digits)) + host.substr(b + digits.size());
  };
  DPT_EXPECT_COUNTEREXAMPLE("first host without zero padding", 200, [&] { first_host_property(broken); });
}

TEST(RendezvousExchange, ThreeRanksReceiveRankZerosId) {
  const int port = free_port();
  const auto id = id_128();
  auto r0 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(0, 3, port), id, 10.0); });
  auto r1 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(1, 3, port), {}, 10.0); });
  auto r2 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(2, 3, port), {}, 10.0); });
  EXPECT_EQ(r0.get(), id);
  EXPECT_EQ(r1.get(), id);
  EXPECT_EQ(r2.get(), id);
}

TEST(RendezvousExchange, PeersMayStartBeforeRankZero) {
  const int port = free_port();
  const auto id = id_128();
  auto r1 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(1, 2, port), {}, 10.0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 retries refused connections meanwhile
  auto r0 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(0, 2, port), id, 10.0); });
  EXPECT_EQ(r1.get(), id);
  EXPECT_EQ(r0.get(), id);
}

TEST(RendezvousExchange, SingleRankNeedsNoNetwork) {
  EXPECT_EQ(rendezvous_exchange(loopback(0, 1, 1), id_128(), 1.0), id_128());
}

TEST(RendezvousExchange, NobodyListeningTimesOutNamingTheAddress) {
  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    rendezvous_exchange(loopback(1, 2, port), {}, 0.5);
    FAIL() << "expected RendezvousError";
  } catch (const RendezvousError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("MASTER_ADDR=127.0.0.1 MASTER_PORT={}", port)), std::string::npos) << msg;
    EXPECT_NE(msg.find("Connection refused"), std::string::npos) << msg;
  }
  const double waited = seconds_since(t0);
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 5.0);  // bounded: never a hang
}

TEST(RendezvousExchange, MissingRankTimesOutOnRankZero) {
  const int port = free_port();
  const auto id = id_128();
  auto r1 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(1, 3, port), {}, 5.0); });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    rendezvous_exchange(loopback(0, 3, port), id, 1.0);
    FAIL() << "expected RendezvousError";
  } catch (const RendezvousError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 0 waited 1.0 s"), std::string::npos) << msg;
    EXPECT_NE(msg.find("for 1 of 2 ranks"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing ranks: 2"), std::string::npos) << msg;
  }
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(r1.get(), id);  // the rank that came was served before rank 0 gave up
}

TEST(RendezvousExchange, WorldSizeMismatchIsRejectedOnBothSides) {
  const int port = free_port();
  auto r0 = std::async(std::launch::async, [&] { return rendezvous_exchange(loopback(0, 2, port), id_128(), 5.0); });
  try {
    rendezvous_exchange(loopback(1, 4, port), {}, 5.0);
    FAIL() << "expected RendezvousError on rank 1";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 rejected this rank: rank 1 announced world size 4, rank 0 has 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(r0.get(), RendezvousError);
}

TEST(RendezvousExchange, BadArgumentsAreInvalid) {
  EXPECT_THROW(rendezvous_exchange(loopback(2, 2, 1234), {}, 1.0), std::invalid_argument);
  EXPECT_THROW(rendezvous_exchange(loopback(0, 2, 0), id_128(), 1.0), std::invalid_argument);
  EXPECT_THROW(rendezvous_exchange(loopback(0, 2, 1234), id_128(), 0.0), std::invalid_argument);
}

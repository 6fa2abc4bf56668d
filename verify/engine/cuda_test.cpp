// Tests that need a GPU (ctest label `gpu`). Without one each test is reported as
// skipped with the CUDA runtime's reason. With one they check that the same engine
// code gives the same numbers on the host and CUDA backends, that NCCL collectives
// on integer-valued inputs are exact, and that failures and timeouts surface as
// CollectiveError instead of hanging.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <future>
#include <random>

#include <fmt/format.h>

#include "engine/cuda/cuda_backend.hpp"
#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/nccl_communicator.hpp"
#include "engine/core/fault_communicator.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"

using namespace dpt;

#define DPT_REQUIRE_GPUS(n)                                                                        \
  do {                                                                                             \
    std::string why_;                                                                              \
    const int have_ = cuda_device_count(&why_);                                                    \
    if (have_ < (n))                                                                               \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << have_                        \
                   << (have_ == 0 ? " (" + why_ + ")" : std::string());                            \
  } while (0)

namespace {

std::vector<double> random_values(size_t n, std::uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

Tensor host_tensor(Device& d, const Shape& s, DType t, const std::vector<double>& v) {
  Tensor out = Tensor::empty(d, s, t);
  tensor_fill_from_f64(out, v);
  return out;
}

std::vector<double> read_back(Backend& b, const Tensor& t) {
  if (t.device().kind() != DeviceKind::cuda) return tensor_to_f64_vector(t);
  return tensor_to_f64_vector(copy_to(b, t, b.host_memory(), MemoryCategory::workspace));
}

// max |a - b| / max |b|: one relative error per tensor, as the issue states them.
double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

double tolerance(DType t) { return t == DType::f64 ? 1e-12 : 1e-5; }

}  // namespace

// ---- the same kernels on host and GPU ----------------------------------------------

TEST(CudaKernels, GemmMatchesOpenBlasForEveryTransposeAndDtype) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  Device& gpu = cuda.device(0);
  Device& cpu = cuda.host_memory();
  const std::int64_t m = 37, n = 29, k = 53;
  for (DType t : {DType::f32, DType::f64}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
        Tensor a = host_tensor(cpu, sa, t, random_values(m * k, 1)), b = host_tensor(cpu, sb, t, random_values(k * n, 2));
        Tensor c = host_tensor(cpu, {m, n}, t, random_values(m * n, 3));
        Tensor ga = copy_to(cuda, a, gpu, MemoryCategory::workspace), gb = copy_to(cuda, b, gpu, MemoryCategory::workspace);
        Tensor gc = copy_to(cuda, c, gpu, MemoryCategory::workspace);
        host_kernels().gemm(t, ta, tb, m, n, k, 0.7, a.data(), b.data(), 0.5, c.data());
        gpu.submit({"gemm", OpKind::compute}, [&] {
          gpu.kernels().gemm(t, ta, tb, m, n, k, 0.7, ga.data(), gb.data(), 0.5, gc.data());
        });
        EXPECT_LE(rel_error(read_back(cuda, gc), tensor_to_f64_vector(c)), tolerance(t))
            << dtype_name(t) << " ta=" << ta << " tb=" << tb;
      }
    }
    // k == 0: C = beta * C, exactly.
    Tensor c = host_tensor(cpu, {m, n}, t, random_values(m * n, 4));
    Tensor gc = copy_to(cuda, c, gpu, MemoryCategory::workspace);
    gpu.kernels().gemm(t, false, false, m, n, 0, 1.0, nullptr, nullptr, 0.25, gc.data());
    const auto before = tensor_to_f64_vector(c);
    const auto after = read_back(cuda, gc);
    // Scaling by a power of two is exact in both dtypes.
    for (size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], 0.25 * before[i]) << dtype_name(t) << " i=" << i;
  }
}

TEST(CudaKernels, CrossEntropyRejectsABadLabelOnTheGpu) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  Device& gpu = cuda.device(0);
  Tensor logits = copy_to(cuda, host_tensor(cuda.host_memory(), {3, 4}, DType::f32, random_values(12, 5)), gpu,
                          MemoryCategory::workspace);
  Tensor labels = copy_to(cuda, host_tensor(cuda.host_memory(), {3}, DType::i64, {0, 4, 1}), gpu,
                          MemoryCategory::inputs);
  EXPECT_THROW(kernel_cross_entropy(logits, labels, 3.0, nullptr), std::invalid_argument);
}

// ---- the same model on host and GPU ------------------------------------------------

namespace {

struct TrainRun {
  std::vector<double> losses;
  std::vector<std::vector<double>> grads;   // after the first backward
  std::vector<std::vector<double>> params;  // after all steps
};

// Forward, loss, backward and an optimizer step, `steps` times, on `device`.
TrainRun run_steps(Backend& backend, Sequential& model, Device& device, const Tensor& x_host, const Tensor& y_host,
              LossKind loss, bool adamw, int steps) {
  Tensor x = copy_to(backend, x_host, device, MemoryCategory::inputs);
  Tensor y = copy_to(backend, y_host, device, MemoryCategory::inputs);
  std::unique_ptr<Optimizer> opt =
      adamw ? make_adamw(model.named_parameters(), AdamWOptions{0.01, 0.9, 0.999, 1e-8, 0.01})
            : make_sgd(model.named_parameters(), SgdOptions{0.05, 0.9, 0.0, 1e-4, false});
  TrainRun run;
  for (int s = 0; s < steps; ++s) {
    model.zero_grad();
    Tensor out = model.forward(x);
    LossResult l = loss_forward_backward(loss, Reduction::mean, out, y);
    model.backward(l.grad);
    run.losses.push_back(l.value);
    if (s == 0)
      for (auto& p : model.named_parameters()) run.grads.push_back(read_back(backend, p.param->grad));
    opt->step();
  }
  for (auto& p : model.named_parameters()) run.params.push_back(read_back(backend, p.param->value));
  return run;
}

}  // namespace

TEST(CudaEquivalence, SameGradientsAndParametersAsTheHostBackend) {
  DPT_REQUIRE_GPUS(1);
  HostBackend host(1);
  CudaBackend cuda;
  const std::int64_t batch = 24;
  for (DType t : {DType::f64, DType::f32}) {
    for (LossKind loss : {LossKind::mse, LossKind::cross_entropy}) {
      for (bool adamw : {false, true}) {
        MlpSpec spec = parse_mlp_spec("mlp:16-32-32-5");
        spec.layernorm = true;
        spec.activation = Activation::gelu;
        Sequential hm = make_mlp(spec, host.device(0), t, 11);
        // The GPU model starts from the host model's exact weights.
        Sequential gm = hm.replicate_on(cuda.device(0));
        auto hp = hm.named_parameters(), gp = gm.named_parameters();
        for (size_t i = 0; i < hp.size(); ++i) cuda.copy(hp[i].param->value, gp[i].param->value);
        Tensor x = host_tensor(host.device(0), {batch, 16}, t, random_values(batch * 16, 21));
        Tensor y;
        if (loss == LossKind::mse) {
          y = host_tensor(host.device(0), {batch, 5}, t, random_values(batch * 5, 22));
        } else {
          std::vector<double> labels(batch);
          for (std::int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = static_cast<double>((i * 7) % 5);
          y = host_tensor(host.device(0), {batch}, DType::i64, labels);
        }
        const TrainRun h = run_steps(host, hm, host.device(0), x, y, loss, adamw, 3);
        const TrainRun g = run_steps(cuda, gm, cuda.device(0), x, y, loss, adamw, 3);
        const std::string what = fmt::format("{} {} {}", dtype_name(t), loss == LossKind::mse ? "mse" : "ce",
                                             adamw ? "adamw" : "sgd");
        for (size_t s = 0; s < h.losses.size(); ++s)
          EXPECT_LE(std::abs(g.losses[s] - h.losses[s]) / std::abs(h.losses[s]), tolerance(t)) << what << " step " << s;
        for (size_t i = 0; i < h.grads.size(); ++i)
          EXPECT_LE(rel_error(g.grads[i], h.grads[i]), tolerance(t)) << what << " grad " << hp[i].name;
        for (size_t i = 0; i < h.params.size(); ++i)
          EXPECT_LE(rel_error(g.params[i], h.params[i]), tolerance(t)) << what << " param " << hp[i].name;
      }
    }
  }
}

// ---- NCCL ----------------------------------------------------------------------------

namespace {
constexpr std::int64_t kCount = 1000;
// Ranks 0..n-1 on devices 0..n-1.
std::vector<int> every_device(int n) {
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  return ids;
}
double value_of(std::int64_t i, int rank) { return static_cast<double>(i % 17 + rank); }
}  // namespace

TEST(Nccl, IntegerValuedCollectivesAreExact) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  const int n = cuda.device_count();
  const std::vector<int> ids = every_device(n);
  auto comms = cuda.make_communicators(ids);
  for (DType t : {DType::f32, DType::f64, DType::i64, DType::i32}) {
    cuda.parallel_for(n, [&](int r) {
      Communicator& c = *comms[static_cast<size_t>(r)];
      Device& d = cuda.device(r);
      auto make = [&](std::int64_t count, auto value) {
        std::vector<double> v(static_cast<size_t>(count));
        for (std::int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = value(i);
        return copy_to(cuda, host_tensor(cuda.host_memory(), {count}, t, v), d, MemoryCategory::workspace);
      };
      // Invariant: sum over ranks q of (i % 17 + q) = n (i % 17) + n (n - 1) / 2, exactly.
      Tensor a = make(kCount, [&](std::int64_t i) { return value_of(i, r); });
      c.all_reduce(a, {ReduceOp::sum})->wait();
      auto av = read_back(cuda, a);
      for (std::int64_t i = 0; i < kCount; ++i)
        ASSERT_EQ(av[static_cast<size_t>(i)], n * static_cast<double>(i % 17) + n * (n - 1) / 2.0) << "sum i=" << i;
      // Invariant: max over ranks is the highest rank's value.
      Tensor mx = make(kCount, [&](std::int64_t i) { return value_of(i, r); });
      c.all_reduce(mx, {ReduceOp::max})->wait();
      auto mv = read_back(cuda, mx);
      for (std::int64_t i = 0; i < kCount; ++i) ASSERT_EQ(mv[static_cast<size_t>(i)], value_of(i, n - 1));
      // Invariant: broadcast from the last rank leaves its values everywhere.
      Tensor b = make(kCount, [&](std::int64_t i) { return value_of(i, r); });
      c.broadcast(b, {n - 1})->wait();
      auto bv = read_back(cuda, b);
      for (std::int64_t i = 0; i < kCount; ++i) ASSERT_EQ(bv[static_cast<size_t>(i)], value_of(i, n - 1));
      // Invariant: all_gather puts rank q's block at offset q * count.
      Tensor in = make(kCount, [&](std::int64_t i) { return value_of(i, r); });
      Tensor out = Tensor::empty(d, {kCount * n}, t);
      c.all_gather(out, in, {})->wait();
      auto gv = read_back(cuda, out);
      for (int q = 0; q < n; ++q)
        for (std::int64_t i = 0; i < kCount; ++i)
          ASSERT_EQ(gv[static_cast<size_t>(q * kCount + i)], value_of(i, q));
      // Invariant: reduce_scatter gives rank r the sum of block r.
      Tensor rin = make(kCount * n, [&](std::int64_t j) { return value_of(j, r); });
      Tensor rout = Tensor::empty(d, {kCount}, t);
      c.reduce_scatter(rout, rin, {ReduceOp::sum})->wait();
      auto rv = read_back(cuda, rout);
      for (std::int64_t i = 0; i < kCount; ++i) {
        const std::int64_t j = r * kCount + i;
        ASSERT_EQ(rv[static_cast<size_t>(i)], n * static_cast<double>(j % 17) + n * (n - 1) / 2.0);
      }
      c.barrier({})->wait();
    });
  }
}

TEST(Nccl, OneThreadDrivesAllRanksInsideAGroup) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  const int n = cuda.device_count();
  const std::vector<int> ids = every_device(n);
  auto comms = cuda.make_communicators(ids);
  std::vector<Tensor> ts;
  for (int r = 0; r < n; ++r) {
    std::vector<double> v(kCount);
    for (std::int64_t i = 0; i < kCount; ++i) v[static_cast<size_t>(i)] = value_of(i, r);
    ts.push_back(copy_to(cuda, host_tensor(cuda.host_memory(), {kCount}, DType::f32, v), cuda.device(r),
                         MemoryCategory::workspace));
  }
  std::vector<WorkPtr> works;
  nccl_group([&] {
    for (int r = 0; r < n; ++r) works.push_back(comms[static_cast<size_t>(r)]->all_reduce(ts[static_cast<size_t>(r)], {}));
  });
  for (auto& w : works) w->wait();
  for (int r = 0; r < n; ++r) {
    auto v = read_back(cuda, ts[static_cast<size_t>(r)]);
    for (std::int64_t i = 0; i < kCount; ++i)
      ASSERT_EQ(v[static_cast<size_t>(i)], n * static_cast<double>(i % 17) + n * (n - 1) / 2.0);
  }
}

namespace {
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}
}  // namespace

TEST(Nccl, RendezvousInitAcrossThreadsAsIfProcesses) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  const int n = cuda.device_count();
  const int port = free_port();
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(n));
  cuda.parallel_for(n, [&](int r) {
    RendezvousConfig c{"test", "127.0.0.1", port, r, n, r};
    comms[static_cast<size_t>(r)] = make_nccl_communicator(cuda.cuda_device(r), c, 60.0);
  });
  cuda.parallel_for(n, [&](int r) {
    Tensor t = copy_to(cuda, host_tensor(cuda.host_memory(), {4}, DType::f64, {1, 2, 3, static_cast<double>(r)}),
                       cuda.device(r), MemoryCategory::workspace);
    comms[static_cast<size_t>(r)]->all_reduce(t, {})->wait();
    EXPECT_EQ(read_back(cuda, t), (std::vector<double>{1.0 * n, 2.0 * n, 3.0 * n, n * (n - 1) / 2.0}));
  });
}

TEST(Nccl, AbsentPeerTimesOutWithCollectiveError) {
  DPT_REQUIRE_GPUS(2);
  CudaBackend cuda;
  auto comms = cuda.make_communicators({0, 1});
  Tensor t = Tensor::zeros(cuda.device(0), {16}, DType::f32);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comms[0]->all_reduce(t, {ReduceOp::sum, 0.5})->wait();  // rank 1 never joins
    FAIL() << "expected CollectiveError";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.collective(), "all_reduce");
    EXPECT_EQ(e.rank(), 0);
    EXPECT_NE(e.cause().find("timed out after 0.500 s"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  // The group was aborted: rank 1 fails at once, naming the first failure.
  try {
    comms[1]->all_reduce(t, {})->wait();
    FAIL() << "expected CollectiveError on rank 1";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_NE(e.cause().find("all_reduce failed on rank 0"), std::string::npos) << e.what();
  }
}

TEST(Nccl, InjectedFaultFailsEveryRank) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  const int n = cuda.device_count();
  const std::vector<int> ids = every_device(n);
  FaultPlan plan;
  plan.rank = n - 1;
  plan.collective_index = 1;
  plan.cause = "planted NCCL failure";
  auto comms = wrap_with_faults(cuda.make_communicators(ids), plan);
  std::vector<std::string> errors(static_cast<size_t>(n));
  cuda.parallel_for(n, [&](int r) {
    Tensor t = Tensor::zeros(cuda.device(r), {8}, DType::f32);
    comms[static_cast<size_t>(r)]->all_reduce(t, {ReduceOp::sum, 20.0})->wait();  // #0 succeeds
    try {
      comms[static_cast<size_t>(r)]->all_reduce(t, {ReduceOp::sum, 20.0})->wait();
    } catch (const CollectiveError& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("all_reduce failed on rank " + std::to_string(r)), std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_NE(errors[static_cast<size_t>(r)].find("planted NCCL failure"), std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
}

// ---- device, copies, allocator, timeline ---------------------------------------------

TEST(CudaDevice, CopiesRoundTripBetweenHostAndEveryDevicePair) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  const auto v = random_values(3000, 9);
  Tensor h = host_tensor(cuda.host_memory(), {3000}, DType::f64, v);
  for (int i = 0; i < cuda.device_count(); ++i) {
    Tensor a = copy_to(cuda, h, cuda.device(i), MemoryCategory::workspace);
    for (int j = 0; j < cuda.device_count(); ++j) {
      Tensor b = copy_to(cuda, a, cuda.device(j), MemoryCategory::workspace);
      EXPECT_EQ(read_back(cuda, b), v) << "cuda:" << i << " -> cuda:" << j
                                       << (cuda.peer_access(j, i) ? " (peer)" : " (staged)");
    }
  }
}

TEST(CudaDevice, CachingAllocatorReusesAFreedBlockOfTheSameClass) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  CachingAllocator& alloc = cuda.cuda_device(0).allocator();
  void* p = alloc.allocate(1000);
  const Bytes reserved = alloc.reserved_bytes();
  alloc.deallocate(p, 1000);
  void* q = alloc.allocate(900);  // same 1024-byte class
  EXPECT_EQ(q, p);
  EXPECT_EQ(alloc.reserved_bytes(), reserved);
  alloc.deallocate(q, 900);
  alloc.release_cached();
  EXPECT_EQ(alloc.cached_bytes(), 0);
}

TEST(CudaDevice, TimelineMeasuresEveryOpWithEvents) {
  DPT_REQUIRE_GPUS(1);
  CudaBackendOptions o;
  o.device.record_timeline = true;
  CudaBackend cuda(o);
  CudaDevice& d = cuda.cuda_device(0);
  Tensor x = Tensor::zeros(d, {256, 512}, DType::f32), w = Tensor::zeros(d, {512, 512}, DType::f32);
  Tensor y = Tensor::empty(d, {256, 512}, DType::f32);
  d.timeline().start(d.stream());
  kernel_linear_forward(x, w, nullptr, y);
  kernel_scale(y, 2.0);
  d.synchronize();
  const auto ops = d.timeline().resolve();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "gemm_fwd");
  EXPECT_EQ(ops[1].name, "scale");
  EXPECT_GE(ops[0].start_s, 0.0);
  EXPECT_GT(ops[0].end_s, ops[0].start_s);
  EXPECT_GE(ops[1].start_s, ops[0].end_s);  // one stream: in order
  EXPECT_DOUBLE_EQ(ops[0].flops, 2.0 * 256 * 512 * 512);
}

TEST(CudaDevice, BackendTimelinesCoverKernelsAndCollectives) {
  DPT_REQUIRE_GPUS(1);
  CudaBackend cuda;
  const int n = cuda.device_count();
  const std::vector<int> ids = every_device(n);
  auto comms = cuda.make_communicators(ids);
  cuda.start_timelines();
  cuda.parallel_for(n, [&](int r) {
    Tensor t = Tensor::zeros(cuda.device(r), {1 << 20}, DType::f32);
    kernel_scale(t, 2.0);
    comms[static_cast<size_t>(r)]->all_reduce(t, {})->wait();
  });
  const MeasuredStep m = cuda.collect_timelines(0.0);
  ASSERT_EQ(m.device_names.size(), static_cast<size_t>(n));
  int collectives = 0, scales = 0;
  for (const auto& t : m.intervals) {
    EXPECT_GE(t.end_s, t.start_s) << t.name;
    if (t.name == "all_reduce") {
      ++collectives;
      EXPECT_EQ(t.stream, 1);
      EXPECT_EQ(t.kind, OpKind::collective);
    }
    if (t.name == "scale") ++scales;
  }
  EXPECT_EQ(collectives, n);
  EXPECT_EQ(scales, n);
}

#include "scenarios/verify/verify_properties.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "engine/io/checkpoint.hpp"
#include "engine/parallel/data_parallel.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "engine/nn/init.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"
#include "engine/io/safetensors.hpp"
#include "engine/parallel/split.hpp"
#include "scenarios/verify/mlp_cases.hpp"
#include "scenarios/verify/verify_rapidcheck.hpp"

namespace dpt::verify {

namespace {
constexpr PlantedBug kPlantedBugs[] = {PlantedBug::drop_chunk, PlantedBug::skip_divide, PlantedBug::ring_step};
}  // namespace

Fault planted_fault(PlantedBug b) {
  switch (b) {
    case PlantedBug::drop_chunk: return Fault::dp_scatter_drops_last_chunk;
    case PlantedBug::skip_divide: return Fault::ddp_skip_divide;
    case PlantedBug::ring_step: return Fault::ring_skips_last_all_gather_step;
    case PlantedBug::none: break;
  }
  throw std::logic_error("planted_fault: no fault for PlantedBug::none");
}

PlantedBug planted_bug_from_name(const std::string& name) {
  if (name == "none") return PlantedBug::none;
  for (PlantedBug b : kPlantedBugs)
    if (name == fault_name(planted_fault(b))) return b;
  throw std::invalid_argument("--inject-bug: unknown bug '" + name +
                              "' (known: none, drop-chunk, skip-divide, ring-step)");
}

const char* planted_bug_name(PlantedBug b) { return b == PlantedBug::none ? "none" : fault_name(planted_fault(b)); }

namespace {

using Values = std::vector<std::vector<double>>;  // one vector per parameter tensor

// Switches on the planted fault of `options` for the caller's scope when it is `bug`.
std::unique_ptr<ScopedFault> plant_if(const CorrectnessOptions& options, PlantedBug bug) {
  return options.bug == bug ? std::make_unique<ScopedFault>(planted_fault(bug)) : nullptr;
}

// ---- random MLP training cases (mlp_cases.hpp) -----------------------------------

// Small enough that a case takes milliseconds, so verify runs hundreds of them: depth
// 1-3, widths 1-16, f64.
MlpCaseBounds case_bounds(std::int64_t max_batch, int max_devices) {
  MlpCaseBounds bounds;
  bounds.max_batch = max_batch;
  bounds.max_devices = max_devices;
  bounds.max_width = 16;
  bounds.max_depth = 3;
  bounds.dtypes = {DType::f64};
  return bounds;
}

std::vector<int> first_devices(int n) {
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  return ids;
}

// Where `model`'s gradients are farther from the reference `want` than the rounding of
// the case allows (gradient_error against the full batch's summand scale, within
// rounding_tolerance), described for the failure message; empty when they are not.
std::string mismatch(Backend& backend, const MlpCase& c, const Batch& b, Sequential& model, const Values& want) {
  const GradError e = gradient_error(grads_of(backend, model), want, full_batch_scale(backend, c, b));
  const double tol = rounding_tolerance(c);
  if (e.global <= tol && e.per_tensor <= 100 * tol) return {};
  const auto params = model.named_parameters();
  const std::string tensor =
      e.worst_tensor >= 0 && e.worst_tensor < static_cast<int>(params.size()) ? params[e.worst_tensor].name : "?";
  return fmt::format("gradient of {} differs from the single-device full-batch gradient: relative error {:.3g} "
                     "(this tensor {:.3g}) > rounding tolerance {:.3g} ({:.3g} per tensor)",
                     tensor, e.global, e.per_tensor, tol, 100 * tol);
}

// ---- the properties ---------------------------------------------------------------

CheckOutcome torch_chunk_property(const PropertyRun& run) {
  return check_property(run, [] {
    const auto batch = *rc::gen::inRange<std::int64_t>(1, 4097);
    const int devices = *rc::gen::inRange(1, 65);
    const auto sizes = chunk_sizes(batch, devices);
    const std::int64_t chunk = (batch + devices - 1) / devices;
    // Invariant (torch.chunk): every chunk but the last holds ceil(B/N) rows, the last
    // 1..ceil(B/N), there are ceil(B / ceil(B/N)) <= N of them, and together they hold
    // each of the B rows exactly once, in order (sizes add up to B).
    RC_ASSERT(static_cast<std::int64_t>(sizes.size()) == (batch + chunk - 1) / chunk);
    RC_ASSERT(static_cast<int>(sizes.size()) <= devices);
    std::int64_t total = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i + 1 < sizes.size()) RC_ASSERT(sizes[i] == chunk);
      else RC_ASSERT(sizes[i] >= 1 && sizes[i] <= chunk);
      total += sizes[i];
    }
    RC_ASSERT(total == batch);
  });
}

CheckOutcome distributed_sampler_property(const PropertyRun& run) {
  return check_property(run, [] {
    const auto len = *rc::gen::inRange<std::int64_t>(1, 2001);
    DistributedSamplerOptions o;
    o.num_replicas = *rc::gen::inRange(1, 65);
    o.shuffle = *rc::gen::arbitrary<bool>();
    o.seed = *rc::gen::inRange<std::uint64_t>(0, 1000);
    o.epoch = *rc::gen::inRange<std::int64_t>(0, 5);
    o.drop_last = *rc::gen::arbitrary<bool>();
    const std::int64_t n = o.num_replicas;
    const std::int64_t per_rank = o.drop_last ? len / n : (len + n - 1) / n;
    std::vector<int> seen(static_cast<size_t>(len), 0);
    std::vector<std::int64_t> first_of_rank;
    for (int r = 0; r < o.num_replicas; ++r) {
      const auto idx = distributed_sampler_indices(len, r, o);
      // Invariant: every rank gets the same count, ceil(len/N) (padded) or floor(len/N)
      // (drop_last), all valid dataset indices.
      RC_ASSERT(static_cast<std::int64_t>(idx.size()) == per_rank);
      for (size_t i = 0; i < idx.size(); ++i) {
        RC_ASSERT(idx[i] >= 0 && idx[i] < len);
        ++seen[static_cast<size_t>(idx[i])];
        // Invariant (no shuffle): rank r's i-th sample is position r + i*N of the list
        // 0..len-1 padded by repeating its head.
        if (!o.shuffle) RC_ASSERT(idx[i] == (r + static_cast<std::int64_t>(i) * n) % len);
      }
    }
    // Invariant: padding covers every sample at least once and repeats none more than
    // the padding needs; drop_last repeats none.
    const std::int64_t covered = std::count_if(seen.begin(), seen.end(), [](int s) { return s > 0; });
    if (o.drop_last) {
      RC_ASSERT(covered == per_rank * n);
      RC_ASSERT(*std::max_element(seen.begin(), seen.end()) <= 1);
    } else {
      RC_ASSERT(covered == len);
      RC_ASSERT(*std::max_element(seen.begin(), seen.end()) <= (per_rank * n + len - 1) / len);
    }
  });
}

CheckOutcome collectives_property(Backend& backend, const CorrectnessOptions& options, const PropertyRun& run) {
  return check_property(run, [&backend, &options] {
    const int n = *rc::gen::inRange(1, options.devices + 1);
    const auto len = *rc::gen::inRange<std::int64_t>(0, 300);  // lengths below n included
    const int root = *rc::gen::inRange(0, n);
    const auto salt = *rc::gen::inRange<std::uint64_t>(0, 1u << 20);
    const auto planted = plant_if(options, PlantedBug::ring_step);  // the host ring checks it
    auto comms = backend.make_communicators(first_devices(n));
    // Integer values in [-2^10, 2^10]: every partial sum is exact in f32, so any
    // correct reduction order gives exactly the integer sum.
    Generator gen(salt);
    std::vector<std::vector<double>> input(static_cast<size_t>(n));
    for (auto& v : input) {
      v.resize(static_cast<size_t>(len * n));
      for (auto& e : v) e = static_cast<double>(gen.randint(2049) - 1024);
    }
    std::vector<double> all_reduced(static_cast<size_t>(len)), broadcast_got(static_cast<size_t>(len) * n);
    std::vector<std::vector<double>> reduced(static_cast<size_t>(n)), gathered(static_cast<size_t>(n)),
        scattered(static_cast<size_t>(n)), broadcasted(static_cast<size_t>(n));
    backend.parallel_for(n, [&](int r) {
      Device& d = backend.device(r);
      Communicator& comm = *comms[static_cast<size_t>(r)];
      auto host = [&](const std::vector<double>& v, std::int64_t count) {
        Tensor h = Tensor::empty(backend.host_memory(), {count}, DType::f32, MemoryCategory::workspace);
        tensor_fill_from_f64(h, std::vector<double>(v.begin(), v.begin() + count));
        return copy_to(backend, h, d, MemoryCategory::workspace);
      };
      const auto& mine = input[static_cast<size_t>(r)];
      Tensor ar = host(mine, len);
      comm.all_reduce(ar, {})->wait();
      reduced[static_cast<size_t>(r)] = read_values(backend, ar);
      Tensor in = host(mine, len);
      Tensor out = Tensor::empty(d, {len * n}, DType::f32, MemoryCategory::workspace);
      comm.all_gather(out, in, {})->wait();
      gathered[static_cast<size_t>(r)] = read_values(backend, out);
      Tensor rs_in = host(mine, len * n);
      Tensor rs_out = Tensor::empty(d, {len}, DType::f32, MemoryCategory::workspace);
      comm.reduce_scatter(rs_out, rs_in, {})->wait();
      scattered[static_cast<size_t>(r)] = read_values(backend, rs_out);
      Tensor bc = host(mine, len);
      BroadcastOptions bo;
      bo.root = root;
      comm.broadcast(bc, bo)->wait();
      broadcasted[static_cast<size_t>(r)] = read_values(backend, bc);
    });
    for (int r = 0; r < n; ++r) {
      for (std::int64_t i = 0; i < len; ++i) {
        double sum = 0, block_sum = 0;
        for (int q = 0; q < n; ++q) {
          sum += input[static_cast<size_t>(q)][static_cast<size_t>(i)];
          block_sum += input[static_cast<size_t>(q)][static_cast<size_t>(r * len + i)];
        }
        const auto ri = static_cast<size_t>(r), ii = static_cast<size_t>(i);
        // Invariant: all_reduce(sum) gives every rank the exact elementwise sum.
        if (reduced[ri][ii] != sum)
          RC_FAIL(fmt::format("all_reduce on {} ranks, {} elements: rank {} element {} is {}, the exact sum is {}", n,
                              len, r, i, reduced[ri][ii], sum));
        // Invariant: reduce_scatter gives rank r the exact sum of block r.
        if (scattered[ri][ii] != block_sum)
          RC_FAIL(fmt::format("reduce_scatter on {} ranks: rank {} element {} is {}, the exact sum is {}", n, r, i,
                              scattered[ri][ii], block_sum));
        // Invariant: broadcast gives every rank the root's values.
        if (broadcasted[ri][ii] != input[static_cast<size_t>(root)][ii])
          RC_FAIL(fmt::format("broadcast from {} on {} ranks: rank {} element {} differs", root, n, r, i));
        // Invariant: all_gather puts rank q's input at offset q * len on every rank.
        for (int q = 0; q < n; ++q)
          if (gathered[ri][static_cast<size_t>(q * len + i)] != input[static_cast<size_t>(q)][ii])
            RC_FAIL(fmt::format("all_gather on {} ranks: rank {} holds a wrong value for rank {}'s element {}", n, r,
                                q, i));
      }
    }
  });
}

CheckOutcome dp_equivalence_property(Backend& backend, const CorrectnessOptions& options, const PropertyRun& run) {
  return check_property(run, [&backend, &options] {
    const MlpCase c = *gen_mlp_case(case_bounds(64, options.devices));
    const Batch b = make_batch(backend, c);
    const Values want = reference_grads(backend, c, b);
    StrategyOptions so;
    so.kind = StrategyKind::data_parallel;
    so.device_ids = first_devices(c.devices);
    so.loss = c.loss;
    const auto planted = plant_if(options, PlantedBug::drop_chunk);
    DataParallel dp(backend, so, mlp_builder(backend, c), sgd_builder());
    dp.train_step(b.x, b.target);
    // Invariant: the loss is computed on the gathered output, so DataParallel's
    // gradient on the primary equals the single-device full-batch gradient for any
    // split, uneven ones included, within the rounding of the reordered sums.
    const std::string why = mismatch(backend, c, b, dp.module(), want);
    if (!why.empty()) RC_FAIL("DataParallel: " + why);
  });
}

CheckOutcome ddp_equivalence_property(Backend& backend, const CorrectnessOptions& options, const PropertyRun& run) {
  return check_property(run, [&backend, &options] {
    const MlpCase c = *gen_mlp_case(case_bounds(64, options.devices));
    // DDP needs a sample on every rank: torch.chunk must give `devices` chunks.
    RC_PRE(static_cast<int>(chunk_sizes(c.batch, c.devices).size()) == c.devices);
    const Batch b = make_batch(backend, c);
    const Values want = reference_grads(backend, c, b);
    const bool even = c.batch % c.devices == 0;
    StrategyOptions so;
    so.kind = StrategyKind::ddp;
    so.device_ids = first_devices(c.devices);
    so.loss = c.loss;
    so.uneven = even ? UnevenMode::pytorch : UnevenMode::weighted;
    const auto planted = plant_if(options, PlantedBug::skip_divide);
    DistributedDataParallel ddp(backend, so, mlp_builder(backend, c), sgd_builder());
    ddp.train_step(b.x, b.target);
    // Invariant: with equal local batches the average of per-rank mean gradients is
    // the full-batch gradient, on every rank; with uneven ones the weighted mode
    // restores it. Either way every rank equals one device, within the rounding of the
    // reordered sums.
    for (int r = 0; r < c.devices; ++r) {
      const std::string why = mismatch(backend, c, b, ddp.rank_module(r), want);
      if (!why.empty())
        RC_FAIL(fmt::format("DDP rank {} ({} split, {} mode): {}", r, even ? "even" : "uneven",
                            even ? "pytorch" : "weighted", why));
    }
  });
}

CheckOutcome checkpoint_property(Backend& backend, const CorrectnessOptions& options, const PropertyRun& run) {
  return check_property(run, [&backend, &options] {
    const MlpCase c = *gen_mlp_case(case_bounds(16, options.devices));
    const Batch b = make_batch(backend, c);
    StrategyOptions so;
    so.kind = StrategyKind::data_parallel;
    so.device_ids = first_devices(c.devices);
    so.loss = c.loss;
    DataParallel dp(backend, so, mlp_builder(backend, c), sgd_builder());
    dp.train_step(b.x, b.target);  // parameters now differ from the initial ones
    const auto wrapped = dp.state_dict();
    const auto plain = dp.module().named_parameters();
    // Invariant: the wrapper's state dict names every parameter `module.<name>`.
    RC_ASSERT(wrapped.size() == plain.size());
    for (size_t i = 0; i < plain.size(); ++i) RC_ASSERT(wrapped[i].first == "module." + plain[i].name);

    const std::string path =
        (std::filesystem::path(options.scratch_dir) / fmt::format("verify-checkpoint-{}-{}.safetensors", ::getpid(), c.seed)).string();
    write_safetensors_atomic(path, wrapped, &backend);
    const SafetensorsFile file = read_safetensors(path);
    std::filesystem::remove(path);
    Sequential fresh = make_mlp(c.spec, backend, backend.device(0), DType::f64, c.seed + 1);
    // Invariant: a strict load of a `module.` state dict into an unwrapped model fails,
    // listing the missing and unexpected keys ...
    bool strict_failed = false;
    try {
      load_state_dict(fresh, file, LoadOptions{}, &backend);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      strict_failed = what.find("Missing key(s)") != std::string::npos &&
                      what.find("Unexpected key(s)") != std::string::npos &&
                      what.find("\"module." + plain[0].name + "\"") != std::string::npos;
    }
    RC_ASSERT(strict_failed);
    // ... and the prefix-stripping load restores module()'s parameters bit for bit.
    LoadOptions strip;
    strip.strip_prefix = "module.";
    load_state_dict(fresh, file, strip, &backend);
    const auto loaded = fresh.named_parameters();
    for (size_t i = 0; i < plain.size(); ++i)
      RC_ASSERT(read_values(backend, loaded[i].param->value) == read_values(backend, plain[i].param->value));
  });
}

}  // namespace

std::vector<Check> correctness_checks(Backend& backend, const CorrectnessOptions& options) {
  if (options.devices < 1 || options.devices > backend.device_count())
    throw std::invalid_argument(fmt::format("--devices {}: the {} backend has {} device(s)", options.devices,
                                            backend.name(), backend.device_count()));
  if (options.cases < 1) throw std::invalid_argument(fmt::format("--cases {}: must be at least 1", options.cases));
  auto run_of = [options](const std::string& description) {
    return PropertyRun{description, options.cases, options.seed, options.reproduce};
  };
  Backend* be = &backend;
  return {
      {"correctness.split.torch_chunk", CheckKind::correctness,
       [=] { return torch_chunk_property(run_of("torch.chunk split sizes")); }},
      {"correctness.split.distributed_sampler", CheckKind::correctness,
       [=] { return distributed_sampler_property(run_of("DistributedSampler indices")); }},
      {"correctness.collectives.exact", CheckKind::correctness,
       [=] { return collectives_property(*be, options, run_of("collectives on integer-valued f32 are exact")); }},
      {"correctness.dp.gradient_equivalence", CheckKind::correctness,
       [=] {
         return dp_equivalence_property(*be, options,
                                        run_of("DataParallel gradient == single-device full-batch gradient"));
       }},
      {"correctness.ddp.gradient_equivalence", CheckKind::correctness,
       [=] { return ddp_equivalence_property(*be, options, run_of("DDP gradient == single-device full-batch gradient")); }},
      {"correctness.checkpoint.module_prefix", CheckKind::correctness,
       [=] { return checkpoint_property(*be, options, run_of("`module.` checkpoint round trip")); }},
  };
}

}  // namespace dpt::verify

// `dptwin split`: which sample indices each device gets.
//   dp : DataParallel's scatter, torch.chunk along dim 0 (contiguous; fewer chunks
//        than devices when the batch is small, and idle devices get no replica).
//   ddp: DistributedSampler over a dataset of --batch samples (strided, padded by
//        repeating its head, or truncated with --drop-last; --shuffle permutes with
//        torch.randperm seeded by seed + epoch, element for element as PyTorch).
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/parallel/split.hpp"
#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/flag_limits.hpp"

namespace dpt::cli::cmd_split {  // a namespace per command: unity batches join anonymous ones
namespace {

struct SplitFlags {
  std::int64_t batch = 0;     // --batch: global batch (dp) or dataset length (ddp)
  int devices = 0;            // --devices
  std::string strategy = "dp";
  bool shuffle = false;       // --shuffle (ddp)
  std::int64_t seed = 0;      // --seed (ddp, with --shuffle; PyTorch's default 0)
  std::int64_t epoch = 0;     // --epoch (ddp, with --shuffle; set_epoch)
  bool drop_last = false;     // --drop-last (ddp)
  bool json = false;
};

// "0-31" for a run of consecutive indices, "0, 4, 8" otherwise: exact and short.
std::string indices_text(const std::vector<std::int64_t>& v) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    parts.push_back(j > i + 1 ? fmt::format("{}-{}", v[i], v[j]) : fmt::format("{}", v[i]));
    if (j == i + 1) parts.push_back(fmt::format("{}", v[j]));
    i = j + 1;
  }
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string samples_word(std::int64_t n) { return n == 1 ? "sample" : "samples"; }

// split lists every index it assigns, so the batch and the device count are bounded
// by what a listing can hold (2^24 indices: about 400 MiB as JSON), not by memory.
constexpr std::int64_t kMaxSplitBatch = std::int64_t{1} << 24;
constexpr int kMaxSplitDevices = 65536;

int run_split(const SplitFlags& f) {
  if (f.batch < 0) throw std::invalid_argument(fmt::format("--batch must not be negative, got {}", f.batch));
  if (f.devices < 1) throw std::invalid_argument(fmt::format("--devices must be at least 1, got {}", f.devices));
  limits::require_int_in<std::int64_t>("--batch", f.batch, 0, kMaxSplitBatch, "split lists every index");
  limits::require_int_in("--devices", f.devices, 1, kMaxSplitDevices);
  if (f.seed < 0) throw std::invalid_argument(fmt::format("--seed must not be negative, got {}", f.seed));
  const bool ddp = f.strategy == "ddp";
  if (!ddp && (f.shuffle || f.drop_last || f.seed != 0 || f.epoch != 0))
    throw std::invalid_argument("--shuffle, --seed, --epoch and --drop-last apply to --strategy ddp only "
                                "(DataParallel's scatter is torch.chunk, in order)");
  if (f.epoch < 0) throw std::invalid_argument(fmt::format("--epoch must not be negative, got {}", f.epoch));

  std::vector<std::vector<std::int64_t>> per_device(static_cast<size_t>(f.devices));
  nlohmann::json doc{{"command", "split"}, {"strategy", f.strategy}, {"batch", f.batch}, {"devices", f.devices}};
  std::string header;
  if (!ddp) {
    const auto sizes = chunk_sizes(f.batch, f.devices);
    const auto offsets = chunk_offsets(sizes);
    for (size_t i = 0; i < sizes.size(); ++i)
      for (std::int64_t k = 0; k < sizes[i]; ++k) per_device[i].push_back(offsets[i] + k);
    const auto used = static_cast<int>(sizes.size());
    doc["rule"] = "torch.chunk along dim 0";
    doc["chunk_size"] = sizes.empty() ? 0 : sizes[0];
    doc["devices_used"] = f.batch == 0 ? 0 : used;
    header = fmt::format("dp: batch {} on {} device{}, torch.chunk along dim 0: chunk size {}, {} chunk(s) [{}]",
                         f.batch, f.devices, f.devices == 1 ? "" : "s", sizes.empty() ? 0 : sizes[0], sizes.size(),
                         fmt::join(sizes, ", "));
    if (f.batch > 0 && used < f.devices)
      header += used + 1 == f.devices ? fmt::format("; device {} gets nothing and no replica", used)
                                      : fmt::format("; devices {}-{} get nothing and no replica", used, f.devices - 1);
  } else {
    DistributedSamplerOptions o;
    o.num_replicas = f.devices;
    o.shuffle = f.shuffle;
    o.seed = static_cast<std::uint64_t>(f.seed);
    o.epoch = f.epoch;
    o.drop_last = f.drop_last;
    per_device = distributed_sampler_assignment(f.batch, o);
    const std::int64_t per_rank = distributed_sampler_num_samples(f.batch, o);
    const std::int64_t total = per_rank * f.devices;
    doc["rule"] = "DistributedSampler: rank r gets indices[r::N]";
    doc["shuffle"] = f.shuffle;
    doc["seed"] = f.seed;
    doc["epoch"] = f.epoch;
    doc["drop_last"] = f.drop_last;
    doc["num_samples"] = per_rank;
    doc["total_size"] = total;
    doc["padding"] = f.drop_last ? 0 : total - f.batch;
    doc["dropped"] = f.drop_last ? f.batch - total : 0;
    header = fmt::format("ddp: dataset of {} on {} rank{}, DistributedSampler(shuffle={}{}, drop_last={}): {} per rank",
                         f.batch, f.devices, f.devices == 1 ? "" : "s", f.shuffle ? "True" : "False",
                         f.shuffle ? fmt::format(", seed={}, epoch={}", f.seed, f.epoch) : "",
                         f.drop_last ? "True" : "False", per_rank);
    if (!f.drop_last && total > f.batch)
      header += fmt::format("; padded with {} repeated index(es) from the start", total - f.batch);
    if (f.drop_last && total < f.batch) header += fmt::format("; {} sample(s) dropped", f.batch - total);
  }

  if (f.json) {
    nlohmann::json list = nlohmann::json::array();
    for (int d = 0; d < f.devices; ++d)
      list.push_back({{"device", d}, {"samples", per_device[static_cast<size_t>(d)].size()},
                      {"indices", per_device[static_cast<size_t>(d)]}});
    doc["assignment"] = list;
    print_json(doc);
    return kExitOk;
  }
  std::cout << header << "\n";
  for (int d = 0; d < f.devices; ++d) {
    const auto& v = per_device[static_cast<size_t>(d)];
    std::cout << fmt::format("{} {}: {} {}{}\n", ddp ? "rank" : "device", d, v.size(),
                             samples_word(static_cast<std::int64_t>(v.size())),
                             v.empty() ? "" : " " + indices_text(v));
  }
  return kExitOk;
}

Registration reg{"split", [](CLI::App& parent) -> RunFn {
  auto flags = std::make_shared<SplitFlags>();
  CLI::App* app = parent.add_subcommand("split", "Show which sample indices each device gets (dp: torch.chunk; ddp: "
                                                 "DistributedSampler)");
  app->add_option("--batch", flags->batch, "Global batch (dp) or dataset length (ddp)")->required();
  app->add_option("--devices", flags->devices, "Devices (dp) or ranks (ddp)")->required();
  app->add_option("--strategy", flags->strategy, "dp (DataParallel scatter) or ddp (DistributedSampler)")
      ->check(CLI::IsMember({"dp", "ddp"}))
      ->capture_default_str();
  app->add_flag("--shuffle", flags->shuffle, "ddp: shuffle as DistributedSampler(shuffle=True), torch.randperm "
                                             "seeded with seed + epoch (identical to PyTorch's)");
  app->add_option("--seed", flags->seed, "ddp: the sampler's seed [0, as PyTorch]");
  app->add_option("--epoch", flags->epoch, "ddp: the epoch given to set_epoch [0]");
  app->add_flag("--drop-last", flags->drop_last, "ddp: drop the tail instead of padding by repetition");
  app->add_flag("--json", flags->json, "Print one JSON document instead of text");
  app->footer(
      "Examples:\n"
      "  dptwin split --batch 5 --devices 4                  # 2,2,1: only three devices are used\n"
      "  dptwin split --batch 10 --devices 4 --strategy ddp  # strided, padded: rank 2 gets [2, 6, 0]\n" +
      exit_codes_help());
  return [flags] { return run_split(*flags); };
}};

}  // namespace
}  // namespace dpt::cli::cmd_split

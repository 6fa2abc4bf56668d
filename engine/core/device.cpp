#include "engine/core/device.hpp"

#include <fmt/format.h>

namespace dpt {

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::parameters: return "parameters";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::optimizer_state: return "optimizer_state";
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::buckets: return "buckets";
    case MemoryCategory::gathered_outputs: return "gathered_outputs";
    case MemoryCategory::inputs: return "inputs";
    case MemoryCategory::workspace: return "workspace";
    case MemoryCategory::count_: break;
  }
  return "?";
}

void MemoryTracker::on_allocate(Bytes n, MemoryCategory c) {
  std::lock_guard<std::mutex> lock(mu_);
  live_ += n;
  live_by_[static_cast<int>(c)] += n;
  if (live_ > peak_) {
    peak_ = live_;
    at_peak_ = live_by_;
  }
}

void MemoryTracker::on_free(Bytes n, MemoryCategory c) {
  std::lock_guard<std::mutex> lock(mu_);
  live_ -= n;
  live_by_[static_cast<int>(c)] -= n;
}

Bytes MemoryTracker::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

Bytes MemoryTracker::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

std::array<Bytes, kMemoryCategoryCount> MemoryTracker::breakdown_at_peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return at_peak_;
}

void MemoryTracker::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = live_;
  at_peak_ = live_by_;
}

Storage::~Storage() {
  device_->raw_free(data_, size_);
  device_->memory().on_free(size_, category_);
}

std::shared_ptr<Storage> Device::allocate(Bytes n, MemoryCategory c) {
  if (n < 0) throw std::invalid_argument(fmt::format("{}: negative allocation of {} bytes", name(), n));
  if (auto cap = capacity_bytes(); cap && memory_.live_bytes() + n > *cap) {
    std::string breakdown;
    // Report what is live now, by category, so the user sees what filled the device.
    auto live = memory_.breakdown_at_peak();
    for (int i = 0; i < kMemoryCategoryCount; ++i)
      if (live[i] > 0)
        breakdown += fmt::format(" {}={:.3f} GiB", memory_category_name(static_cast<MemoryCategory>(i)),
                                 static_cast<double>(live[i]) / kGiB);
    throw OutOfMemory(fmt::format(
        "out of memory on {}: allocating {:.3f} GiB for {} with {:.3f} GiB live of {:.3f} GiB capacity;"
        " peak breakdown:{}",
        name(), static_cast<double>(n) / kGiB, memory_category_name(c),
        static_cast<double>(memory_.live_bytes()) / kGiB, static_cast<double>(*cap) / kGiB, breakdown));
  }
  void* p = raw_allocate(n);
  memory_.on_allocate(n, c);
  return std::make_shared<Storage>(this, p, n, c);
}

}  // namespace dpt

// Units carried in type names: every size, time and rate in dptwin says what it is.
#pragma once
#include <cstdint>

namespace dpt {

using Bytes = std::int64_t;            // a size in bytes (never elements)
using Elements = std::int64_t;         // a count of tensor elements (never bytes)
using Seconds = double;                // a duration or a point in time, in seconds
using BytesPerSecond = double;         // a bandwidth in bytes per second (1 GB/s = 1e9)
using FlopsPerSecond = double;         // a compute rate in floating-point operations per second

constexpr Bytes kKiB = 1024;
constexpr Bytes kMiB = 1024 * kKiB;
constexpr Bytes kGiB = 1024 * kMiB;

}  // namespace dpt

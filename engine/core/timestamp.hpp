// Wall-clock time stamps for what dptwin writes (bench results, verify runs, report
// assumptions): one format everywhere, ISO 8601 in UTC to the second.
#pragma once
#include <string>

namespace dpt {

// Now, as "2026-12-03T15:50:10Z".
std::string utc_timestamp_now();

}  // namespace dpt

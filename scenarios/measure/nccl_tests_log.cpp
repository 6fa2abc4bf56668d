#include "engine/io/input_file.hpp"
#include "scenarios/measure/nccl_tests_log.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {
namespace {
// A line quoted in an error, as text: bytes outside printable ASCII as \xNN (a binary file's
// first line printed a NUL and ended the message there), at most `n` characters.
std::string printable_excerpt(const std::string& s, size_t n) {
  std::string out;
  for (unsigned char c : s.substr(0, n))
    out += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  return s.size() > n ? out + "..." : out;
}


std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Where a message points: "all_reduce.log:12".
std::string at(const std::string& where, int line) { return fmt::format("{}:{}", where, line); }

std::int64_t parse_int(const std::string& tok, const std::string& where, int line, const std::string& column) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec != std::errc{} || p != tok.data() + tok.size())
    throw std::invalid_argument(
        fmt::format("{}: column '{}' holds '{}', which is not an integer", at(where, line), column, tok));
  return v;
}

// An integer in [lo, hi], else an error naming the value, its place and the range.
std::int64_t parse_int_in(const std::string& tok, const std::string& where, int line, const std::string& column,
                          std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = parse_int(tok, where, line, column);
  if (v < lo || v > hi)
    throw std::invalid_argument(
        fmt::format("{}: '{}' is {}, outside {}..{}", at(where, line), column, v, lo, hi));
  return v;
}

double parse_double(const std::string& tok, const std::string& where, int line, const std::string& column) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(tok.c_str(), &end);
  if (tok.empty() || end != tok.c_str() + tok.size() || errno == ERANGE || !std::isfinite(v))
    throw std::invalid_argument(
        fmt::format("{}: column '{}' holds '{}', which is not a number", at(where, line), column, tok));
  return v;
}

double parse_nonnegative(const std::string& tok, const std::string& where, int line, const std::string& column) {
  const double v = parse_double(tok, where, line, column);
  if (v < 0)
    throw std::invalid_argument(fmt::format("{}: column '{}' holds {}, which is negative", at(where, line), column, v));
  return v;
}

// Column names across nccl-tests versions, mapped to one role each.
enum class Role { size, count, type, redop, root, time, algbw, busbw, wrong, error, ignored };

Role role_of(const std::string& name) {
  static const std::map<std::string, Role> roles = {
      {"size", Role::size},   {"bytes", Role::size},     {"count", Role::count}, {"N", Role::count},
      {"type", Role::type},   {"redop", Role::redop},    {"op", Role::redop},    {"root", Role::root},
      {"time", Role::time},   {"cputime", Role::time},   {"algbw", Role::algbw}, {"busbw", Role::busbw},
      {"#wrong", Role::wrong}, {"error", Role::error},   {"res", Role::error}};
  const auto it = roles.find(name);
  return it == roles.end() ? Role::ignored : it->second;
}

struct Header {
  int line = 0;
  std::vector<std::string> names;
  std::vector<Role> roles;
  bool has_timestamp = false;  // the -R layout appends "date time" (two fields) to each row
  std::size_t first_time = 0;  // index of the first timing group (out-of-place)
  std::size_t group_width = 0; // columns of that group, for logs that print only in-place
};

// One "time algbw busbw #wrong ..." group starting at column `first` in `tokens`.
NcclTestsTiming parse_timing(const Header& h, const std::vector<std::string>& tokens, std::size_t header_first,
                             std::size_t token_first, std::size_t width, const std::string& where, int line) {
  NcclTestsTiming t;
  for (std::size_t k = 0; k < width; ++k) {
    const std::string& name = h.names[header_first + k];
    const std::string& tok = tokens[token_first + k];
    switch (h.roles[header_first + k]) {
      case Role::time: t.time_s = parse_nonnegative(tok, where, line, name) * 1e-6; break;
      case Role::algbw: t.algbw_Bps = parse_nonnegative(tok, where, line, name) * 1e9; break;
      case Role::busbw: t.busbw_Bps = parse_nonnegative(tok, where, line, name) * 1e9; break;
      case Role::wrong:
        // "%6g" of a count: "0", "12", "1e+06"; "N/A" when validation was off (-c 0).
        if (tok != "N/A") {
          // A count beyond 2^53 is no count nccl-tests prints; refused before the cast,
          // which would be undefined past int64's range.
          const double w = parse_nonnegative(tok, where, line, name);
          if (w > 9007199254740992.0)
            throw std::invalid_argument(fmt::format("{}: column '{}' holds {}, which is not an error count",
                                                    at(where, line), name, tok));
          t.wrong = static_cast<std::int64_t>(w);
        }
        break;
      case Role::error:
        // Old logs print the largest numerical error instead of a count: any nonzero
        // error means wrong results, which is what `wrong` records.
        if (tok != "N/A") t.wrong = parse_nonnegative(tok, where, line, name) > 0 ? 1 : 0;
        break;
      default: break;
    }
  }
  return t;
}

Header parse_header(const std::vector<std::string>& names, int line, const std::string& where) {
  Header h;
  h.line = line;
  h.names = names;
  if (!h.names.empty() && h.names.back() == "timestamp") {
    h.has_timestamp = true;
    h.names.pop_back();
  }
  std::vector<std::size_t> times;
  for (std::size_t i = 0; i < h.names.size(); ++i) {
    h.roles.push_back(role_of(h.names[i]));
    if (h.roles.back() == Role::time) times.push_back(i);
  }
  const auto has = [&](Role r) { return std::find(h.roles.begin(), h.roles.end(), r) != h.roles.end(); };
  if (times.empty() || !has(Role::busbw) || !has(Role::algbw) || !has(Role::count) || !has(Role::type))
    throw std::invalid_argument(fmt::format(
        "{}: the column header lacks one of size, count, type, time, algbw, busbw: not an nccl-tests table",
        at(where, line)));
  h.first_time = times[0];
  h.group_width = (times.size() > 1 ? times[1] : h.names.size()) - times[0];
  return h;
}

NcclTestsRow parse_row(const Header& h, const std::vector<std::string>& raw_tokens, const std::string& where,
                       int line) {
  std::vector<std::string> tokens = raw_tokens;
  if (h.has_timestamp && tokens.size() >= 2) tokens.resize(tokens.size() - 2);
  const std::size_t full = h.names.size();
  const bool in_place_only = tokens.size() + h.group_width == full && h.group_width < full - h.first_time;
  if (tokens.size() != full && !in_place_only)
    throw std::invalid_argument(fmt::format("{}: a result row with {} fields, but the column header (line {}) has {}",
                                            at(where, line), tokens.size(), h.line, full));
  NcclTestsRow row;
  row.line = line;
  for (std::size_t i = 0; i < h.first_time; ++i) {
    const std::string& name = h.names[i];
    switch (h.roles[i]) {
      case Role::size: row.size_bytes = parse_int(tokens[i], where, line, name); break;
      case Role::count: row.count = parse_int(tokens[i], where, line, name); break;
      case Role::type: row.type = tokens[i]; break;
      case Role::redop: row.redop = tokens[i]; break;
      case Role::root: row.root = static_cast<int>(parse_int(tokens[i], where, line, name)); break;
      default: break;
    }
  }
  if (row.size_bytes < 0 || row.count < 0)
    throw std::invalid_argument(fmt::format("{}: negative size or count", at(where, line)));
  if (in_place_only) {
    row.in_place = parse_timing(h, tokens, h.first_time + h.group_width, h.first_time, full - h.first_time -
                                h.group_width, where, line);
  } else {
    row.out_of_place = parse_timing(h, tokens, h.first_time, h.first_time, h.group_width, where, line);
    if (full > h.first_time + h.group_width)
      row.in_place = parse_timing(h, tokens, h.first_time + h.group_width, h.first_time + h.group_width,
                                  full - h.first_time - h.group_width, where, line);
  }
  return row;
}

Bytes type_size_bytes(const std::string& type) {
  static const std::map<std::string, Bytes> sizes = {
      {"int8", 1},    {"uint8", 1},  {"char", 1},    {"f8e4m3", 1},   {"f8e5m2", 1},  {"half", 2},
      {"bfloat16", 2}, {"int32", 4}, {"uint32", 4},  {"int", 4},      {"float", 4},   {"int64", 8},
      {"uint64", 8},  {"double", 8}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

// "./build/all_reduce_perf" or "all_reduce_perf_mpi" -> "all_reduce".
std::string collective_of_program(std::string program) {
  const auto slash = program.find_last_of('/');
  if (slash != std::string::npos) program = program.substr(slash + 1);
  const auto perf = program.find("_perf");
  return perf == std::string::npos ? program : program.substr(0, perf);
}

}  // namespace

const NcclTestsTiming& NcclTestsLog::timing(const NcclTestsRow& row) const {
  return row.out_of_place ? *row.out_of_place : *row.in_place;
}

double nccl_busbw_factor(const std::string& collective, int ranks) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("busbw factor: {} ranks", ranks));
  const double n = ranks;
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter" || collective == "alltoall" ||
      collective == "gather" || collective == "scatter")
    return (n - 1) / n;
  if (collective == "broadcast" || collective == "reduce" || collective == "sendrecv") return 1.0;
  throw std::invalid_argument("unknown collective '" + collective +
                              "' (known: all_reduce, all_gather, reduce_scatter, alltoall, gather, scatter, "
                              "broadcast, reduce, sendrecv)");
}

namespace {

// Which collective: the log's own line, else the caller's, else what the rows imply.
void resolve_collective(NcclTestsLog& log, const std::optional<std::string>& collective_hint) {
  const std::string& where = log.where;
  const std::string from_log = log.program.empty() ? std::string() : collective_of_program(log.program);
  if (!from_log.empty() && collective_hint && *collective_hint != from_log)
    throw std::invalid_argument(fmt::format("{}: the log measured {} ('{}'), not {}", where, from_log, log.program,
                                            *collective_hint));
  log.collective = !from_log.empty() ? from_log : collective_hint.value_or("");
  const NcclTestsRow& first = log.rows.front();
  const Bytes type_bytes = type_size_bytes(first.type);
  if (log.collective.empty()) {
    // all_reduce is the only rooted-nothing, reducing collective whose size equals count * type size.
    if (!first.redop.empty() && first.redop != "none" && (!first.root || *first.root == -1) && type_bytes > 0 &&
        first.size_bytes == first.count * type_bytes)
      log.collective = "all_reduce";
    else
      throw std::invalid_argument(fmt::format(
          "{}: the log does not say which collective it measured (no '# Collective test starting' line) and its "
          "rows do not identify one: name it (--op all_gather, ...)",
          where));
  }
  nccl_busbw_factor(log.collective, 1);  // rejects an unknown collective name
}

// How many ranks: the device list, else nThread * nGpus, else the size/count ratio of gathers.
void resolve_ranks(NcclTestsLog& log, const std::map<int, std::string>& rank_devices, int per_process_ranks) {
  const std::string& where = log.where;
  const NcclTestsRow& first = log.rows.front();
  const Bytes type_bytes = type_size_bytes(first.type);
  if (!rank_devices.empty()) {
    log.ranks = rank_devices.rbegin()->first + 1;
    for (const auto& [rank, name] : rank_devices) log.device_names.push_back(name);
  } else if (per_process_ranks > 0) {
    log.ranks = per_process_ranks;
  } else if ((log.collective == "all_gather" || log.collective == "reduce_scatter") && type_bytes > 0 &&
             first.count > 0) {
    log.ranks = static_cast<int>(std::min<std::int64_t>(first.size_bytes / type_bytes / first.count, 1 << 24));
  }
  if (log.ranks < 1)
    throw std::invalid_argument(
        fmt::format("{}: the log does not say how many ranks ran (no '# Using devices' list, no nThread/nGpus line)",
                    where));
}

// busbw = algbw * factor(collective, ranks): a mismatch means the log was edited,
// or the collective or rank count above is wrong. Bandwidths print with two
// decimals, so only rows with algbw >= 1 GB/s are precise enough to compare.
void check_busbw_factor(const NcclTestsLog& log) {
  const std::string& where = log.where;
  const double factor = nccl_busbw_factor(log.collective, log.ranks);
  for (const auto& row : log.rows) {
    for (const auto* t : {row.out_of_place ? &*row.out_of_place : nullptr, row.in_place ? &*row.in_place : nullptr}) {
      if (t == nullptr || t->algbw_Bps < 1e9) continue;
      const double ratio = t->busbw_Bps / t->algbw_Bps;
      if (std::abs(ratio - factor) > 0.02 * std::max(factor, 0.5))
        throw std::invalid_argument(fmt::format(
            "{}: busbw / algbw = {:.3f}, but {} on {} ranks has busbw = algbw x {:.3f}: the log's collective or "
            "rank count is not what its header says",
            at(where, row.line), ratio, log.collective, log.ranks, factor));
    }
  }
}

// A line without the task label a launcher puts before each line of output: srun --label
// ("0: ", task number and colon) or Open MPI's mpirun --tag-output ("[1,0]<stdout>:"). The
// label of the task that printed the table is the same on every line, so dropping it
// leaves nccl-tests' own text.
std::string without_task_label(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i > 0 && i < s.size() && s[i] == ':') return trim(s.substr(i + 1));
  if (!s.empty() && s[0] == '[') {
    const auto close = s.find("]<std");
    const auto colon = close == std::string::npos ? close : s.find(">:", close);
    if (colon != std::string::npos) return trim(s.substr(colon + 2));
  }
  return s;
}

}  // namespace

NcclTestsLog parse_nccl_tests_log(std::istream& in, const std::string& where,
                                  const std::optional<std::string>& collective_hint) {
  NcclTestsLog log;
  log.where = where;
  std::optional<Header> header;
  std::map<int, std::string> rank_devices;  // rank -> device name
  std::set<std::string> hosts;
  int per_process_ranks = 0;                // nThread * nGpus
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    const std::string s = without_task_label(trim(text));
    if (s.empty()) continue;
    if (s[0] != '#') {
      // NCCL's own debug output (NCCL_DEBUG=INFO/WARN) is interleaved in many logs, with its
      // version line (NCCL_DEBUG=VERSION and up); Slurm's own messages ("srun: error: ...")
      // follow a task's output.
      if (s.find(" NCCL INFO ") != std::string::npos || s.find(" NCCL TRACE ") != std::string::npos ||
          starts_with(s, "NCCL version ") || starts_with(s, "srun: ") || starts_with(s, "slurmstepd: "))
        continue;
      if (s.find(" NCCL WARN ") != std::string::npos) {
        log.nccl_warnings.push_back(at(where, line) + ": " + s);
        continue;
      }
      if (!header)
        throw std::invalid_argument(fmt::format(
            "{}: '{}' is not a comment and comes before the column header ('#  size  count  type ...'): "
            "not an nccl-tests log, or its header was cut off",
            at(where, line), printable_excerpt(s, 60)));
      log.rows.push_back(parse_row(*header, split_ws(s), where, line));
      continue;
    }
    const std::string c = trim(s.substr(1));
    const auto tokens = split_ws(c);
    if (tokens.empty()) continue;
    if (starts_with(c, "Collective test starting:")) {
      log.program = trim(c.substr(std::string("Collective test starting:").size()));
    } else if (tokens[0] == "nThread" && tokens.size() >= 4 && tokens[2] == "nGpus") {
      // nccl-tests runs at most a few thousand threads of a few GPUs per process: bounded so
      // that their product fits an int.
      per_process_ranks = static_cast<int>(parse_int_in(tokens[1], where, line, "nThread", 1, 1 << 16) *
                                           parse_int_in(tokens[3], where, line, "nGpus", 1, 1 << 10));
      // -g: one thread launches each call on its G GPUs, one after another (its launches
      // show in small sizes' times; calibrate simulates them as bench -g does).
      log.gpus_per_thread = static_cast<int>(parse_int_in(tokens[3], where, line, "nGpus", 1, 1 << 10));
      for (size_t i = 1; i + 1 < tokens.size(); ++i)  // "warmup iters: 5 iters: 20 agg iters: 1"
        if (tokens[i] == "iters:" && tokens[i - 1] != "warmup" && tokens[i - 1] != "agg")
          log.iters = static_cast<int>(parse_int_in(tokens[i + 1], where, line, "iters", 1, 1 << 20));
    } else if (tokens[0] == "Rank" && tokens.size() >= 2) {
      const int rank = static_cast<int>(parse_int_in(tokens[1], where, line, "Rank", 0, 1 << 24));
      const auto on = std::find(tokens.begin(), tokens.end(), "on");
      if (on != tokens.end() && on + 1 != tokens.end()) hosts.insert(*(on + 1));
      const auto bracket = c.find(']');
      rank_devices[rank] = bracket == std::string::npos ? std::string() : trim(c.substr(bracket + 1));
    } else if ((tokens[0] == "size" || tokens[0] == "bytes") &&
               std::find(tokens.begin(), tokens.end(), "busbw") != tokens.end()) {
      if (header && !log.rows.empty())
        throw std::invalid_argument(fmt::format(
            "{}: a second results table (the first began at line {}): split the log, one test per file",
            at(where, line), header->line));
      header = parse_header(tokens, line, where);
    } else if (starts_with(c, "Out of bounds values")) {
      const auto colon = c.find(':');
      const auto v = split_ws(c.substr(colon + 1));
      if (colon == std::string::npos || v.empty())
        throw std::invalid_argument(fmt::format("{}: 'Out of bounds values' without a count", at(where, line)));
      log.out_of_bounds = static_cast<int>(parse_int(v[0], where, line, "Out of bounds values"));
    } else if (starts_with(c, "Avg bus bandwidth")) {
      const auto colon = c.find(':');
      const auto v = split_ws(c.substr(colon + 1));
      if (colon == std::string::npos || v.empty())
        throw std::invalid_argument(fmt::format("{}: 'Avg bus bandwidth' without a value", at(where, line)));
      log.avg_busbw_GBps = parse_nonnegative(v[0], where, line, "Avg bus bandwidth");
    }
  }
  if (!header)
    throw std::invalid_argument(fmt::format(
        "{}: no result table (no '#  size  count  type ... busbw' header line in {} lines): not an nccl-tests log",
        where, line));
  if (log.rows.empty())
    throw std::invalid_argument(fmt::format(
        "{}: the table header at line {} is followed by no result rows (did the test fail before its first size?)",
        where, header->line));

  resolve_collective(log, collective_hint);
  resolve_ranks(log, rank_devices, per_process_ranks);
  log.hosts.assign(hosts.begin(), hosts.end());
  check_busbw_factor(log);
  return log;
}

NcclTestsLog read_nccl_tests_log(const std::string& path, const std::optional<std::string>& collective_hint) {
  require_regular_input(path, "nccl-tests log '" + path + "'");
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot open nccl-tests log '" + path + "'");
  return parse_nccl_tests_log(in, path, collective_hint);
}

}  // namespace dpt

// fault_spec.cc: see fault_spec.h.
#include "plugins/faults/fault_spec.h"

#include <cerrno>
#include <cstdlib>

namespace syncline::plugin::faults {
namespace {

constexpr char kSyntax[] =
    "expected e.g. delay:rank=1,op=5,ms=2000;kill:rank=2,op=7;close:rank=0,op=3;"
    "fail_init:rank=1 (rank may be *, and any fault may add comm=ID and restart=N)";

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(
        Trim(s.substr(start, at == std::string::npos ? std::string::npos : at - start)));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

bool ParseEntry(const std::string& entry, Fault* fault, std::string* why) {
  const size_t colon = entry.find(':');
  const std::string kind = Trim(entry.substr(0, colon));
  if (kind == "delay") {
    fault->kind = FaultKind::kDelay;
  } else if (kind == "kill") {
    fault->kind = FaultKind::kKill;
  } else if (kind == "close") {
    fault->kind = FaultKind::kClose;
  } else if (kind == "fail_init") {
    fault->kind = FaultKind::kFailInit;
  } else {
    *why = "unknown fault '" + kind + "' (known: delay, kill, close, fail_init)";
    return false;
  }
  bool has_rank = false, has_op = false, has_ms = false;
  if (colon != std::string::npos) {
    for (const std::string& kv : Split(entry.substr(colon + 1), ',')) {
      const size_t eq = kv.find('=');
      const std::string key = Trim(kv.substr(0, eq));
      const std::string value = eq == std::string::npos ? "" : Trim(kv.substr(eq + 1));
      int64_t v = 0;
      if (key == "rank" && value == "*") {
        fault->rank = -1;
        has_rank = true;
        continue;
      }
      if (!ParseInt(value, &v)) {
        *why = "'" + kv + "' needs a non-negative integer value";
        return false;
      }
      if (key == "rank") {
        fault->rank = static_cast<int>(v);
        has_rank = true;
      } else if (key == "op") {
        fault->op = static_cast<uint64_t>(v);
        has_op = true;
      } else if (key == "ms") {
        fault->ms = v;
        has_ms = true;
      } else if (key == "comm") {
        fault->comm = v;
      } else if (key == "restart") {
        fault->restart = v;
      } else {
        *why = "unknown key '" + key + "' (known: rank, op, ms, comm, restart)";
        return false;
      }
    }
  }
  if (!has_rank) {
    *why = "missing rank=";
  } else if (fault->kind != FaultKind::kFailInit && (!has_op || fault->op == 0)) {
    *why = "missing op= (the op's sequence number, from 1)";
  } else if (fault->kind == FaultKind::kDelay && !has_ms) {
    *why = "missing ms=";
  }
  return why->empty();
}

}  // namespace

bool ParseFaults(const std::string& spec, std::vector<Fault>* faults,
                 std::string* error) {
  faults->clear();
  for (const std::string& entry : Split(spec, ';')) {
    if (entry.empty()) continue;
    Fault fault;
    fault.text = entry;
    std::string why;
    if (!ParseEntry(entry, &fault, &why)) {
      *error = "SYNCLINE_FAULT entry '" + entry + "': " + why + "; " + kSyntax;
      return false;
    }
    faults->push_back(fault);
  }
  return true;
}

bool Applies(const Fault& fault, int rank, uint64_t comm_id) {
  if (fault.restart >= 0) {
    const char* env = std::getenv("SYNCLINE_RESTART_COUNT");
    const int64_t generation = env != nullptr ? std::atoll(env) : 0;
    if (generation != fault.restart) return false;
  }
  return (fault.rank < 0 || fault.rank == rank) &&
         (fault.comm < 0 || static_cast<uint64_t>(fault.comm) == comm_id);
}

}  // namespace syncline::plugin::faults

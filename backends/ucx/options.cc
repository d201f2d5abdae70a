#include "backends/ucx/options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {
namespace {

// One row per switch point: its name, where it goes and what it means. The
// error for an unknown key prints this table and the other keys.
struct SizeOption {
  const char* name;
  std::optional<size_t> Options::*field;
  const char* doc;
};
constexpr SizeOption kSizeOptions[] = {
    {"allreduce_small_max", &Options::allreduce_small_max,
     "bytes up to which allreduce uses recursive doubling (above: ring)"},
    {"broadcast_small_max", &Options::broadcast_small_max,
     "bytes up to which broadcast uses a binomial tree (above: pipelined chain)"},
    {"reduce_small_max", &Options::reduce_small_max,
     "bytes up to which reduce uses a binomial tree (above: pipelined chain)"},
    {"allgather_small_max", &Options::allgather_small_max,
     "block bytes up to which allgather uses Bruck (above: ring)"},
    {"reduce_scatter_small_max", &Options::reduce_scatter_small_max,
     "block bytes up to which reduce_scatter uses recursive doubling (above: ring)"},
};

bool ParseNumber(std::string_view text, long long* value) {
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  *value = std::strtoll(copy.c_str(), &end, 10);
  if (errno != 0 || end == copy.c_str()) return false;
  std::string_view suffix(end);
  if (suffix == "k" || suffix == "K") {
    *value <<= 10;
  } else if (suffix == "m" || suffix == "M") {
    *value <<= 20;
  } else if (suffix == "g" || suffix == "G") {
    *value <<= 30;
  } else if (!suffix.empty()) {
    return false;
  }
  return true;
}

std::string KnownKeys() {
  std::string keys;
  for (const auto& option : kSizeOptions) {
    keys += std::string("\n  ") + option.name + ": " + option.doc +
            " (default: by world size)";
  }
  keys +=
      "\n  chunk_bytes: segment size of the pipelined algorithms"
      "\n  busy_poll_us: microseconds a waiter polls before sleeping on the event fd"
      "\n  async_progress_delay_us: microseconds before the progress thread drives an "
      "op nobody waits for"
      "\n  peer_error_mode: auto | peer | none (UCP error handling of endpoints)"
      "\n  tag_spaces: tag spaces a split family may use, 2..2048 (past them, Split "
      "builds a fresh worker)";
  return keys;
}

bool SetOption(std::string_view key, std::string_view value, Options* options,
               std::string* error) {
  long long number = 0;
  auto bytes = [&]() {
    if (ParseNumber(value, &number) && number >= 0) return true;
    *error = std::string(key) + " must be a byte count >= 0 (e.g. 65536, 64k, 4m or 1g)";
    return false;
  };
  for (const auto& option : kSizeOptions) {
    if (key != option.name) continue;
    if (!bytes()) return false;
    options->*option.field = static_cast<size_t>(number);
    return true;
  }
  if (key == "chunk_bytes") {
    if (!bytes()) return false;
    if (number < 64) {
      *error = "chunk_bytes must be at least 64";
      return false;
    }
    options->chunk_bytes = static_cast<size_t>(number);
    return true;
  }
  if (key == "busy_poll_us" || key == "async_progress_delay_us") {
    if (!ParseNumber(value, &number) || number < 0) {
      *error = std::string(key) + " must be a number of microseconds >= 0";
      return false;
    }
    (key == "busy_poll_us" ? options->busy_poll_us : options->async_progress_delay_us) =
        number;
    return true;
  }
  if (key == "tag_spaces") {
    if (!ParseNumber(value, &number) || number < 2 || number > kTagSpaces) {
      *error = "tag_spaces must be a number from 2 to " + std::to_string(kTagSpaces);
      return false;
    }
    options->tag_spaces = number;
    return true;
  }
  if (key == "peer_error_mode") {
    if (value == "auto") {
      options->peer_error_mode = PeerErrorMode::kAuto;
    } else if (value == "peer") {
      options->peer_error_mode = PeerErrorMode::kPeer;
    } else if (value == "none") {
      options->peer_error_mode = PeerErrorMode::kNone;
    } else {
      *error = "peer_error_mode must be auto, peer or none";
      return false;
    }
    return true;
  }
  *error = "unknown option '" + std::string(key) + "'; known options:" + KnownKeys();
  return false;
}

}  // namespace

bool ParseOptions(const char* text, Options* options, std::string* error) {
  if (text == nullptr) return true;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t end = rest.find(';');
    std::string_view item = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      *error = "option '" + std::string(item) + "' is not key=value";
      return false;
    }
    if (!SetOption(item.substr(0, eq), item.substr(eq + 1), options, error)) {
      return false;
    }
  }
  return true;
}

}  // namespace syncline::ucx_backend

// rank_verdict.cc: one outcome that every rank reads (see rank_verdict.h).
#include "rank_verdict.h"

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "syncline/status.h"

namespace syncline::internal {
namespace {

// How long a rank that timed out waits for another rank's scan of who is
// missing before it scans itself (the scan takes milliseconds; the bound is
// for a scanner that died).
constexpr absl::Duration kScanGrace = absl::Seconds(10);

std::string UniqueToken() {
  std::random_device rd;
  return absl::StrCat(rd(), ".", rd());
}

}  // namespace

std::string EncodeVerdict(const absl::Status& status) {
  return absl::StrCat(static_cast<int>(status.code()), ":", status.message());
}

absl::Status DecodeVerdict(absl::string_view text) {
  size_t colon = text.find(':');
  int code = -1;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(text.substr(0, colon), &code) || code < 0 ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrCat(
        "the store holds an unreadable verdict '", text.substr(0, 200),
        "'; is a different Syncline version using the same MASTER_ADDR:MASTER_PORT?"));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), text.substr(colon + 1));
}

std::string RankVerdict::Key(absl::string_view name) const {
  return absl::StrCat(scope_, "/", name);
}

absl::StatusOr<int64_t> RankVerdict::Arrive(int64_t ranks) {
  return store_.Add(Key("arrived"), ranks);
}

absl::StatusOr<absl::Status> RankVerdict::Publish(const absl::Status& verdict) {
  const std::string mine = EncodeVerdict(verdict);
  SL_ASSIGN_OR_RETURN(std::string standing, store_.CompareSet(Key("verdict"), "", mine));
  if (standing == mine) SL_RETURN_IF_ERROR(Post(kVerdictEvent).status());
  return DecodeVerdict(standing);
}

absl::StatusOr<int64_t> RankVerdict::Post(absl::string_view event) {
  SL_ASSIGN_OR_RETURN(int64_t k, store_.Add(Key("events"), 1));
  SL_RETURN_IF_ERROR(store_.Set(Key(absl::StrCat("event/", k)), event));
  return k;
}

absl::StatusOr<std::string> RankVerdict::Event(int64_t k, absl::Time deadline) {
  return store_.Get(Key(absl::StrCat("event/", k)),
                    std::max(deadline - absl::Now(), absl::ZeroDuration()));
}

absl::StatusOr<std::vector<std::string>> RankVerdict::Events(int limit, int64_t* total) {
  SL_ASSIGN_OR_RETURN(*total, store_.Add(Key("events"), 0));
  std::vector<std::string> events;
  for (int64_t k = 1; k <= *total && static_cast<int>(events.size()) < limit; ++k) {
    // Posted means counted; the Set follows within a request.
    absl::StatusOr<std::string> event = Event(k, absl::Now() + absl::Seconds(1));
    if (!event.ok()) continue;
    if (!absl::StartsWith(*event, kVerdictEvent)) events.push_back(*std::move(event));
  }
  return events;
}

absl::StatusOr<bool> RankVerdict::Decided() {
  const std::string key = Key("verdict");
  SL_ASSIGN_OR_RETURN(std::vector<bool> present, store_.Check({&key, 1}));
  return present[0];
}

absl::StatusOr<absl::Status> RankVerdict::AwaitOrTimeOut(
    absl::Time deadline, const std::function<absl::Status()>& on_timeout) {
  absl::StatusOr<std::string> got =
      store_.Get(Key("verdict"), std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (got.ok()) return DecodeVerdict(*got);
  if (!absl::IsDeadlineExceeded(got.status())) return got.status();
  // Past the deadline: one rank names who is missing, for everyone.
  const std::string me = UniqueToken();
  SL_ASSIGN_OR_RETURN(std::string scanner, store_.CompareSet(Key("scanner"), "", me));
  if (scanner != me) {
    got = store_.Get(Key("verdict"), kScanGrace);
    if (got.ok()) return DecodeVerdict(*got);
    if (!absl::IsDeadlineExceeded(got.status())) return got.status();
  }
  return Publish(on_timeout());
}

absl::Status RankVerdict::Acknowledge(int64_t ranks) {
  SL_ASSIGN_OR_RETURN(int64_t read, store_.Add(Key("read"), ranks));
  SL_ASSIGN_OR_RETURN(int64_t arrived, store_.Add(Key("arrived"), 0));
  // The last reader lets the host go. A rank that arrives later still reads
  // the verdict, and sets this again, if the store is still there.
  if (read >= arrived) return store_.Set(Key("all_read"), "1");
  return absl::OkStatus();
}

bool RankVerdict::WaitForReaders(absl::Duration bound) {
  return store_.Get(Key("all_read"), bound).ok();
}

absl::StatusOr<std::vector<int>> MissingRanks(
    Store& store, int size, const std::function<std::string(int)>& key) {
  std::vector<int> missing;
  std::vector<std::string> keys;
  for (int first = 0; first < size; first += kScanChunk) {
    const int last = std::min(size, first + kScanChunk);
    keys.clear();
    for (int r = first; r < last; ++r) keys.push_back(key(r));
    SL_ASSIGN_OR_RETURN(std::vector<bool> present, store.Check(keys));
    for (int r = first; r < last; ++r) {
      if (!present[r - first]) missing.push_back(r);
    }
  }
  return missing;
}

}  // namespace syncline::internal

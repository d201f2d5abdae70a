// backend_agreement.cc: one verdict on the backend for every rank (see
// backend_agreement.h).
//
// Each rank publishes its choice under backend/rank/<r> and compares it with
// rank 0's. Only the ranks that differ from rank 0 list themselves
// (backend/odd/<i>), so the last arrival builds the verdict from rank 0's
// choice plus that list, without reading every rank's key.
#include "backend_agreement.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rank_ranges.h"
#include "rank_verdict.h"
#include "syncline/status.h"

namespace syncline::internal {
namespace {

constexpr absl::string_view kErrorPrefix = "error:";

std::string RankKey(int rank) { return absl::StrCat("backend/rank/", rank); }

bool IsError(absl::string_view value) { return absl::StartsWith(value, kErrorPrefix); }

// From rank 0's value and the ranks whose value differs from it. The outer
// status is the store's, the inner one the verdict.
absl::StatusOr<absl::Status> BuildVerdict(Store& store, int size,
                                          const std::string& reference) {
  SL_ASSIGN_OR_RETURN(int64_t odd, store.Add("backend/odd", 0));
  std::map<int, std::string> differs;  // rank -> value
  for (int64_t i = 1; i <= odd; ++i) {
    SL_ASSIGN_OR_RETURN(std::string entry,
                        store.Get(absl::StrCat("backend/odd/", i), absl::Seconds(30)));
    size_t bar = entry.find('|');
    int r = -1;
    if (bar == std::string::npos || !absl::SimpleAtoi(entry.substr(0, bar), &r)) continue;
    differs[r] = entry.substr(bar + 1);
  }
  // Value -> ranks, in the order of each group's lowest rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  auto add = [&](int r, const std::string& value) {
    for (auto& [v, ranks] : groups) {
      if (v == value) {
        ranks.push_back(r);
        return;
      }
    }
    groups.push_back({value, {r}});
  };
  for (int r = 0; r < size; ++r) {
    auto it = differs.find(r);
    if (it != differs.end()) {
      add(r, it->second);
    } else if (r == 0 || !IsError(reference)) {
      add(r, reference);  // ranks that load fine need no listing under a failed rank 0
    }
  }
  std::vector<std::string> failed, chose;
  for (const auto& [value, ranks] : groups) {
    if (IsError(value)) {
      failed.push_back(absl::StrFormat(
          "%s could not load %s backend: %s", FormatRanks(ranks),
          ranks.size() == 1 ? "its" : "their", value.substr(kErrorPrefix.size())));
    } else {
      chose.push_back(absl::StrFormat("%s chose %s", FormatRanks(ranks), value));
    }
  }
  if (!failed.empty()) {
    // The load errors run over several lines: they go last.
    return absl::FailedPreconditionError(
        absl::StrCat("no common backend: ", absl::StrJoin(chose, "; "),
                     chose.empty() ? "" : "; ", absl::StrJoin(failed, "; ")));
  }
  if (chose.size() == 1) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "ranks disagree on the backend: ", absl::StrJoin(chose, "; "),
      ". Set the same SYNCLINE_BACKEND and SYNCLINE_PLUGINS (and install the same "
      "Syncline) on every rank"));
}

absl::Status TimeoutVerdict(Store& store, int rank, int size, absl::Duration waited) {
  absl::StatusOr<std::vector<int>> missing = MissingRanks(store, size, RankKey);
  std::string who =
      missing.ok()
          ? absl::StrFormat("%d of %d ranks reported; missing: %s",
                            size - missing->size(), size, FormatRanks(*missing))
          : absl::StrCat("could not list who reported: ", missing.status().message());
  return absl::DeadlineExceededError(absl::StrFormat(
      "ranks did not all report their backend within the init timeout: rank %d gave up "
      "after %s with %s. A missing rank has probably failed or stalled since the "
      "rendezvous: its log says why",
      rank, absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))), who));
}

// The agreement; the outer status is the store's, the inner one the verdict.
absl::StatusOr<absl::Status> Agree(Store& store, int rank, int size,
                                   const std::string& mine, absl::Time start,
                                   absl::Time deadline, bool hosts_store) {
  SL_RETURN_IF_ERROR(store.Set(RankKey(rank), mine));
  if (rank != 0) {
    absl::StatusOr<std::string> reference =
        store.Get(RankKey(0), std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!reference.ok() && !absl::IsDeadlineExceeded(reference.status())) {
      return reference.status();
    }
    // Under a rank 0 that failed to load, only other failures are news.
    if (reference.ok() && mine != *reference && (!IsError(*reference) || IsError(mine))) {
      SL_ASSIGN_OR_RETURN(int64_t i, store.Add("backend/odd", 1));
      SL_RETURN_IF_ERROR(
          store.Set(absl::StrCat("backend/odd/", i), absl::StrCat(rank, "|", mine)));
    }
  }
  RankVerdict verdict(store, "backend");
  SL_ASSIGN_OR_RETURN(int64_t arrived, verdict.Arrive());
  if (arrived == size) {
    SL_ASSIGN_OR_RETURN(std::string reference, store.Get(RankKey(0), absl::Seconds(30)));
    SL_ASSIGN_OR_RETURN(absl::Status built, BuildVerdict(store, size, reference));
    SL_RETURN_IF_ERROR(verdict.Publish(built).status());
  }
  SL_ASSIGN_OR_RETURN(absl::Status outcome, verdict.AwaitOrTimeOut(deadline, [&] {
    return TimeoutVerdict(store, rank, size, absl::Now() - start);
  }));
  if (outcome.ok()) return outcome;
  (void)verdict.Acknowledge();
  if (hosts_store) (void)verdict.WaitForReaders(kVerdictReadersBound);
  return outcome;
}

}  // namespace

absl::Status AgreeOnBackend(Store& store, int rank, int size,
                            const absl::StatusOr<std::string>& choice,
                            absl::Duration timeout, bool hosts_store) {
  const absl::Time start = absl::Now();
  const std::string mine =
      choice.ok() ? *choice : absl::StrCat(kErrorPrefix, choice.status().message());
  absl::StatusOr<absl::Status> outcome =
      Agree(store, rank, size, mine, start, start + timeout, hosts_store);
  if (outcome.ok()) return *outcome;
  return absl::UnavailableError(absl::StrFormat(
      "backend agreement on rank %d: lost the store after %s (%s). The store lives in "
      "rank 0 "
      "(or in syncline-run); that process has probably exited: its log says why",
      rank, absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
      outcome.status().message()));
}

}  // namespace syncline::internal

// rendezvous_check_in.cc: the check-in (see rendezvous_check_in.h).
#include "rendezvous_check_in.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rank_ranges.h"
#include "rank_verdict.h"
#include "syncline/log.h"
#include "syncline/status.h"

namespace syncline::internal {
namespace {

constexpr char kScope[] = "rdzv";
constexpr char kJobKey[] = "rdzv/job";
constexpr absl::string_view kRefusedEvent = "refused:";
constexpr int kRefusalsShown = 4;
// How often rank 0, waiting for news, checks that the news it waits for can
// still come.
constexpr absl::Duration kWatchSlice = absl::Seconds(10);

std::string RankKey(int rank) { return absl::StrCat("rdzv/rank/", rank); }

std::string Round(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

// What a rank writes when it checks in: enough to tell two jobs apart and to
// find the process again.
struct Arrival {
  int rank = 0;
  int world_size = 0;
  int64_t pid = 0;
  std::string token;  // tells apart processes that share a host and pid
  std::string host;
  std::string job_source;
  std::string job_id;  // last: it may hold any character

  static Arrival Mine(const RendezvousInfo& info) {
    char host[256] = "?";
    ::gethostname(host, sizeof(host) - 1);
    std::random_device rd;
    return {info.rank, info.world_size,    ::getpid(), absl::StrCat(rd(), ".", rd()),
            host,      info.job_id_source, info.job_id};
  }

  std::string Encode() const {
    return absl::StrCat("v1|", rank, "|", world_size, "|", pid, "|", token, "|", host,
                        "|", job_source, "|", job_id);
  }

  static std::optional<Arrival> Parse(absl::string_view text) {
    std::vector<std::string> f = absl::StrSplit(text, absl::MaxSplits('|', 7));
    Arrival a;
    if (f.size() != 8 || f[0] != "v1" || !absl::SimpleAtoi(f[1], &a.rank) ||
        !absl::SimpleAtoi(f[2], &a.world_size) || !absl::SimpleAtoi(f[3], &a.pid)) {
      return std::nullopt;
    }
    a.token = f[4];
    a.host = f[5];
    a.job_source = f[6];
    a.job_id = f[7];
    return a;
  }

  std::string Process() const { return absl::StrFormat("host %s pid %d", host, pid); }

  std::string Job() const {
    if (job_id.empty()) return "a job with no id";
    return absl::StrFormat("job '%s' (from %s)", job_id, job_source);
  }

  std::string Describe() const {
    return absl::StrFormat("rank %d of %s, WORLD_SIZE=%d, on %s", rank, Job(), world_size,
                           Process());
  }
};

// Why a process was refused: its own error, and the event the job logs.
struct Refusal {
  absl::Status status;
  std::string event;
};

Refusal RefusedByJob(const Arrival& me, const std::optional<Arrival>& job,
                     absl::string_view raw, const std::string& where) {
  if (!job) {
    return {
        absl::FailedPreconditionError(absl::StrFormat(
            "rendezvous at %s refused this process (%s): the store there holds a rank-0 "
            "record this version cannot read ('%s'). Another program, or another "
            "Syncline version, uses MASTER_ADDR:MASTER_PORT; give this job its own "
            "MASTER_PORT",
            where, me.Describe(), raw.substr(0, 200))),
        absl::StrCat(me.Describe(), ": it found an unreadable record")};
  }
  const bool other_job = job->job_id != me.job_id;
  return {
      absl::FailedPreconditionError(absl::StrFormat(
          "rendezvous at %s refused this process (%s): the store there serves %s with "
          "WORLD_SIZE=%d, whose rank 0 is %s; this process %s. Two jobs share "
          "MASTER_ADDR:MASTER_PORT (%s): give each job its own MASTER_PORT. If this is "
          "one job, start every rank with the same job id and WORLD_SIZE",
          where, me.Describe(), job->Job(), job->world_size, job->Process(),
          other_job ? "belongs to another job" : "claims another world size", where)),
      absl::StrCat(me.Describe(), other_job ? ": another job" : ": another world size")};
}

Refusal RefusedAsDuplicate(const Arrival& me, const std::optional<Arrival>& holder,
                           const std::string& where) {
  std::string held_by = holder ? holder->Process() : "a process this version cannot read";
  return {
      absl::AlreadyExistsError(absl::StrFormat(
          "rendezvous at %s: rank %d is claimed by two processes: %s holds it (it "
          "checked in first), so this process (%s) is refused. Every process of a job "
          "needs its own RANK; if the other one belongs to another job, two jobs share "
          "MASTER_ADDR:MASTER_PORT (%s): give each job its own MASTER_PORT",
          where, me.rank, held_by, me.Process(), where)),
      absl::StrCat(me.Describe(), ": rank ", me.rank, " is already held by ", held_by)};
}

// The refused process tells the job (rank 0 warns) and fails.
absl::Status Refuse(RankVerdict& verdict, const Refusal& refusal) {
  (void)verdict.Post(absl::StrCat(kRefusedEvent, refusal.event));
  return refusal.status;
}

std::string RefusedNote(RankVerdict& verdict) {
  int64_t total = 0;
  absl::StatusOr<std::vector<std::string>> events =
      verdict.Events(kRefusalsShown, &total);
  if (!events.ok() || events->empty()) return "";
  for (std::string& e : *events) e = e.substr(std::min(e.size(), kRefusedEvent.size()));
  return absl::StrFormat(
      " Refused meanwhile, as not part of this job (two jobs share "
      "MASTER_ADDR:MASTER_PORT, or ranks started with conflicting settings): %s%s.",
      absl::StrJoin(*events, "; "),
      total > kRefusalsShown ? absl::StrCat(" (", total, " events in all)") : "");
}

// Built by the one rank that scans, and published for every rank.
absl::Status TimeoutVerdict(Store& store, RankVerdict& verdict,
                            const RendezvousInfo& info, const std::string& where,
                            absl::Duration waited) {
  std::string who;
  absl::StatusOr<std::vector<int>> missing =
      MissingRanks(store, info.world_size, [](int r) { return RankKey(r); });
  if (missing.ok()) {
    std::vector<bool> absent(info.world_size, false);
    for (int r : *missing) absent[r] = true;
    std::vector<int> in;
    for (int r = 0; r < info.world_size; ++r) {
      if (!absent[r]) in.push_back(r);
    }
    who = absl::StrFormat("%d of %d ranks checked in (%s); missing: %s", in.size(),
                          info.world_size, FormatRanks(in), FormatRanks(*missing));
  } else {
    who = absl::StrCat("could not list who checked in: ", missing.status().message());
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "rendezvous at %s timed out: rank %d gave up after %s with %s. Check that every "
      "rank was started and uses the same MASTER_ADDR/MASTER_PORT.%s",
      where, info.rank, Round(waited), who, RefusedNote(verdict)));
}

// Rank 0 hears of refused processes while it waits, and warns at once.
// Returns when the verdict stands or at the deadline.
absl::Status WatchForRefusals(RankVerdict& verdict, absl::Time deadline,
                              const std::string& where) {
  for (int64_t k = 1;;) {
    absl::StatusOr<std::string> event =
        verdict.Event(k, std::min(deadline, absl::Now() + kWatchSlice));
    if (!event.ok()) {
      if (!absl::IsDeadlineExceeded(event.status())) return event.status();
      if (absl::Now() >= deadline) return absl::OkStatus();
      // A refused process may have died between counting its event and
      // writing it: do not wait on that number past a verdict or later news.
      SL_ASSIGN_OR_RETURN(bool decided, verdict.Decided());
      if (decided) return absl::OkStatus();
      int64_t total = 0;
      SL_RETURN_IF_ERROR(verdict.Events(0, &total).status());
      if (total > k) ++k;
      continue;
    }
    ++k;
    if (absl::StartsWith(*event, kVerdictEvent)) return absl::OkStatus();
    SL_LOG(
        WARN,
        "rendezvous at %s refused a process that is not part of this job: %s. Two jobs "
        "share MASTER_ADDR:MASTER_PORT (%s), or ranks were started with conflicting "
        "settings; this job goes on waiting for its own ranks",
        where, absl::string_view(*event).substr(kRefusedEvent.size()), where);
  }
}

}  // namespace

absl::Status CheckIn(Store& store, const RendezvousInfo& info, absl::Duration timeout,
                     const std::string& where, bool hosts_store) {
  if (info.rank < 0 || info.rank >= info.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous: rank %d is not in [0, %d)", info.rank, info.world_size));
  }
  const int count = info.check_in_ranks;
  if (count < 1 || count > info.world_size - info.rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous: a check-in for %d ranks from rank %d does not fit a world of %d; a "
        "node leader checks in ranks [rank, rank + count) of its own node",
        count, info.rank, info.world_size));
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  Arrival me = Arrival::Mine(info);
  const std::string mine = me.Encode();
  RankVerdict verdict(store, kScope);
  auto lost = [&](const absl::Status& status) {
    return absl::UnavailableError(absl::StrFormat(
        "rendezvous at %s: lost the store after %s (%s). The store lives in rank 0 (or "
        "in "
        "syncline-run); that process has probably exited: its log says why",
        where, Round(absl::Now() - start), status.message()));
  };

  // Rank 0's record says which job this store serves.
  absl::StatusOr<std::string> owner =
      info.rank == 0
          ? store.CompareSet(kJobKey, "", mine)
          : store.Get(kJobKey, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (owner.ok()) {
    std::optional<Arrival> job = Arrival::Parse(*owner);
    if (!job || job->job_id != me.job_id || job->world_size != me.world_size) {
      return Refuse(verdict, RefusedByJob(me, job, *owner, where));
    }
  } else if (!absl::IsDeadlineExceeded(owner.status())) {
    return lost(owner.status());
  }  // Else rank 0 has not come: check in anyway, so that the timeout names it.

  // Claim each rank this check-in covers (a node leader's: its node's).
  for (int r = info.rank; r < info.rank + count; ++r) {
    me.rank = r;
    const std::string claim = me.Encode();
    absl::StatusOr<std::string> holder = store.CompareSet(RankKey(r), "", claim);
    if (!holder.ok()) return lost(holder.status());
    if (*holder != claim) {
      return Refuse(verdict, RefusedAsDuplicate(me, Arrival::Parse(*holder), where));
    }
  }
  me.rank = info.rank;

  absl::StatusOr<int64_t> arrived = verdict.Arrive(count);
  if (!arrived.ok()) return lost(arrived.status());
  if (*arrived == info.world_size) {
    absl::StatusOr<absl::Status> published = verdict.Publish(absl::OkStatus());
    if (!published.ok()) return lost(published.status());
  }
  if (info.rank == 0) {
    absl::Status watched = WatchForRefusals(verdict, deadline, where);
    if (!watched.ok()) return lost(watched);
  }
  absl::StatusOr<absl::Status> outcome = verdict.AwaitOrTimeOut(deadline, [&] {
    return TimeoutVerdict(store, verdict, info, where, absl::Now() - start);
  });
  if (!outcome.ok()) return lost(outcome.status());
  if (outcome->ok()) return absl::OkStatus();
  // Every rank returns this same error; the store's host keeps the store
  // until they have read it.
  (void)verdict.Acknowledge(count);
  if (hosts_store) (void)verdict.WaitForReaders(kVerdictReadersBound);
  return *outcome;
}

absl::Status Abandon(Store& store, const absl::Status& reason) {
  RankVerdict verdict(store, kScope);
  return verdict.Publish(reason).status();
}

}  // namespace syncline::internal

// pitfall_checks.cc: DDP pitfall warnings (see pitfall_checks.h).
#include "pitfall_checks.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "syncline/env.h"
#include "syncline/pitfalls.h"
#include "torch_interop.h"

namespace syncline::ddp::internal {
namespace {

constexpr size_t kMaxBuckets = 100;
// Below this, one bucket is the right layout: nothing worth overlapping.
constexpr int64_t kOverlapWorthBytes = 4 << 20;

int LocalRanks() {
  for (const char* name : {"LOCAL_WORLD_SIZE", "SYNCLINE_LOCAL_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    int n = 0;
    const char* v = std::getenv(name);
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n > 0) return n;
  }
  return 1;
}

}  // namespace

void CheckConstructionPitfalls(const Communicator& comm,
                               const std::vector<BucketInfo>& buckets) {
  const int rank = comm.rank();
  CheckThreadOversubscription(rank, at::get_num_threads(), LocalRanks());
  int64_t total = 0;
  for (const BucketInfo& b : buckets) {
    total += b.numel * static_cast<int64_t>(c10::elementSize(b.dtype));
  }
  if (buckets.size() > kMaxBuckets) {
    WarnPitfall(Pitfall::kBucketCap, rank,
                absl::StrFormat("DDP built %d gradient buckets (%d bytes in all): each "
                                "bucket costs an allreduce's latency, so communication "
                                "will dominate; raise DdpOptions::bucket_cap_mb (default 25)",
                                buckets.size(), total));
  } else if (buckets.size() == 1 && total > kOverlapWorthBytes) {
    WarnPitfall(Pitfall::kBucketCap, rank,
                absl::StrFormat("DDP put all %d bytes of gradients into one bucket, so its "
                                "allreduce can only start after backward ends (no "
                                "overlap); lower DdpOptions::bucket_cap_mb and "
                                "first_bucket_mb (defaults 25 and 1)",
                                total));
  }
}

void CheckNoSyncMismatch(int rank, bool forward_synced, bool no_sync_now) {
  if (forward_synced == !no_sync_now) return;
  WarnPitfall(Pitfall::kNoSyncMismatch, rank,
              forward_synced
                  ? "a forward ran outside NoSync() but its backward runs inside it: "
                    "DDP follows the forward, so these gradients are synchronized "
                    "although you meant to accumulate them; enter NoSync() before the "
                    "forward"
                  : "a forward ran inside NoSync() but its backward runs outside it: "
                    "DDP follows the forward, so these gradients are accumulated "
                    "locally, not synchronized; leave NoSync() before the forward of "
                    "the step that should synchronize");
}

int64_t ReplicaCheckInterval() {
  auto n = EnvInt("SYNCLINE_CHECK_EVERY");
  return n.ok() && *n > 0 ? *n : 0;
}

bool CheckReplicaDrift(Communicator& comm, const std::vector<at::Tensor>& params,
                       const std::vector<std::string>& names, int64_t step,
                       absl::Duration timeout) {
  // Two checksums per parameter, as fixed-point int64 so that one allgather
  // of integers suffices: the sum and the sum of |x| (scaled by 2^20).
  std::vector<int64_t> mine;
  mine.reserve(2 * params.size());
  for (const at::Tensor& p : params) {
    at::Tensor d = p.detach().to(at::kDouble);
    mine.push_back(std::llround(d.sum().item<double>() * (1 << 20)));
    mine.push_back(std::llround(d.abs().sum().item<double>() * (1 << 20)));
  }
  std::vector<std::vector<int64_t>> all =
      AllgatherInt64(comm, mine, timeout, "replica checksum (SYNCLINE_CHECK_EVERY)");
  for (size_t i = 0; i < mine.size(); ++i) {
    std::vector<int> differ;
    for (int r = 1; r < static_cast<int>(all.size()); ++r) {
      const int64_t a = all[0][i], b = all[r][i];
      // Identical replicas give identical bits; allow rounding of the sum.
      if (std::llabs(a - b) > 1 + std::llabs(a) / 1000000) differ.push_back(r);
    }
    if (differ.empty()) continue;
    WarnPitfall(Pitfall::kReplicaDrift, comm.rank(),
                absl::StrFormat("at synced iteration %d the model replicas differ: first differing "
                                "parameter '%s' (ranks [%s] differ from rank 0). The "
                                "optimizer stepped without synchronized gradients, e.g. "
                                "after a NoSync() forward, or a parameter changed "
                                "outside the optimizer on some ranks; synchronize "
                                "gradients before every optimizer step",
                                step, names[i / 2], absl::StrJoin(differ, ",")));
    return true;
  }
  return false;
}

}  // namespace syncline::ddp::internal

#include "backends/ucx/schedule.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace syncline::ucx_backend {

ScheduleBuilder::ScheduleBuilder(const char* algorithm, sl_dtype_t dtype,
                                 sl_redop_t redop)
    : elem_(sl_dtype_size(dtype)) {
  // Room for the rounds of a small op at once (a local copy, up to three
  // exchanges): growing from one round cost a second allocation and a move
  // of every round on the 8-byte path.
  schedule_.rounds.reserve(4);
  schedule_.algorithm = algorithm;
  schedule_.dtype = dtype;
  schedule_.redop = redop;
}

uint8_t* ScheduleBuilder::AllocScratch(size_t bytes) {
  if (schedule_.scratch != nullptr) {
    std::fprintf(stderr, "syncline ucx: scratch allocated twice in %s\n",
                 schedule_.algorithm);
    std::abort();  // a builder bug, not a runtime condition
  }
  schedule_.scratch.reset(new uint8_t[bytes > 0 ? bytes : 1]);
  schedule_.scratch_bytes = bytes;
  return schedule_.scratch.get();
}

void ScheduleBuilder::NewRound() { schedule_.rounds.emplace_back(); }

Round& ScheduleBuilder::Current() {
  if (schedule_.rounds.empty()) NewRound();
  return schedule_.rounds.back();
}

namespace {

// Most rounds hold a send and a receive: room for both at once saves the
// vector's regrowth (one allocation per round and op).
std::vector<Transfer>& Transfers(Round& round) {
  if (round.transfers.capacity() == 0) round.transfers.reserve(2);
  return round.transfers;
}

}  // namespace

void ScheduleBuilder::Send(int peer, const void* data, size_t bytes, uint32_t step) {
  if (bytes == 0) return;
  Transfers(Current()).push_back({true, peer, const_cast<void*>(data), bytes, step});
}

void ScheduleBuilder::Recv(int peer, void* data, size_t bytes, uint32_t step) {
  if (bytes == 0) return;
  Transfers(Current()).push_back({false, peer, data, bytes, step});
}

void ScheduleBuilder::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  Current().actions.push_back({Action::kCopy, dst, src, nullptr, bytes});
}

void ScheduleBuilder::Reduce(void* dst, const void* a, const void* b, size_t count) {
  if (count == 0) return;
  Current().actions.push_back({Action::kReduce3, dst, a, b, count});
}

void ScheduleBuilder::Divide(void* data, size_t count) {
  if (count == 0) return;
  Current().actions.push_back({Action::kDivide, data, nullptr, nullptr, count});
}

Schedule ScheduleBuilder::Finish() {
  // Rounds that ended up empty on this rank (a tree level it sits out) cost
  // nothing to keep, but dropping them keeps the executor's loop short.
  // Compacted in place: no second vector per op.
  std::vector<Round>& rounds = schedule_.rounds;
  rounds.erase(std::remove_if(rounds.begin(), rounds.end(),
                              [](const Round& round) {
                                return round.transfers.empty() && round.actions.empty();
                              }),
               rounds.end());
  return std::move(schedule_);
}

size_t BlockCount(size_t count, int parts, int i) {
  const size_t p = static_cast<size_t>(parts);
  return count / p + (static_cast<size_t>(i) < count % p ? 1 : 0);
}

size_t BlockOffset(size_t count, int parts, int i) {
  const size_t p = static_cast<size_t>(parts), k = static_cast<size_t>(i);
  return k * (count / p) + (k < count % p ? k : count % p);
}

}  // namespace syncline::ucx_backend

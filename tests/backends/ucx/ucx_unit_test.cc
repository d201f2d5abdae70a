// Unit tests of the UCX backend's transport-free parts: the tag layout, and
// every algorithm's schedule, executed by an in-memory simulator for world
// sizes 1..9 on both sides of each switch point. The simulator delivers a
// send to the receive with the same (source, destination, step) in FIFO
// order, exactly what the UCP tag match with a full mask does, so a
// schedule whose two ends disagree about a step or a size fails here
// without a network.
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/ucx/algorithms/algorithms.h"
#include "backends/ucx/bootstrap.h"
#include "backends/ucx/schedule_cache.h"
#include "backends/ucx/split_plan.h"
#include "backends/ucx/tag.h"
#include "gtest/gtest.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::ucx_backend {
namespace {

TEST(UcxTag, RoundTripsEveryField) {
  const uint64_t comm = kTagSpaces - 1;
  const uint64_t t = CollectiveTag(comm, 1048575, 999999, 4095);
  const TagFields f = UnpackTag(t);
  EXPECT_EQ(f.comm, comm);
  EXPECT_EQ(f.source, 1048575);
  EXPECT_FALSE(f.p2p);
  EXPECT_EQ(f.seq, 999999u);
  EXPECT_EQ(f.step, 4095u);
  const TagFields p = UnpackTag(P2pTag(comm, 7, 0xffffffffu));
  EXPECT_TRUE(p.p2p);
  EXPECT_EQ(p.source, 7);
  EXPECT_EQ(p.user_tag, 0xffffffffu);
  EXPECT_EQ(p.comm, comm);
}

TEST(UcxTag, DifferentOpsSourcesAndGroupsNeverCollide) {
  std::set<uint64_t> seen;
  size_t made = 0;
  for (uint64_t bits : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{kTagSpaces} - 1}) {
    for (int source : {0, 1, 5}) {
      for (uint64_t seq : {1ull, 2ull, 3ull}) {
        for (uint32_t step : {0u, 1u, 4095u}) {
          seen.insert(CollectiveTag(bits, source, seq, step));
          ++made;
        }
      }
      for (uint32_t tag : {0u, 1u, 7u, 0xffffffffu}) {
        seen.insert(P2pTag(bits, source, tag));
        ++made;
      }
    }
  }
  EXPECT_EQ(seen.size(), made);
}

TEST(UcxTag, FieldsDoNotBleedIntoEachOther) {
  // Overflowing values are truncated to their field, never carried.
  EXPECT_EQ(UnpackTag(CollectiveTag(0, 0, 0, 4096)).step, 0u);
  EXPECT_EQ(UnpackTag(CollectiveTag(0, 0, 0, 4096)).seq, 0u);
  EXPECT_EQ(UnpackTag(CollectiveTag(0, 0, uint64_t{1} << 20, 0)).source, 0);
  EXPECT_EQ(UnpackTag(CollectiveTag(0, 1 << 20, 0, 0)).comm, 0u);
}

TEST(UcxTag, SeqWrapsAroundTheReservedZero) {
  EXPECT_EQ(TagSeq(1), 1u);
  const uint64_t period = (uint64_t{1} << kTagSeqBits) - 1;
  EXPECT_EQ(TagSeq(period), period);
  EXPECT_EQ(TagSeq(period + 1), 1u);  // never 0: that is the hello/notice space
  for (uint64_t n = 1; n < 3 * period; n += 4099) EXPECT_NE(TagSeq(n), 0u) << n;
}

TEST(UcxTag, NoticeMaskMatchesAnySourceButNothingElse) {
  const uint64_t bits = 77;
  const uint64_t want = CollectiveTag(bits, 0, 0, kTagNoticeStep);
  auto matches = [&](uint64_t tag) { return (tag & kTagAnySourceMask) == want; };
  EXPECT_TRUE(matches(CollectiveTag(bits, 0, 0, kTagNoticeStep)));
  EXPECT_TRUE(matches(CollectiveTag(bits, 123456, 0, kTagNoticeStep)));
  EXPECT_FALSE(matches(CollectiveTag(bits, 3, 0, 0)));               // hello
  EXPECT_FALSE(matches(CollectiveTag(bits, 3, 1, kTagNoticeStep)));  // a collective
  EXPECT_FALSE(matches(P2pTag(bits, 3, kTagNoticeStep)));
  EXPECT_FALSE(matches(CollectiveTag(78, 3, 0, kTagNoticeStep)));  // another group
}

// Split: every rank computes the same plan from the same allgathered table.
TEST(UcxSplitPlan, MembersFollowKeyThenParentRankAndSpacesAreFreshEverywhere) {
  // Ranks 0..5: colors 1,0,1,-1,0,1; rank 4 has used spaces up to 6 (it was
  // in nested splits the others were not in).
  const std::vector<SplitEntry> all = {{1, 5, 2}, {0, 0, 2}, {1, 5, 2},
                                       {-1, 0, 2}, {0, -1, 7}, {1, 0, 3}};
  std::set<uint32_t> spaces;
  for (int r = 0; r < 6; ++r) {
    const SplitPlan plan = PlanSplit(all, r);
    EXPECT_FALSE(plan.exhausted);
    EXPECT_EQ(plan.next_space, 9) << "7 and 8 are taken on every worker";
    if (all[r].color < 0) {
      EXPECT_TRUE(plan.members.empty());
      EXPECT_EQ(plan.rank, -1);
      continue;
    }
    if (all[r].color == 0) {
      EXPECT_EQ(plan.members, (std::vector<int>{4, 1}));  // key -1 before key 0
      EXPECT_EQ(plan.space, 7u);
    } else {
      EXPECT_EQ(plan.members, (std::vector<int>{5, 0, 2}));  // equal keys: parent rank
      EXPECT_EQ(plan.space, 8u);
    }
    EXPECT_EQ(plan.members[plan.rank], r);
    spaces.insert(plan.space);
    // Fresh on every member's worker: above what any rank has used.
    for (const SplitEntry& e : all) EXPECT_GE(plan.space, e.next_space);
  }
  EXPECT_EQ(spaces.size(), 2u) << "sibling groups share no tag space";
}

TEST(UcxSplitPlan, NestedSplitsNeverReuseASpace) {
  // A family of 4 ranks splits in halves, then each half splits again, then
  // the parent splits again: every group must get a space no member's worker
  // has used, even though the halves advanced their counters differently.
  std::vector<int64_t> next(4, 1);
  std::vector<std::set<uint32_t>> used(4, std::set<uint32_t>{0});
  auto split = [&](const std::vector<int>& parent, const std::vector<int64_t>& colors) {
    std::vector<SplitEntry> all;
    for (size_t i = 0; i < parent.size(); ++i) {
      all.push_back({colors[i], 0, next[parent[i]]});
    }
    for (size_t i = 0; i < parent.size(); ++i) {
      const SplitPlan plan = PlanSplit(all, static_cast<int>(i));
      ASSERT_FALSE(plan.exhausted);
      next[parent[i]] = plan.next_space;
      if (colors[i] < 0) continue;
      EXPECT_TRUE(used[parent[i]].insert(plan.space).second)
          << "space " << plan.space << " reused on rank " << parent[i];
    }
  };
  split({0, 1, 2, 3}, {0, 0, 1, 1});
  split({0, 1}, {0, 1});
  split({0, 1}, {5, 5});
  split({0, 1, 2, 3}, {0, -1, 0, 0});
  split({0, 1, 2, 3}, {3, 2, 1, 0});
}

TEST(UcxSplitPlan, RunningOutOfSpacesIsTheSameDecisionEverywhere) {
  const int64_t last = kTagSpaces - 1;
  const std::vector<SplitEntry> all = {{0, 0, last}, {1, 0, 1}, {0, 0, 1}};
  for (int r = 0; r < 3; ++r) {
    const SplitPlan plan = PlanSplit(all, r);
    EXPECT_TRUE(plan.exhausted) << "two groups need spaces " << last << " and " << last + 1;
    EXPECT_EQ(plan.next_space, last) << "nothing is taken";
  }
  // A family limited to 3 spaces (Options::tag_spaces): root 0, then 1, 2.
  const std::vector<SplitEntry> two = {{0, 0, 1}, {1, 0, 1}};
  EXPECT_FALSE(PlanSplit(two, 0, 3).exhausted);
  EXPECT_TRUE(PlanSplit({{0, 0, 3}, {0, 0, 3}}, 0, 3).exhausted);
  const std::vector<SplitEntry> one = {{0, 0, last}, {0, 0, 1}};
  EXPECT_FALSE(PlanSplit(one, 0).exhausted);
  EXPECT_EQ(PlanSplit(one, 1).space, static_cast<uint32_t>(last));
}

// Sets (or, for nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = ::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// When UCX finds no transport to a peer, the error explains what is missing
// in the UCX_TLS / UCX_NET_DEVICES in effect: loopback-only devices or
// shared memory alone in a multi-host job, rc without ud, PEER error mode
// over shared memory; and says nothing of the kind when the setting is fine.
TEST(UcxReachability, HintNamesWhatIsMissing) {
  PeerInfo me;
  me.host = "node-a";
  me.machine = "boot-a/pidns-1";
  PeerInfo remote = me;
  remote.host = "node-b";
  remote.machine = "boot-b/pidns-1";
  const PeerInfo local = me;
  struct Case {
    const char* tls;
    const char* devices;
    const PeerInfo* peer;
    ucp_err_handling_mode_t mode;
    std::vector<std::string> expected;
    std::vector<std::string> absent;
  };
  const Case cases[] = {
      {"tcp", "lo", &remote, UCP_ERR_HANDLING_MODE_PEER,
       {"to rank 3 on host node-b", "UCX_NET_DEVICES=lo", "only loopback devices"},
       {"rc without ud", "Shared-memory transports"}},
      {"sm,self", nullptr, &remote, UCP_ERR_HANDLING_MODE_PEER,
       {"UCX_TLS=sm,self", "Shared-memory transports only work within one host",
        "UCX_TLS=sm,self,tcp"},
       {"loopback"}},
      {"rc,sm,self", nullptr, &remote, UCP_ERR_HANDLING_MODE_PEER,
       {"rc without ud", "UCX_TLS=rc,ud,sm,self"},
       {"Shared-memory transports"}},
      {"posix,cma,self", nullptr, &local, UCP_ERR_HANDLING_MODE_PEER,
       {"peer_error_mode=peer excludes"},
       {"Shared-memory transports", "rc without ud"}},
      {"rc,ud,sm,self", "mlx5_0:1", &remote, UCP_ERR_HANDLING_MODE_PEER,
       {"UCX_NET_DEVICES=mlx5_0:1"},
       {"rc without ud", "loopback", "Shared-memory transports", "peer_error_mode"}},
  };
  for (const Case& c : cases) {
    ScopedEnv tls("UCX_TLS", c.tls);
    ScopedEnv devices("UCX_NET_DEVICES", c.devices);
    const std::string hint = ReachabilityHint(me, *c.peer, 3, c.mode);
    for (const std::string& text : c.expected) {
      EXPECT_NE(hint.find(text), std::string::npos)
          << "UCX_TLS=" << c.tls << ": missing \"" << text << "\" in: " << hint;
    }
    for (const std::string& text : c.absent) {
      EXPECT_EQ(hint.find(text), std::string::npos)
          << "UCX_TLS=" << c.tls << ": unexpected \"" << text << "\" in: " << hint;
    }
  }
}

TEST(UcxReachability, SharedMemoryAllowedByUcxTls) {
  const std::pair<const char*, bool> cases[] = {
      {nullptr, true}, {"tcp", false}, {"posix,self", true}, {"sm,tcp", true},
      {"^sm", false},  {"^tcp", true}, {"rc,ud", false},     {"all", true}};
  for (const auto& [tls, allowed] : cases) {
    ScopedEnv env("UCX_TLS", tls);
    EXPECT_EQ(TlsAllowsSharedMemory(), allowed) << "UCX_TLS=" << (tls ? tls : "<unset>");
  }
}

TEST(UcxOptions, ParsesKnownKeysAndRejectsOthers) {
  Options o;
  std::string error;
  EXPECT_FALSE(o.allreduce_small_max.has_value()) << "unset: the default by world size";
  ASSERT_TRUE(ParseOptions("allreduce_small_max=0;chunk_bytes=64k;busy_poll_us=5", &o,
                           &error))
      << error;
  EXPECT_EQ(o.allreduce_small_max.value_or(1), 0u);
  EXPECT_EQ(o.chunk_bytes, 65536u);
  EXPECT_EQ(o.busy_poll_us, 5);
  EXPECT_FALSE(ParseOptions("allreduce_small=1", &o, &error));
  EXPECT_NE(error.find("allreduce_small_max"), std::string::npos) << error;
  EXPECT_FALSE(ParseOptions("chunk_bytes=-1", &o, &error));
  ASSERT_TRUE(ParseOptions("reduce_small_max=1g;peer_error_mode=peer", &o, &error)) << error;
  EXPECT_EQ(o.reduce_small_max.value_or(0), size_t{1} << 30);
  EXPECT_EQ(o.peer_error_mode, PeerErrorMode::kPeer);
  EXPECT_EQ(o.tag_spaces, int64_t{kTagSpaces}) << "the default is the whole tag field";
  ASSERT_TRUE(ParseOptions("tag_spaces=3", &o, &error)) << error;
  EXPECT_EQ(o.tag_spaces, 3);
  EXPECT_FALSE(ParseOptions("tag_spaces=1", &o, &error)) << "the root needs space 0";
  EXPECT_FALSE(ParseOptions("tag_spaces=4096", &o, &error)) << "wider than the tag field";
}

// --- The schedule simulator. ---

struct RankState {
  std::vector<int32_t> send, recv;
  Schedule schedule;
  size_t round = 0;
  bool posted = false;
};

void RunActions(const Schedule& s, const Round& round, int size) {
  for (const Action& a : round.actions) {
    switch (a.kind) {
      case Action::kCopy: std::memmove(a.dst, a.a, a.count); break;
      case Action::kReduce3:
        backend::SlReduce3(a.dst, a.a, a.b, a.count, s.dtype, s.redop);
        break;
      case Action::kDivide: backend::SlDivideBy(a.dst, a.count, s.dtype, size); break;
    }
  }
}

// Runs every rank's schedule to the end; returns "" or what went wrong.
std::string Simulate(std::vector<RankState>& ranks) {
  const int P = static_cast<int>(ranks.size());
  using Key = std::tuple<int, int, uint32_t>;  // source, destination, step
  std::map<Key, std::deque<std::vector<uint8_t>>> wire;
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < P; ++r) {
      RankState& st = ranks[r];
      if (st.round == st.schedule.rounds.size()) continue;
      const Round& round = st.schedule.rounds[st.round];
      if (!st.posted) {
        for (const Transfer& t : round.transfers) {
          if (t.peer < 0 || t.peer >= P || t.peer == r) return "bad peer";
          if (t.send) {
            const auto* p = static_cast<const uint8_t*>(t.data);
            wire[{r, t.peer, t.step}].emplace_back(p, p + t.bytes);
          }
        }
        st.posted = true;
        moved = true;
      }
      bool ready = true;
      std::map<Key, size_t> need;
      for (const Transfer& t : round.transfers) {
        if (t.send) continue;
        const Key key{t.peer, r, t.step};
        if (wire[key].size() <= need[key]++) ready = false;
      }
      if (!ready) continue;
      for (const Transfer& t : round.transfers) {
        if (t.send) continue;
        auto& queue = wire[{t.peer, r, t.step}];
        if (queue.front().size() != t.bytes) {
          return "rank " + std::to_string(r) + " expected " + std::to_string(t.bytes) +
                 " B from " + std::to_string(t.peer) + " step " + std::to_string(t.step) +
                 " and got " + std::to_string(queue.front().size());
        }
        std::memcpy(t.data, queue.front().data(), t.bytes);
        queue.pop_front();
      }
      RunActions(st.schedule, round, P);
      ++st.round;
      st.posted = false;
      moved = true;
    }
  }
  for (int r = 0; r < P; ++r) {
    if (ranks[r].round != ranks[r].schedule.rounds.size()) {
      return "deadlock: rank " + std::to_string(r) + " stuck in round " +
             std::to_string(ranks[r].round) + " of " + ranks[r].schedule.algorithm;
    }
  }
  for (const auto& [key, queue] : wire) {
    if (!queue.empty()) return "an unreceived message was left on the wire";
  }
  return "";
}

// Rank r's input element i: distinct, small, and exact under int32 sums.
int32_t In(int r, size_t i) { return static_cast<int32_t>((r + 1) * 1000 + i % 997); }

struct Case {
  sl_op_kind_t kind;
  int size;
  size_t n;  // elements per rank (per block for allgather/reduce_scatter/alltoall)
  bool small;
};

void RunCase(const Case& c, sl_redop_t redop = SL_SUM, int root = 0) {
  Options options;
  options.chunk_bytes = 64;  // many segments even for small vectors
  const size_t pick = c.small ? SIZE_MAX : 0;
  options.allreduce_small_max = options.broadcast_small_max = options.reduce_small_max =
      options.allgather_small_max = options.reduce_scatter_small_max = pick;
  const int P = c.size;
  size_t send_n = c.n, recv_n = c.n;
  if (c.kind == SL_OP_ALLGATHER) recv_n = c.n * P;
  if (c.kind == SL_OP_REDUCE_SCATTER) send_n = c.n * P;
  if (c.kind == SL_OP_ALLTOALL) send_n = recv_n = c.n * P;
  std::vector<RankState> ranks(P);
  std::vector<sl_op_t> ops(P, sl_op_init(SL_OP_BARRIER));
  for (int r = 0; r < P; ++r) {
    RankState& st = ranks[r];
    st.send.resize(send_n);
    st.recv.assign(recv_n, -7);
    for (size_t i = 0; i < send_n; ++i) st.send[i] = In(r, i);
    if (c.kind == SL_OP_BROADCAST) {
      for (size_t i = 0; i < recv_n; ++i) st.recv[i] = r == root ? In(root, i) : -1;
    }
    sl_op_t& op = ops[r];
    op.kind = c.kind;
    op.send = {st.send.data(), send_n, SL_I32, SL_DEVICE_CPU, 0, nullptr};
    op.recv = {st.recv.data(), recv_n, SL_I32, SL_DEVICE_CPU, 0, nullptr};
    op.redop = redop;
    op.root = root;
    std::string why;
    ASSERT_EQ(ValidateOp(op, r, P, &why), SL_OK) << why;
    AlgoArgs args{&op, r, P, &options};
    st.schedule = SelectSchedule(args);
  }
  const std::string label = std::string(backend::SlOpKindName(c.kind)) + " P=" +
                            std::to_string(P) + " n=" + std::to_string(c.n) + " " +
                            (c.small ? "small" : "large") + " (" +
                            ranks[0].schedule.algorithm + ")";
  ASSERT_EQ(Simulate(ranks), "") << label;
  auto sum = [&](size_t i) {
    int64_t s = 0;
    for (int q = 0; q < P; ++q) s += In(q, i);
    return static_cast<int32_t>(redop == SL_AVG ? s / P : s);
  };
  for (int r = 0; r < P; ++r) {
    const auto& out = ranks[r].recv;
    for (size_t i = 0; i < recv_n; ++i) {
      int32_t want = 0;
      switch (c.kind) {
        case SL_OP_ALLREDUCE: want = sum(i); break;
        case SL_OP_BROADCAST: want = In(root, i); break;
        case SL_OP_REDUCE: want = r == root ? sum(i) : -7; break;
        case SL_OP_ALLGATHER: want = In(static_cast<int>(i / c.n), i % c.n); break;
        case SL_OP_REDUCE_SCATTER: want = sum(r * c.n + i); break;
        case SL_OP_ALLTOALL:
          want = In(static_cast<int>(i / c.n), r * c.n + i % c.n);
          break;
        default: break;
      }
      ASSERT_EQ(out[i], want) << label << " rank " << r << " index " << i;
    }
    for (size_t i = 0; i < send_n; ++i) {
      ASSERT_EQ(ranks[r].send[i], In(r, i)) << label << ": send buffer changed";
    }
  }
}

TEST(UcxSchedules, EveryAlgorithmOnOneToNineRanks) {
  for (sl_op_kind_t kind : {SL_OP_ALLREDUCE, SL_OP_BROADCAST, SL_OP_REDUCE,
                            SL_OP_ALLGATHER, SL_OP_REDUCE_SCATTER, SL_OP_ALLTOALL}) {
    for (int P = 1; P <= 9; ++P) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{37}, size_t{300}}) {
        for (bool small : {true, false}) {
          RunCase({kind, P, n, small});
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(UcxSchedules, RootsAndAverages) {
  for (int P : {2, 3, 5, 7}) {
    for (int root = 0; root < P; ++root) {
      for (bool small : {true, false}) {
        RunCase({SL_OP_BROADCAST, P, 41, small}, SL_SUM, root);
        RunCase({SL_OP_REDUCE, P, 41, small}, SL_AVG, root);
        RunCase({SL_OP_ALLREDUCE, P, 41, small}, SL_AVG, root);
        RunCase({SL_OP_REDUCE_SCATTER, P, 41, small}, SL_AVG, root);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(UcxSchedules, BarrierMatchesOnAnySize) {
  Options options;
  for (int P = 1; P <= 9; ++P) {
    std::vector<RankState> ranks(P);
    for (int r = 0; r < P; ++r) {
      sl_op_t op = sl_op_init(SL_OP_BARRIER);
      AlgoArgs args{&op, r, P, &options};
      ranks[r].schedule = SelectSchedule(args);
    }
    ASSERT_EQ(Simulate(ranks), "") << "barrier on " << P << " ranks";
  }
}

// The algorithm picked on each side of every switch point: the defaults
// by world size, with and without ranks sharing cores, and a threshold set
// in the options, which applies to every world size.
// On 2 ranks the ring allgather is one exchange, sent straight from the
// input, and the copy of this rank's block into place: not one round per
// segment with the copy first (which cost 2.3x raw UCP's time).
TEST(UcxSchedules, TwoRankRingAllgatherIsOneExchangeFromTheInput) {
  Options options;
  options.chunk_bytes = 64;  // would cut a 4 KiB block into 64 segments
  options.allgather_small_max = 0;  // the ring at every size
  constexpr size_t kN = 1024;
  std::vector<int32_t> in(kN), out(2 * kN);
  for (int r = 0; r < 2; ++r) {
    sl_op_t op = sl_op_init(SL_OP_ALLGATHER);
    op.send = {in.data(), kN, SL_I32, SL_DEVICE_CPU, 0, nullptr};
    op.recv = {out.data(), 2 * kN, SL_I32, SL_DEVICE_CPU, 0, nullptr};
    AlgoArgs args{&op, r, 2, &options};
    const Schedule s = SelectSchedule(args);
    ASSERT_STREQ(s.algorithm, "ring");
    ASSERT_EQ(s.rounds.size(), 1u) << "rank " << r;
    const Round& round = s.rounds[0];
    ASSERT_EQ(round.transfers.size(), 2u);
    for (const Transfer& t : round.transfers) {
      EXPECT_EQ(t.peer, 1 - r);
      EXPECT_EQ(t.bytes, kN * sizeof(int32_t));
      EXPECT_EQ(t.data, t.send ? static_cast<void*>(in.data())
                               : static_cast<void*>(out.data() + (1 - r) * kN));
    }
    ASSERT_EQ(round.actions.size(), 1u);
    EXPECT_EQ(round.actions[0].kind, Action::kCopy);
    EXPECT_EQ(round.actions[0].dst, out.data() + r * kN);
  }
}

TEST(UcxSchedules, ThresholdsPickTheDocumentedAlgorithm) {
  struct Kind {
    sl_op_kind_t kind;
    const char* small;
    const char* large;
    std::optional<size_t> Options::*field;
  };
  const Kind kinds[] = {
      {SL_OP_ALLREDUCE, "recursive doubling", "ring", &Options::allreduce_small_max},
      {SL_OP_BROADCAST, "binomial tree", "pipelined chain",
       &Options::broadcast_small_max},
      {SL_OP_REDUCE, "binomial tree", "pipelined chain", &Options::reduce_small_max},
      {SL_OP_ALLGATHER, "bruck", "ring", &Options::allgather_small_max},
      {SL_OP_REDUCE_SCATTER, "recursive doubling", "ring",
       &Options::reduce_scatter_small_max},
  };
  bool oversubscribed = false;  // whether the P ranks share cores
  // One rank's buffer of `bytes` (f32) for `kind` on P ranks.
  auto pick = [&oversubscribed](const Options& options, sl_op_kind_t kind, int P,
                                size_t bytes) {
    static std::vector<float> a, b;
    const size_t n = bytes / 4;
    a.assign(n * P + 1, 1.0f);
    b.assign(n * P + 1, 0.0f);
    sl_op_t op = sl_op_init(kind);
    op.send = {a.data(), n, SL_F32, SL_DEVICE_CPU, 0, nullptr};
    op.recv = {b.data(), n, SL_F32, SL_DEVICE_CPU, 0, nullptr};
    if (kind == SL_OP_ALLGATHER) op.recv.count = n * P;
    if (kind == SL_OP_REDUCE_SCATTER) op.send.count = n * P;
    AlgoArgs args{&op, 0, P, &options, oversubscribed};
    return std::string(SelectSchedule(args).algorithm);
  };
  for (const Kind& k : kinds) {
    for (int P = 2; P <= 9; ++P) {
     for (bool shared : {false, true}) {
      oversubscribed = shared;
      const Options defaults;
      const size_t t = DefaultSmallMax(k.kind, P, shared);
      ASSERT_EQ(t % 4, 0u) << "thresholds are whole f32 elements";
      ASSERT_LE(t, size_t{64} << 20) << "a default must leave a bandwidth side";
      const std::string where = backend::SlOpKindName(k.kind) + std::string(" on ") +
                                std::to_string(P) + (shared ? " ranks sharing cores" : " ranks") +
                                " at ";
      if (t > 0) {
        EXPECT_EQ(pick(defaults, k.kind, P, t), k.small) << where << t << " B";
      }
      EXPECT_EQ(pick(defaults, k.kind, P, t + 4), k.large) << where << t + 4 << " B";
      EXPECT_EQ(SmallMax(defaults, k.kind, P, shared), t);
      Options set;
      set.*k.field = 4096;
      EXPECT_EQ(SmallMax(set, k.kind, P, shared), 4096u);
      EXPECT_EQ(pick(set, k.kind, P, 4096), k.small) << where << "4096 B, set";
      EXPECT_EQ(pick(set, k.kind, P, 4100), k.large) << where << "4100 B, set";
     }
    }
  }
}

// The schedule cache (schedule_cache.h): an op with the same fields gets
// the schedule built for the first; any field a schedule depends on makes
// another; large scratch and point-to-point schedules with scratch are never
// shared; and a cached schedule is the one SelectSchedule builds.
TEST(UcxScheduleCache, SameOpSameScheduleAnyDifferenceAnother) {
  Options options;
  std::vector<float> a(64, 1.0f), b(64, 0.0f);
  const int P = 4;
  auto allreduce = [&] {
    sl_op_t op = sl_op_init(SL_OP_ALLREDUCE);
    op.send = {a.data(), 2, SL_F32, SL_DEVICE_CPU, 0, nullptr};
    op.recv = {b.data(), 2, SL_F32, SL_DEVICE_CPU, 0, nullptr};
    return op;
  };
  ScheduleCache cache;
  sl_op_t op = allreduce();
  AlgoArgs args{&op, 1, P, &options};
  const std::shared_ptr<const Schedule> first = cache.Get(args);
  op.seq = 99;          // not part of the schedule
  op.timeout_ms = 123;  // nor this
  EXPECT_EQ(cache.Get(args), first);
  // The cached one is what SelectSchedule builds for the op.
  const Schedule built = SelectSchedule(args);
  ASSERT_EQ(built.rounds.size(), first->rounds.size());
  EXPECT_STREQ(built.algorithm, first->algorithm);
  for (size_t r = 0; r < built.rounds.size(); ++r) {
    ASSERT_EQ(built.rounds[r].transfers.size(), first->rounds[r].transfers.size());
    for (size_t i = 0; i < built.rounds[r].transfers.size(); ++i) {
      EXPECT_EQ(built.rounds[r].transfers[i].peer, first->rounds[r].transfers[i].peer);
      EXPECT_EQ(built.rounds[r].transfers[i].bytes, first->rounds[r].transfers[i].bytes);
      EXPECT_EQ(built.rounds[r].transfers[i].step, first->rounds[r].transfers[i].step);
    }
  }
  // Each field a schedule depends on.
  std::vector<std::pair<const char*, sl_op_t>> others;
  auto vary = [&](const char* what, auto change) {
    sl_op_t o = allreduce();
    change(o);
    others.emplace_back(what, o);
  };
  vary("send data", [&](sl_op_t& o) { o.send.data = a.data() + 8; });
  vary("recv data", [&](sl_op_t& o) { o.recv.data = b.data() + 8; });
  vary("count", [](sl_op_t& o) { o.send.count = o.recv.count = 4; });
  vary("dtype", [](sl_op_t& o) { o.send.dtype = o.recv.dtype = SL_I32; });
  vary("redop", [](sl_op_t& o) { o.redop = SL_MAX; });
  vary("kind", [](sl_op_t& o) { o.kind = SL_OP_BROADCAST; });
  vary("root", [](sl_op_t& o) { o.kind = SL_OP_BROADCAST; o.root = 2; });
  for (const auto& [what, other] : others) {
    EXPECT_FALSE(ScheduleCache::SameSchedule(other, allreduce())) << what;
    sl_op_t o = other;
    AlgoArgs other_args{&o, 1, P, &options};
    EXPECT_NE(cache.Get(other_args), first) << what;
  }
  // More distinct ops than entries: each still gets its own schedule.
  for (size_t n = 1; n <= 2 * ScheduleCache::kEntries; ++n) {
    sl_op_t o = allreduce();
    o.send.count = o.recv.count = n;
    AlgoArgs o_args{&o, 1, P, &options};
    const std::shared_ptr<const Schedule> s = cache.Get(o_args);
    ASSERT_FALSE(s->rounds.empty());
    EXPECT_EQ(s->rounds.back().transfers.back().bytes, n * sizeof(float)) << n;
  }
}

TEST(UcxScheduleCache, LargeScratchAndPointToPointScratchAreNotShared) {
  Options options;
  const size_t n = ScheduleCache::kMaxScratchBytes / sizeof(float) + 1;
  std::vector<float> a(n), b(n);
  sl_op_t op = sl_op_init(SL_OP_ALLREDUCE);
  op.send = {a.data(), n, SL_F32, SL_DEVICE_CPU, 0, nullptr};
  op.recv = {b.data(), n, SL_F32, SL_DEVICE_CPU, 0, nullptr};
  options.allreduce_small_max = size_t{1} << 30;  // recursive doubling: scratch of n
  AlgoArgs args{&op, 0, 2, &options};
  ScheduleCache cache;
  const std::shared_ptr<const Schedule> large = cache.Get(args);
  ASSERT_GT(large->scratch_bytes, ScheduleCache::kMaxScratchBytes);
  EXPECT_NE(cache.Get(args), large);
  // A send has no scratch: ops to the same peer with the same tag share it.
  sl_op_t send = sl_op_init(SL_OP_SEND);
  send.send = {a.data(), 2, SL_F32, SL_DEVICE_CPU, 0, nullptr};
  send.peer = 1;
  send.tag = 7;
  AlgoArgs send_args{&send, 0, 2, &options};
  const std::shared_ptr<const Schedule> s = cache.Get(send_args);
  ASSERT_EQ(s->scratch_bytes, 0u);
  EXPECT_EQ(cache.Get(send_args), s);
  send.tag = 8;
  EXPECT_NE(cache.Get(send_args), s);
}

}  // namespace
}  // namespace syncline::ucx_backend

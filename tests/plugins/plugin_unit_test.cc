// Unit tests of the pieces of the interposers that need no processes: the
// check interposer's fingerprint comparison (the exact message users see),
// the SYNCLINE_FAULT parser, when a wrapped table offers comm_split, and the
// SDK's create and entry-point helpers (CreateAs, CreateAndWrap,
// PublishInterposer).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/check/fingerprint.h"
#include "plugins/faults/fault_spec.h"
#include "syncline/plugin_sdk/interposer.h"

namespace syncline::plugin {
namespace {

using ::testing::HasSubstr;

sl_op_t Op(sl_op_kind_t kind, uint64_t seq, size_t count, sl_dtype_t dtype, void* data,
           int root = 0) {
  sl_op_t op = sl_op_init(kind);
  op.seq = seq;
  op.send = sl_buffer_t{data, count, dtype, SL_DEVICE_CPU, 0, nullptr};
  op.recv = op.send;
  op.redop = SL_SUM;
  op.root = root;
  return op;
}

// A wrapped table offers comm_split only when the next layer has one, the
// plugin can wrap a split child, and the next layer moves CPU buffers (the
// wrapper learns the child's rank with a CPU allgather); otherwise the core
// falls back to comm_create.
sl_result_t FakeSplit(sl_comm_t*, int32_t, int32_t, const sl_store_t*, uint64_t,
                      sl_comm_t**, sl_error_t*) {
  return SL_OK;
}
sl_result_t NoCreate(const sl_backend_t*, const sl_comm_config_t&,
                     std::unique_ptr<WrappedComm>*, sl_error_t*) {
  return SL_ERR_INTERNAL;
}
sl_result_t NoWrap(const sl_backend_t*, sl_comm_t*, const sl_comm_config_t&,
                   std::unique_ptr<WrappedComm>*, sl_error_t*) {
  return SL_ERR_INTERNAL;
}

TEST(Interposer, WrapsCommSplitOnlyWhenTheNextLayerCanSplit) {
  static const InterposerInfo kCanWrap = {"test", NoCreate, NoWrap};
  static const InterposerInfo kCannotWrap = {"test", NoCreate, nullptr};
  auto table = [](bool split, uint32_t devices) {
    sl_backend_t t{};
    t.abi_version = SL_ABI_VERSION;
    t.struct_size = sizeof(t);
    t.name = "next";
    t.version = "1";
    static sl_capabilities_t caps[4];
    static int made = 0;
    caps[made] = sl_capabilities_t{sizeof(sl_capabilities_t), devices, 0, 0, 0, nullptr};
    t.caps = &caps[made++];
    t.comm_split = split ? FakeSplit : nullptr;
    return t;
  };
  static sl_backend_t cpu_split = table(true, 1u << SL_DEVICE_CPU);
  static sl_backend_t cpu_no_split = table(false, 1u << SL_DEVICE_CPU);
  static sl_backend_t cuda_split = table(true, 1u << SL_DEVICE_CUDA);
  static sl_backend_t cpu_split_2 = table(true, 1u << SL_DEVICE_CPU);
  const sl_backend_t* wrapped = nullptr;
  sl_error_t err{};
  ASSERT_EQ(Wrap(kCanWrap, &cpu_split, &wrapped, &err), SL_OK) << err.message;
  EXPECT_NE(wrapped->comm_split, nullptr);
  EXPECT_NE(wrapped->comm_split, &FakeSplit) << "the child must be wrapped too";
  ASSERT_EQ(Wrap(kCanWrap, &cpu_no_split, &wrapped, &err), SL_OK) << err.message;
  EXPECT_EQ(wrapped->comm_split, nullptr);
  ASSERT_EQ(Wrap(kCanWrap, &cuda_split, &wrapped, &err), SL_OK) << err.message;
  EXPECT_EQ(wrapped->comm_split, nullptr);
  ASSERT_EQ(Wrap(kCannotWrap, &cpu_split_2, &wrapped, &err), SL_OK) << err.message;
  EXPECT_EQ(wrapped->comm_split, nullptr);
}

// A next layer whose comm_create hands out a counter's address and whose
// comm_destroy counts: what the SDK's create path makes and destroys.
int g_created = 0;
int g_destroyed = 0;
sl_result_t CountingCreate(void*, const sl_comm_config_t*, sl_comm_t** comm, sl_error_t*) {
  ++g_created;
  *comm = reinterpret_cast<sl_comm_t*>(&g_created);
  return SL_OK;
}
void CountingDestroy(sl_comm_t*) { ++g_destroyed; }
sl_backend_t CountingNext() {
  static sl_capabilities_t caps{sizeof(sl_capabilities_t), 1u << SL_DEVICE_CPU, 0, 0, 0,
                                nullptr};
  sl_backend_t t{};
  t.abi_version = SL_ABI_VERSION;
  t.struct_size = sizeof(t);
  t.name = "next";
  t.version = "1.0";
  t.caps = &caps;
  t.comm_create = CountingCreate;
  t.comm_destroy = CountingDestroy;
  return t;
}

class PlainComm : public WrappedComm {
 public:
  using WrappedComm::WrappedComm;
};

TEST(Interposer, CreateAsWrapsTheCommunicatorTheNextLayerMade) {
  const sl_backend_t next = CountingNext();
  sl_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = 1;
  config.size = 3;
  std::unique_ptr<WrappedComm> comm;
  sl_error_t err{};
  g_created = g_destroyed = 0;
  ASSERT_EQ(CreateAs<PlainComm>(&next, config, &comm, &err), SL_OK) << err.message;
  ASSERT_NE(comm, nullptr);
  EXPECT_NE(dynamic_cast<PlainComm*>(comm.get()), nullptr);
  EXPECT_EQ(comm->inner(), reinterpret_cast<sl_comm_t*>(&g_created));
  EXPECT_EQ(comm->next(), &next);
  EXPECT_EQ(comm->rank(), 1);
  EXPECT_EQ(comm->size(), 3);
  EXPECT_EQ(g_created, 1);
  EXPECT_EQ(g_destroyed, 0);
}

TEST(Interposer, CreateAndWrapDestroysTheNewCommunicatorWhenWrappingFails) {
  const sl_backend_t next = CountingNext();
  sl_comm_config_t config{};
  config.struct_size = sizeof(config);
  std::unique_ptr<WrappedComm> comm;
  sl_error_t err{};
  g_created = g_destroyed = 0;
  EXPECT_EQ(CreateAndWrap(NoWrap, &next, config, &comm, &err), SL_ERR_INTERNAL);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(g_created, 1);
  EXPECT_EQ(g_destroyed, 1);
}

const InterposerInfo kPublished = {"published", CreateAs<PlainComm>, WrapAs<PlainComm>};

TEST(Interposer, PublishInterposerWrapsWithItsInfo) {
  const sl_interposer_t* table = PublishInterposer<kPublished>();
  EXPECT_EQ(PublishInterposer<kPublished>(), table);
  EXPECT_EQ(table->abi_version, SL_ABI_VERSION);
  EXPECT_EQ(table->struct_size, sizeof(sl_interposer_t));
  EXPECT_STREQ(table->name, "published");
  static const sl_backend_t next = CountingNext();
  const sl_backend_t* wrapped = nullptr;
  sl_error_t err{};
  ASSERT_EQ(table->wrap(&next, &wrapped, &err), SL_OK) << err.message;
  EXPECT_STREQ(wrapped->name, "next");
  EXPECT_STREQ(wrapped->version, "1.0 +published");
  const sl_backend_t* again = nullptr;
  ASSERT_EQ(table->wrap(&next, &again, &err), SL_OK) << err.message;
  EXPECT_EQ(again, wrapped);
}

TEST(Fingerprint, AgreementIsOk) {
  std::vector<float> data(16, 1.0f);
  const sl_op_t op = Op(SL_OP_ALLREDUCE, 3, data.size(), SL_F32, data.data());
  std::vector<check::Fingerprint> all(4, check::MakeFingerprint(op, 0, true));
  std::string message;
  EXPECT_EQ(check::CompareFingerprints(all, 3, &message), SL_OK) << message;
}

TEST(Fingerprint, NamesEveryGroupOfRanksAndWhatTheyCalled) {
  std::vector<float> data(1048576);
  const auto allreduce = check::MakeFingerprint(
      Op(SL_OP_ALLREDUCE, 17, data.size(), SL_F32, data.data()), 0, false);
  const auto broadcast = check::MakeFingerprint(
      Op(SL_OP_BROADCAST, 17, 1024, SL_F32, data.data()), 2, false);
  std::string message;
  EXPECT_EQ(check::CompareFingerprints({allreduce, allreduce, broadcast, allreduce}, 17,
                                       &message),
            SL_ERR_MISMATCH);
  EXPECT_THAT(message,
              HasSubstr("op #17: ranks 0,1,3 called allreduce (f32 x 1048576, sum); "
                        "rank 2 called broadcast (f32 x 1024, root 0)"));
}

TEST(Fingerprint, UnusedFieldsNeverCauseAMismatch) {
  std::vector<float> data(8);
  sl_op_t a = Op(SL_OP_ALLREDUCE, 1, 8, SL_F32, data.data(), /*root=*/0);
  sl_op_t b = Op(SL_OP_ALLREDUCE, 1, 8, SL_F32, data.data(), /*root=*/3);
  std::string message;
  EXPECT_EQ(check::CompareFingerprints({check::MakeFingerprint(a, 0, false),
                                        check::MakeFingerprint(b, 1, false)},
                                       1, &message),
            SL_OK)
      << message;
}

TEST(Fingerprint, DifferentSequenceNumbersAreShown) {
  std::vector<float> data(8);
  const auto a =
      check::MakeFingerprint(Op(SL_OP_BARRIER, 5, 0, SL_F32, nullptr), 0, false);
  const auto b =
      check::MakeFingerprint(Op(SL_OP_BARRIER, 6, 0, SL_F32, nullptr), 1, false);
  std::string message;
  EXPECT_EQ(check::CompareFingerprints({a, b}, 5, &message), SL_ERR_MISMATCH);
  EXPECT_THAT(message,
              HasSubstr("rank 0 called barrier as op #5; rank 1 called barrier "
                        "as op #6"));
}

TEST(Fingerprint, NonFiniteInputIsNamedByRankAndElement) {
  std::vector<float> clean(8, 1.0f), dirty(8, 1.0f);
  dirty[5] = std::nanf("");
  dirty[6] = INFINITY;
  const auto a =
      check::MakeFingerprint(Op(SL_OP_ALLREDUCE, 2, 8, SL_F32, clean.data()), 0, true);
  const auto b =
      check::MakeFingerprint(Op(SL_OP_ALLREDUCE, 2, 8, SL_F32, dirty.data()), 1, true);
  std::string message;
  EXPECT_EQ(check::CompareFingerprints({a, b}, 2, &message), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message,
              HasSubstr("rank 1's input holds NaN and Inf (first at element 5)"));
  // bf16 +Inf is 0x7f80; NaN 0x7fc0. Only the root's broadcast input counts.
  std::vector<uint16_t> half = {0x3f80, 0x7f80};
  EXPECT_NE(
      check::MakeFingerprint(Op(SL_OP_BROADCAST, 1, 2, SL_BF16, half.data()), 0, true)
          .flags,
      0u);
  EXPECT_EQ(
      check::MakeFingerprint(Op(SL_OP_BROADCAST, 1, 2, SL_BF16, half.data()), 1, true)
          .flags,
      0u);
}

TEST(Fingerprint, RankListsCollapseRuns) {
  EXPECT_EQ(check::FormatRanks({0, 1, 3}), "0,1,3");
  EXPECT_EQ(check::FormatRanks({0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
}

TEST(FaultSpec, ParsesEveryKind) {
  std::vector<faults::Fault> parsed;
  std::string error;
  ASSERT_TRUE(
      faults::ParseFaults("delay:rank=1,op=5,ms=2000; "
                          "kill:rank=2,op=7;close:rank=*,op=3,comm=2;fail_init:rank=1",
                          &parsed, &error))
      << error;
  ASSERT_EQ(parsed.size(), 4u);
  EXPECT_EQ(parsed[0].kind, faults::FaultKind::kDelay);
  EXPECT_EQ(parsed[0].ms, 2000);
  EXPECT_EQ(parsed[1].op, 7u);
  EXPECT_TRUE(faults::Applies(parsed[2], 5, 2));
  EXPECT_FALSE(faults::Applies(parsed[2], 5, 1));
  EXPECT_EQ(parsed[3].kind, faults::FaultKind::kFailInit);
  EXPECT_FALSE(faults::Applies(parsed[3], 0, 1));
  EXPECT_TRUE(faults::ParseFaults("", &parsed, &error));
  EXPECT_TRUE(parsed.empty());
}

TEST(FaultSpec, ErrorsQuoteTheEntryAndShowTheSyntax) {
  std::vector<faults::Fault> parsed;
  std::string error;
  EXPECT_FALSE(faults::ParseFaults("delay:rank=1,op=5", &parsed, &error));
  EXPECT_THAT(error, HasSubstr("'delay:rank=1,op=5': missing ms="));
  EXPECT_THAT(error, HasSubstr("expected e.g."));
  EXPECT_FALSE(faults::ParseFaults("explode:rank=1", &parsed, &error));
  EXPECT_THAT(error, HasSubstr("unknown fault 'explode'"));
  EXPECT_FALSE(faults::ParseFaults("kill:rank=one,op=2", &parsed, &error));
  EXPECT_THAT(error, HasSubstr("'rank=one' needs a non-negative integer"));
  EXPECT_FALSE(faults::ParseFaults("kill:op=2", &parsed, &error));
  EXPECT_THAT(error, HasSubstr("missing rank="));
}

}  // namespace
}  // namespace syncline::plugin

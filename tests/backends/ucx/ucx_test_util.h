// ucx_test_util.h: what the UCX multi-rank tests share: a client of the
// job's store and a UCX communicator made on it.
#ifndef SYNCLINE_TESTS_BACKENDS_UCX_UCX_TEST_UTIL_H_
#define SYNCLINE_TESTS_BACKENDS_UCX_UCX_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/store.h"

namespace syncline::testing {

// A client of the store RunRanks hosts (MASTER_PORT on 127.0.0.1).
inline std::shared_ptr<Store> JobStore() { return ConnectJobStore(); }

// A UCX communicator on `store` (null: rendezvous from the environment).
inline std::unique_ptr<Communicator> CreateUcx(
    std::shared_ptr<Store> store = nullptr, int rank = -1, int size = -1,
    const std::string& backend_options = "", absl::Duration timeout = absl::Seconds(60)) {
  CommunicatorOptions options;
  options.backend = "ucx";
  options.backend_options = backend_options;
  options.timeout = timeout;
  options.store = std::move(store);
  options.rank = rank;
  options.world_size = size;
  auto comm = Communicator::Create(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_BACKENDS_UCX_UCX_TEST_UTIL_H_

// torch_store.cc: the c10d::Store adapter (see torch_store.h).
#include "torch_store.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "syncline/status.h"

namespace syncline::torch_backend {
namespace {

std::vector<uint8_t> Bytes(absl::string_view s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string String(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}

class TorchStore : public Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return Call("set", key, [&] { store_->set(std::string(key), Bytes(value)); });
  }

  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override {
    std::string value;
    absl::Status s = AwaitKeys("get", {std::string(key)}, timeout);
    if (s.ok()) s = Call("get", key, [&] { value = String(store_->get(std::string(key))); });
    if (!s.ok()) return s;
    return value;
  }

  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    int64_t value = 0;
    absl::Status s = Call("add", key, [&] { value = store_->add(std::string(key), delta); });
    if (!s.ok()) return s;
    return value;
  }

  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override {
    return AwaitKeys("wait", std::vector<std::string>(keys.begin(), keys.end()), timeout);
  }

  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override {
    std::string value;
    absl::Status s = Call("compare_set", key, [&] {
      value = String(store_->compareSet(std::string(key), Bytes(expected), Bytes(desired)));
    });
    if (!s.ok()) return s;
    return value;
  }

  absl::StatusOr<bool> Delete(absl::string_view key) override {
    bool existed = false;
    absl::Status s = Call("delete", key, [&] { existed = store_->deleteKey(std::string(key)); });
    if (!s.ok()) return s;
    return existed;
  }

  absl::StatusOr<int64_t> NumKeys() override {
    int64_t n = 0;
    absl::Status s = Call("num_keys", "", [&] { n = store_->getNumKeys(); });
    if (!s.ok()) return s;
    return n;
  }

  absl::StatusOr<std::vector<bool>> Check(absl::Span<const std::string> keys) override {
    std::vector<bool> present;
    absl::Status s = Call("check", absl::StrJoin(keys, ", "), [&] {
      for (const std::string& key : keys) present.push_back(store_->check({key}));
    });
    if (!s.ok()) return s;
    return present;
  }

 private:
  // Waits until every key in `keys` exists, polling c10d's check() (one
  // round trip for all keys) with a backoff from 1 ms to 20 ms. Not c10d's
  // wait(): in torch 1.13 a TCPStore wait that times out leaves the server's
  // late answer on the client's socket, and the next request reads it.
  absl::Status AwaitKeys(const char* what, const std::vector<std::string>& keys,
                         absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration pause = absl::Milliseconds(1);
    for (;;) {
      bool present = false;
      SL_RETURN_IF_ERROR(Call(what, absl::StrJoin(keys, ", "),
                              [&] { present = store_->check(keys); }));
      if (present) return absl::OkStatus();
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "PyTorch store ", what, ": keys still missing after ", absl::FormatDuration(timeout),
            ": ", absl::StrJoin(keys, ", ")));
      }
      absl::SleepFor(std::min(pause, deadline - absl::Now()));
      pause = std::min(pause * 2, absl::Milliseconds(20));
    }
  }

  // Runs `body`, turning c10d's exceptions into a Status that names the call.
  template <typename F>
  absl::Status Call(const char* what, absl::string_view keys, F&& body) {
    try {
      body();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      std::string msg = absl::StrCat("PyTorch store ", what, "(", keys, "): ", e.what());
      const std::string text = e.what();
      if (text.find("imeout") != std::string::npos || text.find("timed out") != std::string::npos) {
        return absl::DeadlineExceededError(msg);
      }
      return absl::UnavailableError(msg);
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::shared_ptr<Store> MakeTorchStore(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<TorchStore>(std::move(store));
}

}  // namespace syncline::torch_backend

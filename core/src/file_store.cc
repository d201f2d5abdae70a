// file_store.cc: a Store on a shared file.
//
// The file is an append-only log of records: 'S' key value (set) or 'D' key
// (delete). Every operation takes an exclusive flock(), replays the log and
// appends what it changes, so several processes (or hosts on a shared
// filesystem with working locks) see one consistent map. Waits poll the file.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store_util.h"
#include "syncline/store.h"

namespace syncline {
namespace {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string path) : path_(std::move(path)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return Locked([&](Map&) { return Append('S', key, value); });
  }

  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    std::string k(key);
    SL_RETURN_IF_ERROR(Wait({&k, 1}, timeout));
    std::string value;
    SL_RETURN_IF_ERROR(Locked([&](Map& m) {
      value = m[k];
      return absl::OkStatus();
    }));
    return value;
  }

  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    int64_t result = 0;
    SL_RETURN_IF_ERROR(Locked([&](Map& m) -> absl::Status {
      auto it = m.find(std::string(key));
      if (it != m.end() && !absl::SimpleAtoi(it->second, &result)) {
        return absl::InvalidArgumentError(
            absl::StrCat("file store key '", key, "' is not an integer"));
      }
      result += delta;
      return Append('S', key, absl::StrCat(result));
    }));
    return result;
  }

  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    absl::Time deadline = absl::Now() + timeout;
    while (true) {
      std::vector<std::string> missing;
      SL_RETURN_IF_ERROR(Locked([&](Map& m) {
        for (const std::string& k : keys) {
          if (m.count(k) == 0) missing.push_back(k);
        }
        return absl::OkStatus();
      }));
      if (missing.empty()) return absl::OkStatus();
      if (absl::Now() >= deadline) {
        return internal_store::MissingKeysError("file store " + path_, missing,
                                                timeout);
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    std::string result;
    SL_RETURN_IF_ERROR(Locked([&](Map& m) -> absl::Status {
      auto it = m.find(std::string(key));
      if ((it == m.end() && expected.empty()) ||
          (it != m.end() && it->second == expected)) {
        result = std::string(desired);
        return Append('S', key, desired);
      }
      result = it == m.end() ? std::string() : it->second;
      return absl::OkStatus();
    }));
    return result;
  }

  absl::StatusOr<bool> Delete(absl::string_view key) override {
    bool existed = false;
    SL_RETURN_IF_ERROR(Locked([&](Map& m) -> absl::Status {
      existed = m.count(std::string(key)) > 0;
      return existed ? Append('D', key, "") : absl::OkStatus();
    }));
    return existed;
  }

  absl::StatusOr<int64_t> NumKeys() override {
    int64_t n = 0;
    SL_RETURN_IF_ERROR(Locked([&](Map& m) {
      n = static_cast<int64_t>(m.size());
      return absl::OkStatus();
    }));
    return n;
  }

  absl::StatusOr<std::vector<bool>> Check(
      absl::Span<const std::string> keys) override {
    std::vector<bool> out;
    SL_RETURN_IF_ERROR(Locked([&](Map& m) {
      for (const std::string& k : keys) out.push_back(m.count(k) > 0);
      return absl::OkStatus();
    }));
    return out;
  }

 private:
  using Map = std::map<std::string, std::string>;

  // Opens and locks the file, replays it into a map and runs `fn`. `fd_` is
  // valid inside `fn` for Append().
  template <typename Fn>
  absl::Status Locked(Fn fn) {
    std::lock_guard<std::mutex> lock(mu_);
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot open file store ", path_, ": ", std::strerror(errno),
          "; check that the folder exists and is writable by every rank"));
    }
    absl::Status status;
    if (::flock(fd, LOCK_EX) != 0) {
      status = absl::UnavailableError(
          absl::StrCat("flock(", path_, ") failed: ", std::strerror(errno)));
    } else {
      Map map;
      status = Replay(fd, map);
      if (status.ok()) {
        fd_ = fd;
        status = fn(map);
        fd_ = -1;
      }
      ::flock(fd, LOCK_UN);
    }
    ::close(fd);
    return status;
  }

  absl::Status Replay(int fd, Map& map) {
    std::string data;
    char buf[65536];
    ssize_t n;
    ::lseek(fd, 0, SEEK_SET);
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) data.append(buf, n);
    size_t pos = 0;
    auto read_field = [&](std::string& out) {
      uint32_t len;
      if (pos + 4 > data.size()) return false;
      std::memcpy(&len, data.data() + pos, 4);
      pos += 4;
      if (pos + len > data.size()) return false;
      out.assign(data.data() + pos, len);
      pos += len;
      return true;
    };
    while (pos < data.size()) {
      char type = data[pos++];
      std::string key, value;
      if (!read_field(key) || !read_field(value) || (type != 'S' && type != 'D')) {
        return absl::DataLossError(absl::StrCat(
            "file store ", path_, " is corrupt at byte ", pos,
            "; delete it and restart every rank"));
      }
      if (type == 'S') map[key] = value; else map.erase(key);
    }
    return absl::OkStatus();
  }

  absl::Status Append(char type, absl::string_view key, absl::string_view value) {
    std::string record(1, type);
    uint32_t klen = key.size(), vlen = value.size();
    record.append(reinterpret_cast<char*>(&klen), 4).append(key.data(), klen);
    record.append(reinterpret_cast<char*>(&vlen), 4).append(value.data(), vlen);
    ::lseek(fd_, 0, SEEK_END);
    if (::write(fd_, record.data(), record.size()) !=
        static_cast<ssize_t>(record.size())) {
      return absl::UnavailableError(
          absl::StrCat("write to file store ", path_, " failed: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

  const std::string path_;
  std::mutex mu_;  // serializes this process's threads; flock covers others
  int fd_ = -1;    // guarded by mu_, valid only inside Locked()
};

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create file store ", path, ": ", std::strerror(errno)));
  }
  ::close(fd);
  return std::shared_ptr<Store>(std::make_shared<FileStore>(path));
}

}  // namespace syncline

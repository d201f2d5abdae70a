// checkpoint_files.cc: atomic writes, manifests and folder housekeeping.
#include "checkpoint_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "sha256.h"
#include "syncline/status.h"

namespace syncline::ddp::internal {
namespace {

constexpr absl::string_view kPrefix = "checkpoint-";
constexpr absl::string_view kManifestSuffix = ".manifest";
constexpr absl::string_view kDataSuffix = ".pt";

std::string Join(const std::string& dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

absl::Status OsError(absl::string_view what, const std::string& path) {
  const int err = errno;
  return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound
                      : (err == EACCES || err == EROFS || err == EPERM)
                          ? absl::StatusCode::kPermissionDenied
                          : absl::StatusCode::kInternal,
                      absl::StrFormat("%s %s: %s", what, path, std::strerror(err)));
}

// fsync of a folder makes the renames inside it durable.
absl::Status SyncFolder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return OsError("cannot open folder", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return OsError("cannot fsync folder", dir);
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("cannot write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The names in `dir`; empty if it cannot be read.
std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

// Parses "checkpoint-<seq><suffix>"; -1 if `name` is not of that form.
int64_t SeqOf(absl::string_view name, absl::string_view suffix) {
  if (!absl::ConsumePrefix(&name, kPrefix)) return -1;
  if (!absl::ConsumeSuffix(&name, suffix)) return -1;
  int64_t seq = 0;
  if (name.empty() || !absl::SimpleAtoi(name, &seq) || seq < 0) return -1;
  return seq;
}

std::string EscapeValue(absl::string_view v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\n", "\\n"}});
}
std::string UnescapeValue(absl::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      out.push_back(v[i + 1] == 'n' ? '\n' : v[i + 1]);
      ++i;
    } else {
      out.push_back(v[i]);
    }
  }
  return out;
}

}  // namespace

std::string DataFileName(int64_t seq) {
  return absl::StrFormat("%s%06d%s", kPrefix, seq, kDataSuffix);
}
std::string ManifestFileName(int64_t seq) {
  return absl::StrFormat("%s%06d%s", kPrefix, seq, kManifestSuffix);
}

std::string FormatManifest(const Manifest& m) {
  std::string out = absl::StrCat(
      "# Syncline checkpoint manifest. `sha256sum ", m.data_file,
      "` must print the sha256 below.\n", "format=", m.format, "\n", "seq=", m.seq, "\n",
      "file=", m.data_file, "\n", "bytes=", m.bytes, "\n", "sha256=", m.sha256, "\n",
      "step=", m.step, "\n", "epoch=", m.epoch, "\n", "world_size=", m.world_size, "\n",
      "model_hash=", m.model_hash, "\n");
  for (const auto& [key, value] : m.config) {
    absl::StrAppend(&out, "config.", key, "=", EscapeValue(value), "\n");
  }
  return out;
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text, absl::string_view path) {
  Manifest m;
  int seen = 0;  // bit per required key
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("manifest ", path, " is malformed: ", why));
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) return bad(absl::StrCat("line '", line, "'"));
    const absl::string_view key = line.substr(0, eq);
    const absl::string_view value = line.substr(eq + 1);
    bool ok = true;
    if (key == "format") {
      ok = absl::SimpleAtoi(value, &m.format);
      seen |= 1;
    } else if (key == "seq") {
      ok = absl::SimpleAtoi(value, &m.seq);
      seen |= 2;
    } else if (key == "file") {
      m.data_file = std::string(value);
      seen |= 4;
    } else if (key == "bytes") {
      ok = absl::SimpleAtoi(value, &m.bytes);
      seen |= 8;
    } else if (key == "sha256") {
      m.sha256 = std::string(value);
      seen |= 16;
      ok = m.sha256.size() == 64;
    } else if (key == "step") {
      ok = absl::SimpleAtoi(value, &m.step);
    } else if (key == "epoch") {
      ok = absl::SimpleAtoi(value, &m.epoch);
    } else if (key == "world_size") {
      ok = absl::SimpleAtoi(value, &m.world_size);
    } else if (key == "model_hash") {
      m.model_hash = std::string(value);
    } else if (absl::StartsWith(key, "config.")) {
      m.config.emplace_back(std::string(key.substr(7)), UnescapeValue(value));
    }  // Unknown keys are ignored: newer writers may add some.
    if (!ok) return bad(absl::StrCat("bad value for ", key, ": '", value, "'"));
  }
  if (seen != 31)
    return bad("a required key (format, seq, file, bytes, sha256) is missing");
  if (m.format != kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrFormat("manifest %s has format %d; this build reads format %d", path,
                        m.format, kCheckpointFormatVersion));
  }
  if (m.data_file.find('/') != std::string::npos) return bad("file has a '/'");
  return m;
}

std::vector<int64_t> ListCommitted(const std::string& dir) {
  std::vector<int64_t> seqs;
  for (const std::string& name : ListNames(dir)) {
    const int64_t seq = SeqOf(name, kManifestSuffix);
    if (seq >= 0) seqs.push_back(seq);
  }
  std::sort(seqs.begin(), seqs.end());
  return seqs;
}

absl::Status PrepareFolder(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("checkpoint folder is empty");
  // mkdir -p, one component at a time.
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return OsError("cannot create checkpoint folder", prefix);
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return OsError("cannot stat", dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint folder ", dir, " exists but is not a folder"));
  }
  const std::string probe = Join(dir, absl::StrCat(".write-probe.", ::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError("checkpoint folder is not writable:", dir);
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

void RemoveLeftovers(const std::string& dir) {
  const std::vector<int64_t> committed = ListCommitted(dir);
  for (const std::string& name : ListNames(dir)) {
    const bool temp = absl::StartsWith(name, ".") && absl::EndsWith(name, ".tmp");
    const int64_t seq = SeqOf(name, kDataSuffix);
    const bool orphan =
        seq >= 0 && !std::binary_search(committed.begin(), committed.end(), seq);
    if (temp || orphan) ::unlink(Join(dir, name).c_str());
  }
}

absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view data,
                                 const std::function<void()>& after_temp_written) {
  const std::string temp = Join(dir, absl::StrCat(".", name, ".tmp"));
  const std::string final_path = Join(dir, name);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError("cannot create", temp);
  absl::Status s = WriteAll(fd, data, temp);
  if (s.ok() && ::fsync(fd) != 0) s = OsError("cannot fsync", temp);
  if (::close(fd) != 0 && s.ok()) s = OsError("cannot close", temp);
  if (!s.ok()) {
    ::unlink(temp.c_str());
    return s;
  }
  if (after_temp_written) after_temp_written();
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    s = OsError(absl::StrCat("cannot rename ", temp, " to"), final_path);
    ::unlink(temp.c_str());
    return s;
  }
  return SyncFolder(dir);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError("cannot open", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = OsError("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::StatusOr<VerifiedFile> ReadVerified(const std::string& manifest_path,
                                          const std::string& dir) {
  VerifiedFile out;
  absl::StatusOr<std::string> text = ReadWholeFile(manifest_path);
  if (!text.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest ", text.status().message()));
  }
  SL_ASSIGN_OR_RETURN(out.manifest, ParseManifest(*text, manifest_path));
  const std::string path = Join(dir, out.manifest.data_file);
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint file ", path, " cannot be read (",
                                            bytes.status().message(), ")"));
  }
  out.bytes = *std::move(bytes);
  const int64_t size = static_cast<int64_t>(out.bytes.size());
  if (size != out.manifest.bytes) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint file %s is %s: it has %d bytes, its manifest says %d", path,
        size < out.manifest.bytes ? "truncated" : "corrupt", size, out.manifest.bytes));
  }
  const std::string digest = Sha256Hex(out.bytes);
  if (digest != out.manifest.sha256) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint file %s is corrupt: its SHA-256 is %s but its manifest "
        "says %s",
        path, digest, out.manifest.sha256));
  }
  return out;
}

void PruneCheckpoints(const std::string& dir, int keep) {
  if (keep <= 0) return;  // keep everything
  const std::vector<int64_t> seqs = ListCommitted(dir);
  if (seqs.size() <= static_cast<size_t>(keep)) return;
  for (size_t i = 0; i + keep < seqs.size(); ++i) {
    ::unlink(Join(dir, ManifestFileName(seqs[i])).c_str());
    ::unlink(Join(dir, DataFileName(seqs[i])).c_str());
  }
  (void)SyncFolder(dir);
}

}  // namespace syncline::ddp::internal

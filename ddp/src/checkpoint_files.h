// checkpoint_files.h: the on-disk side of checkpoints, free of libtorch.
//
// A checkpoint with sequence number S is two files in the checkpoint folder:
//   checkpoint-<S>.pt        the serialized state (a torch archive)
//   checkpoint-<S>.manifest  "key=value" lines: size and SHA-256 of the .pt,
//                            step, epoch, model signature hash, ...
// The manifest is written last, so a checkpoint exists ("is committed")
// exactly when its manifest does. Every file is written as
// .<name>.tmp, fsynced, renamed into place, and the folder fsynced, so a crash
// at any point leaves either the old set of checkpoints or the new one, plus
// at worst a stray temporary file that the next run removes.
//
// Only rank 0 writes; these functions know nothing about ranks.
#ifndef SYNCLINE_DDP_SRC_CHECKPOINT_FILES_H_
#define SYNCLINE_DDP_SRC_CHECKPOINT_FILES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace syncline::ddp::internal {

inline constexpr int kCheckpointFormatVersion = 1;

// Manifest
//
// The parsed form of a .manifest file.
struct Manifest {
  int format = kCheckpointFormatVersion;
  int64_t seq = 0;
  std::string data_file;  // base name of the .pt file
  int64_t bytes = 0;
  std::string sha256;
  int64_t step = 0;
  int64_t epoch = 0;
  int world_size = 0;
  std::string model_hash;  // SHA-256 of the model signature
  // The run's config (e.g. command-line flags), written as "config.<key>="
  // lines so a person can see how the checkpoint was made.
  std::vector<std::pair<std::string, std::string>> config;
};

std::string FormatManifest(const Manifest& manifest);
// InvalidArgument (naming `path`) for a missing key or a malformed value.
absl::StatusOr<Manifest> ParseManifest(absl::string_view text, absl::string_view path);

// File names for sequence number `seq`.
std::string DataFileName(int64_t seq);
std::string ManifestFileName(int64_t seq);

// Sequence numbers of the committed checkpoints in `dir` (those with a
// manifest), ascending. A missing folder is an empty list.
std::vector<int64_t> ListCommitted(const std::string& dir);

// Creates `dir` (and its parents) if needed and proves it writable by
// creating and removing a probe file. The error names the folder and the
// OS reason.
absl::Status PrepareFolder(const std::string& dir);

// Removes leftovers of interrupted saves: temporary files, and .pt files
// that have no manifest. Best effort.
void RemoveLeftovers(const std::string& dir);

// Writes `data` to dir/name atomically: temporary file, fsync, rename, fsync
// of the folder. `after_temp_written` (may be null) runs between the fsync
// and the rename; tests use it to kill the process there.
absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view data,
                                 const std::function<void()>& after_temp_written);

// The whole content of `path`; NotFound or an OS error naming the file.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// VerifiedFile
//
// A checkpoint's manifest and the bytes of its .pt, checked against each
// other.
struct VerifiedFile {
  Manifest manifest;
  std::string bytes;
};

// ReadVerified()
//
// Reads the manifest at `manifest_path` and the .pt it names (in `dir`),
// and checks size and SHA-256. DataLoss naming the file when it is missing,
// truncated or corrupt.
absl::StatusOr<VerifiedFile> ReadVerified(const std::string& manifest_path,
                                          const std::string& dir);

// Deletes all but the newest `keep` committed checkpoints (manifest first,
// so that a crash halfway leaves an orphan .pt, never a dangling manifest).
void PruneCheckpoints(const std::string& dir, int keep);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_CHECKPOINT_FILES_H_

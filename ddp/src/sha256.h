// sha256.h: SHA-256 (FIPS 180-4), for checkpoint checksums.
//
// A cryptographic hash is more than corruption detection needs, but it also
// catches a checkpoint file swapped for another one of the same size, and it
// is what `sha256sum` prints, so a person can check a file by hand against
// its manifest. Written here to keep libsyncline_ddp free of extra
// dependencies; ~200 MB/s is plenty for checkpoints of this size.
//
// Example:
//   Sha256 h;
//   h.Update(bytes);
//   std::string hex = h.HexDigest();   // 64 lowercase hex digits
#ifndef SYNCLINE_DDP_SRC_SHA256_H_
#define SYNCLINE_DDP_SRC_SHA256_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace syncline::ddp::internal {

class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view data);
  // Finishes the hash; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Compress(const uint8_t* block);

  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Sha256Hex()
//
// One-shot convenience: the hex digest of `data`.
std::string Sha256Hex(absl::string_view data);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_SHA256_H_

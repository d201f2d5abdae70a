// agreement.cc: allgather-based agreement on values and statuses.
#include "syncline/ddp/agreement.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "syncline/status.h"

namespace syncline::ddp {
namespace {

// Allgathers `bytes_per_rank` bytes from `send` into `recv` (size() blocks),
// staging through device memory for a CUDA communicator.
absl::Status AllgatherRaw(Communicator* comm, const std::string& send, std::string* recv,
                          absl::Duration timeout) {
  const size_t n = send.size();
  recv->assign(n * static_cast<size_t>(comm->size()), '\0');
  AllgatherOptions options;
  options.timeout = timeout;
  const Device device = comm->device();
  if (device.is_cpu()) {
    // The core's Allgather takes mutable views; the send block is copied.
    std::string send_copy = send;
    SL_ASSIGN_OR_RETURN(
        auto work,
        comm->Allgather(View(send_copy.data(), n, DataType::kUInt8),
                        View(recv->data(), recv->size(), DataType::kUInt8), options));
    return work->Wait();
  }
  const auto opts =
      at::TensorOptions().dtype(at::kByte).device(at::Device(at::kCUDA, device.index));
  at::Tensor dsend = at::empty({static_cast<int64_t>(n)}, opts);
  at::Tensor drecv = at::empty({static_cast<int64_t>(recv->size())}, opts);
  at::Tensor hsend = at::empty({static_cast<int64_t>(n)}, at::kByte);
  std::memcpy(hsend.data_ptr(), send.data(), n);
  dsend.copy_(hsend);
  SL_ASSIGN_OR_RETURN(
      auto work,
      comm->Allgather(View(dsend.data_ptr(), n, DataType::kUInt8, device),
                      View(drecv.data_ptr(), recv->size(), DataType::kUInt8, device),
                      options));
  SL_RETURN_IF_ERROR(work->Wait());
  at::Tensor hrecv = drecv.cpu();  // synchronizes with the op's stream
  std::memcpy(recv->data(), hrecv.data_ptr(), recv->size());
  return absl::OkStatus();
}

std::string EncodeInt64(int64_t v) {
  std::string out(sizeof(v), '\0');
  std::memcpy(out.data(), &v, sizeof(v));
  return out;
}

int64_t DecodeInt64(const char* p) {
  int64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> AllgatherInt64(Communicator* comm, int64_t local,
                                                    absl::Duration timeout) {
  if (comm == nullptr || comm->size() == 1) return std::vector<int64_t>{local};
  std::string all;
  SL_RETURN_IF_ERROR(AllgatherRaw(comm, EncodeInt64(local), &all, timeout));
  std::vector<int64_t> out(static_cast<size_t>(comm->size()));
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] = DecodeInt64(all.data() + r * sizeof(int64_t));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> AllgatherBytes(Communicator* comm,
                                                        const std::string& local,
                                                        absl::Duration timeout) {
  if (comm == nullptr || comm->size() == 1) {
    return std::vector<std::string>{local};
  }
  // Two rounds: the lengths, then the payloads padded to the longest.
  SL_ASSIGN_OR_RETURN(std::vector<int64_t> lengths,
                      AllgatherInt64(comm, static_cast<int64_t>(local.size()), timeout));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = local;
  padded.resize(static_cast<size_t>(longest), '\0');
  std::string all;
  SL_RETURN_IF_ERROR(AllgatherRaw(comm, padded, &all, timeout));
  std::vector<std::string> out(lengths.size());
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] =
        all.substr(r * static_cast<size_t>(longest), static_cast<size_t>(lengths[r]));
  }
  return out;
}

absl::Status AgreeOnStatus(Communicator* comm, const absl::Status& local,
                           absl::Duration timeout) {
  if (comm == nullptr || comm->size() == 1) return local;
  // Wire format: "<code>\n<message>".
  const std::string mine =
      absl::StrCat(static_cast<int>(local.code()), "\n", local.message());
  absl::StatusOr<std::vector<std::string>> all = AllgatherBytes(comm, mine, timeout);
  if (!all.ok()) {
    if (local.ok()) return all.status();
    return absl::Status(all.status().code(), absl::StrCat(local.message(),
                                                          " (and telling the other "
                                                          "ranks failed: ",
                                                          all.status().message(), ")"));
  }
  for (size_t r = 0; r < all->size(); ++r) {
    const std::string& entry = (*all)[r];
    const size_t nl = entry.find('\n');
    int code = 0;
    if (nl == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(entry).substr(0, nl), &code)) {
      return absl::InternalError(
          absl::StrCat("rank ", r, " sent a malformed status: '", entry, "'"));
    }
    if (code == 0) continue;
    return absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat("rank ", r, ": ", entry.substr(nl + 1)));
  }
  return absl::OkStatus();
}

}  // namespace syncline::ddp

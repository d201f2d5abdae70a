// replica_check.cc: cross-rank check of parameter count, shapes and dtypes.
#include "replica_check.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "syncline/ddp/error.h"
#include "torch_interop.h"

namespace syncline::ddp::internal {
namespace {

// One parameter as encoded on the wire: dtype, requires_grad, shape.
struct ParamMeta {
  int64_t dtype = -1;
  int64_t requires_grad = 0;
  std::vector<int64_t> sizes;
  bool operator==(const ParamMeta& o) const {
    return dtype == o.dtype && requires_grad == o.requires_grad && sizes == o.sizes;
  }
};

// [count, then per parameter: dtype, requires_grad, ndim, sizes...]
std::vector<int64_t> Encode(const std::vector<at::Tensor>& params) {
  std::vector<int64_t> out = {static_cast<int64_t>(params.size())};
  for (const at::Tensor& p : params) {
    out.push_back(static_cast<int64_t>(p.scalar_type()));
    out.push_back(p.requires_grad() ? 1 : 0);
    out.push_back(p.dim());
    for (int64_t s : p.sizes()) out.push_back(s);
  }
  return out;
}

std::vector<ParamMeta> Decode(const std::vector<int64_t>& in) {
  std::vector<ParamMeta> out;
  if (in.empty()) return out;
  size_t pos = 1;
  for (int64_t i = 0; i < in[0] && pos + 3 <= in.size(); ++i) {
    ParamMeta m;
    m.dtype = in[pos++];
    m.requires_grad = in[pos++];
    const int64_t ndim = in[pos++];
    for (int64_t d = 0; d < ndim && pos < in.size(); ++d) m.sizes.push_back(in[pos++]);
    out.push_back(std::move(m));
  }
  return out;
}

std::string Describe(const ParamMeta& m) {
  return absl::StrCat(DescribeTensor(static_cast<c10::ScalarType>(m.dtype), m.sizes),
                      m.requires_grad ? "" : " (requires_grad=false)");
}

}  // namespace

void VerifyReplicas(Communicator& comm, const std::vector<at::Tensor>& params,
                    const std::vector<std::string>& names, absl::Duration timeout) {
  const auto all =
      AllgatherInt64(comm, Encode(params), timeout, "allgather of parameter shapes");
  std::vector<std::vector<ParamMeta>> metas;
  for (const auto& encoded : all) metas.push_back(Decode(encoded));
  const std::vector<ParamMeta>& ref = metas[0];
  // The first parameter index at which some rank differs from rank 0.
  size_t first = SIZE_MAX;
  for (size_t r = 1; r < metas.size(); ++r) {
    const size_t common = std::min(ref.size(), metas[r].size());
    size_t i = 0;
    while (i < common && metas[r][i] == ref[i]) ++i;
    if (i < common || metas[r].size() != ref.size()) first = std::min(first, i);
  }
  if (first == SIZE_MAX) return;

  std::vector<int> differing;
  std::string details;
  auto at = [&](size_t r) {
    return first < metas[r].size() ? Describe(metas[r][first])
                                   : std::string("no such parameter");
  };
  for (size_t r = 1; r < metas.size(); ++r) {
    const bool differs = first >= metas[r].size() || first >= ref.size() ||
                         !(metas[r][first] == ref[first]) ||
                         metas[r].size() != ref.size();
    if (!differs) continue;
    differing.push_back(static_cast<int>(r));
    absl::StrAppend(&details, "; rank ", r, " has ", at(r), " (", metas[r].size(),
                    " parameters)");
  }
  const std::string name =
      first < names.size()
          ? "'" + names[first] + "' on rank " + std::to_string(comm.rank())
          : "(past the end on rank " + std::to_string(comm.rank()) + ")";
  throw Error(absl::StatusCode::kFailedPrecondition,
              absl::StrCat("syncline::ddp: the model differs across ranks at parameter #",
                           first, " ", name, ": rank 0 has ", at(0), " (", ref.size(),
                           " parameters)", details, ". Ranks that differ from rank 0: ",
                           absl::StrJoin(differing, ", "),
                           ". Every rank must build the same model before wrapping it."));
}

}  // namespace syncline::ddp::internal

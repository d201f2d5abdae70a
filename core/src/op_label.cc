#include "op_label.h"

#include "absl/strings/str_cat.h"
#include "syncline/communicator.h"
#include "syncline/plugin_abi.h"
#include "syncline/types.h"

namespace syncline::internal {

std::string OpLabel::WithoutWhere() const {
  const auto op_kind = static_cast<sl_op_kind_t>(kind);
  const char* kind_name = sl_op_kind_name(op_kind);
  if (kind_name == nullptr) kind_name = "op";
  const bool p2p = (seq & Communicator::kP2pSeqBit) != 0;
  std::string text = p2p ? absl::StrCat(kind_name, " p2p#", seq & ~Communicator::kP2pSeqBit)
                         : absl::StrCat(kind_name, " #", seq);
  if (op_kind == SL_OP_BARRIER) return text;
  absl::StrAppend(&text, " (", DataTypeName(static_cast<DataType>(dtype)), " x ", count);
  if (op_kind == SL_OP_ALLREDUCE || op_kind == SL_OP_REDUCE ||
      op_kind == SL_OP_REDUCE_SCATTER) {
    absl::StrAppend(&text, ", ", ReduceOpName(static_cast<ReduceOp>(redop)));
  }
  if (op_kind == SL_OP_BROADCAST || op_kind == SL_OP_REDUCE) absl::StrAppend(&text, ", root ", root);
  if (op_kind == SL_OP_SEND) absl::StrAppend(&text, ", to rank ", peer);
  if (op_kind == SL_OP_RECV) absl::StrAppend(&text, ", from rank ", peer);
  text += ")";
  return text;
}

std::string OpLabel::ToString() const {
  std::string text = WithoutWhere();
  if (where != nullptr) text += *where;
  return text;
}

}  // namespace syncline::internal

#include "op_label.h"

#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/op_format.h"

namespace syncline::internal {

std::string OpLabel::WithoutWhere() const {
  return backend::SlDescribeOp(static_cast<sl_op_kind_t>(kind), seq, dtype, count, redop, root,
                               peer, tag);
}

std::string OpLabel::ToString() const {
  std::string text = WithoutWhere();
  if (where != nullptr) text += *where;
  return text;
}

}  // namespace syncline::internal

#include "lib/runner/row_parallel.h"

#include "lib/common/status.h"

namespace gannet::runner {

absl::Status ProjectAllReduce(backend::Backend* be, backend::Collectives* tp, backend::Tensor x,
                              backend::Tensor w, backend::Tensor out, int64_t min_rows) {
  const int64_t n = x.rows();
  if (min_rows <= 0 || n < min_rows || n < 2) {
    GANNET_RETURN_IF_ERROR(be->Linear(x, w, out));
    return tp->AllReduceSum(out);
  }
  const int64_t first = n / 2, second = n - first;
  const backend::Tensor out0 = out.Rows(0, first), out1 = out.Rows(first, second);
  GANNET_RETURN_IF_ERROR(be->Linear(x.Rows(0, first), w, out0));
  GANNET_RETURN_IF_ERROR(be->OverlapCollective(
      [&] { return tp->AllReduceSum(out0); },
      [&] { return be->Linear(x.Rows(first, second), w, out1); }));
  return tp->AllReduceSum(out1);
}

}  // namespace gannet::runner

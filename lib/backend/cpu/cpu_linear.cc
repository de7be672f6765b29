// out = x @ w^T on the CPU: each task converts a block of weight rows to f32 once and reuses it
// for every input row, so bf16 weights are decoded once per call.
#include <algorithm>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"

namespace gannet::backend {

absl::Status CpuBackend::Linear(Tensor x, Tensor w, Tensor out) {
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(x, "Linear input"));
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(out, "Linear output"));
  const int64_t m = x.rows();
  const int64_t k = x.row_elems();
  const int64_t n = w.dim(0);
  if (w.row_elems() != k || out.rows() != m || out.row_elems() != n) {
    return InvalidArgumentError("Linear: x [{}, {}] @ w^T [{}, {}] -> out [{}, {}] mismatch", m, k,
                                w.dim(0), w.row_elems(), out.rows(), out.row_elems());
  }
  if (m == 0) return absl::OkStatus();
  constexpr int64_t kRowsPerTask = 16;
  const size_t wbytes = w.elem_bytes();
  pool().ParallelFor((n + kRowsPerTask - 1) / kRowsPerTask, 1, [&](int64_t b, int64_t e) {
    std::vector<float> wrows(static_cast<size_t>(kRowsPerTask * k));
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t n0 = blk * kRowsPerTask;
      const int64_t n1 = std::min(n, n0 + kRowsPerTask);
      for (int64_t j = n0; j < n1; ++j) {
        cpu::RowToF32(static_cast<const char*>(w.data) + j * k * wbytes, w.dtype, k,
                      wrows.data() + (j - n0) * k);
      }
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x.as<float>() + i * x.stride0();
        float* oi = out.as<float>() + i * out.stride0();
        for (int64_t j = n0; j < n1; ++j) oi[j] = cpu::Dot(xi, wrows.data() + (j - n0) * k, k);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace gannet::backend

// Elementwise and data-movement kernels: GeGLU, add, softcap, fill, dtype conversion, embedding
// lookup and row gather. Views are strided row-major matrices (norm.h's Mat).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/norm/norm.h"

namespace gannet::kernels {

// out = gelu_tanh(gate) * up over [rows, n].
cudaError_t LaunchGeluTanhMul(Mat gate, Mat up, Mat out, int rows, int n, cudaStream_t stream);
// out = a + b over [rows, n].
cudaError_t LaunchAdd(Mat a, Mat b, Mat out, int rows, int n, cudaStream_t stream);
// x = cap * tanh(x / cap) over [rows, n], f32.
cudaError_t LaunchSoftcap(float* x, int64_t ld, float cap, int rows, int n, cudaStream_t stream);
// Every element of [rows, n] = value, of `type` (or i32 when is_int).
cudaError_t LaunchFill(void* data, int64_t ld, int rows, int n, DType type, bool is_int,
                       float value, cudaStream_t stream);
// out = convert(x) over [rows, n] (between any of f32, bf16, f16).
cudaError_t LaunchConvert(Mat x, Mat out, int rows, int n, cudaStream_t stream);
// out[t] = table[ids[t]] * scale; ids outside [0, vocab) give zero rows (the runner validates ids
// before a step, so this is only a guard against reading outside the table).
cudaError_t LaunchEmbed(const int32_t* ids, int num_tokens,
                        const void* table /* [vocab, width] bf16 or f16, contiguous */,
                        DType table_type, int vocab, int width, float scale, Mat out,
                        cudaStream_t stream);
// out[i] = x[rows[i]] for i < count, `row_bytes` bytes each; rows outside [0, num_rows) are
// skipped.
cudaError_t LaunchGatherRows(const void* x, int64_t x_row_bytes, int num_rows, const int32_t* rows,
                             int count, void* out, int64_t out_row_bytes, int64_t row_bytes,
                             cudaStream_t stream);

}  // namespace gannet::kernels

// Elementwise kernels (elementwise.h). Grid-stride over [rows, n] with one row per blockIdx.y
// (capped) so strided column views cost nothing extra; element types are read through Mat.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/activation/elementwise.h"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mat_access.cuh"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;

// Calls f(row, col) for every element; rows beyond gridDim.y are covered by striding.
template <typename F>
__device__ __forceinline__ void ForEach(int rows, int n, F f) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      f(r, i);
    }
  }
}

dim3 GridFor(int rows, int n) {
  const int64_t x = (static_cast<int64_t>(n) + kThreads - 1) / kThreads;  // n near INT32_MAX
  return dim3(static_cast<unsigned>(x < 1 ? 1 : (x > 1024 ? 1024 : x)),
              rows < 1 ? 1 : (rows > kMaxGridY ? kMaxGridY : rows));
}

__global__ void GeluTanhMulKernel(Mat gate, Mat up, Mat out, int rows, int n) {
  PdlEnter();
  ForEach(rows, n, [&](int64_t r, int64_t i) {
    StoreAt(out, r, i, GeluTanh(LoadAt(gate, r, i)) * LoadAt(up, r, i));
  });
}

// bf16 rows of n % 8 == 0 with 16-byte aligned rows: 8 elements a thread through 16-byte loads
// and stores (the scalar kernel's 2-byte accesses ran a 64 x 21504 31B product at ~10 us from
// L2). The same per-element arithmetic and rounding as the kernel above.
__global__ void GeluTanhMulBf16x8Kernel(const bf16* __restrict__ gate, int64_t ldg,
                                        const bf16* __restrict__ up, int64_t ldu,
                                        bf16* __restrict__ out, int64_t ldo, int rows, int n8) {
  PdlEnter();
  ForEach(rows, n8, [&](int64_t r, int64_t c) {
    float g[8], u[8];
    Load8(gate + r * ldg + c * 8, g);
    Load8(up + r * ldu + c * 8, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = GeluTanh(g[j]) * u[j];
    Store8(out + r * ldo + c * 8, g);
  });
}

bool Vectorizable8(const Mat& m) {
  return m.type == DType::kBF16 && m.ld % 8 == 0 && reinterpret_cast<uintptr_t>(m.data) % 16 == 0;
}

__global__ void AddKernel(Mat a, Mat b, Mat out, int rows, int n) {
  PdlEnter();
  ForEach(rows, n,
          [&](int64_t r, int64_t i) { StoreAt(out, r, i, LoadAt(a, r, i) + LoadAt(b, r, i)); });
}

__global__ void SoftcapKernel(float* x, int64_t ld, float cap, int rows, int n) {
  PdlEnter();
  ForEach(rows, n, [&](int64_t r, int64_t i) {
    float& v = x[r * ld + i];
    v = tanhf(v / cap) * cap;
  });
}

__global__ void FillKernel(void* data, int64_t ld, int rows, int n, DType type, bool is_int,
                           float value) {
  PdlEnter();
  ForEach(rows, n, [&](int64_t r, int64_t i) {
    if (is_int) {
      static_cast<int32_t*>(data)[r * ld + i] = static_cast<int32_t>(value);
    } else if (type == DType::kF32) {
      static_cast<float*>(data)[r * ld + i] = value;
    } else if (type == DType::kF16) {
      static_cast<f16*>(data)[r * ld + i] = SaturateToF16(value);
    } else {
      static_cast<bf16*>(data)[r * ld + i] = __float2bfloat16_rn(value);
    }
  });
}

__global__ void ConvertKernel(Mat x, Mat out, int rows, int n) {
  PdlEnter();
  ForEach(rows, n, [&](int64_t r, int64_t i) { StoreAt(out, r, i, LoadAt(x, r, i)); });
}

__global__ void EmbedKernel(const int32_t* ids, Mat table, int vocab, int width, float scale,
                            Mat out, int rows) {
  PdlEnter();
  ForEach(rows, width, [&](int64_t t, int64_t i) {
    const int id = ids[t];
    const float v = id >= 0 && id < vocab ? LoadAt(table, id, i) : 0.f;
    StoreAt(out, t, i, v * scale);
  });
}

__global__ void GatherRowsKernel(const char* x, int64_t x_row_bytes, int num_rows,
                                 const int32_t* rows, char* out, int64_t out_row_bytes,
                                 int64_t row_bytes) {
  PdlEnter();
  const int i = blockIdx.x;
  const int r = rows[i];
  if (r < 0 || r >= num_rows) return;
  const char* src = x + r * x_row_bytes;
  char* dst = out + i * out_row_bytes;
  for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) dst[b] = src[b];
}

}  // namespace

cudaError_t LaunchGeluTanhMul(Mat gate, Mat up, Mat out, int rows, int n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  if (n % 8 == 0 && Vectorizable8(gate) && Vectorizable8(up) && Vectorizable8(out)) {
    Launch(GeluTanhMulBf16x8Kernel, GridFor(rows, n / 8), kThreads, 0, stream,
           static_cast<const bf16*>(gate.data), gate.ld, static_cast<const bf16*>(up.data), up.ld,
           static_cast<bf16*>(out.data), out.ld, rows, n / 8);
    return cudaGetLastError();
  }
  Launch(GeluTanhMulKernel, GridFor(rows, n), kThreads, 0, stream, gate, up, out, rows, n);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(Mat a, Mat b, Mat out, int rows, int n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  Launch(AddKernel, GridFor(rows, n), kThreads, 0, stream, a, b, out, rows, n);
  return cudaGetLastError();
}

cudaError_t LaunchSoftcap(float* x, int64_t ld, float cap, int rows, int n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  Launch(SoftcapKernel, GridFor(rows, n), kThreads, 0, stream, x, ld, cap, rows, n);
  return cudaGetLastError();
}

cudaError_t LaunchFill(void* data, int64_t ld, int rows, int n, DType type, bool is_int,
                       float value, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  Launch(FillKernel, GridFor(rows, n), kThreads, 0, stream, data, ld, rows, n, type, is_int, value);
  return cudaGetLastError();
}

cudaError_t LaunchConvert(Mat x, Mat out, int rows, int n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  Launch(ConvertKernel, GridFor(rows, n), kThreads, 0, stream, x, out, rows, n);
  return cudaGetLastError();
}

cudaError_t LaunchEmbed(const int32_t* ids, int num_tokens, const void* table, DType table_type,
                        int vocab, int width, float scale, Mat out, cudaStream_t stream) {
  if (num_tokens == 0) return cudaSuccess;
  const Mat t{const_cast<void*>(table), table_type, width};
  Launch(EmbedKernel, GridFor(num_tokens, width), kThreads, 0, stream, ids, t, vocab, width, scale,
         out, num_tokens);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(const void* x, int64_t x_row_bytes, int num_rows, const int32_t* rows,
                             int count, void* out, int64_t out_row_bytes, int64_t row_bytes,
                             cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  Launch(GatherRowsKernel, count, kThreads, 0, stream, static_cast<const char*>(x), x_row_bytes,
         num_rows, rows, static_cast<char*>(out), out_row_bytes, row_bytes);
  return cudaGetLastError();
}

}  // namespace gannet::kernels

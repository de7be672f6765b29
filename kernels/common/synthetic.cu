// The synthetic-weight generator of lib/model/synthetic.h, on the GPU. Every float operation is
// written with explicit round-to-nearest intrinsics so nvcc cannot contract it into an FMA: the
// CPU generator (x86-64, no FMA) rounds each product and sum separately, and the values must
// match bit for bit. The double-precision log/cos may differ from glibc's by an ulp, which moves
// the float result only when it lies within ~2^-29 of a rounding boundary (then rarely the bf16).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/common/synthetic.h"

namespace gannet::kernels {
namespace {

__device__ __forceinline__ uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float Normal(uint64_t key, int64_t index) {
  const uint64_t a = SplitMix(key ^ (static_cast<uint64_t>(index) * 2 + 1));
  const uint64_t b = SplitMix(a ^ 0x5851f42d4c957f2dull);
  const double u1 = __dadd_rn(static_cast<double>(a >> 11), 0.5) / 9007199254740992.0;
  const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
  const double r = sqrt(__dmul_rn(-2.0, log(u1)));
  return static_cast<float>(__dmul_rn(r, cos(__dmul_rn(6.283185307179586, u2))));
}

__device__ __forceinline__ float Uniform(uint64_t key, int64_t index) {
  return static_cast<float>(
      static_cast<double>(SplitMix(key ^ (static_cast<uint64_t>(index) * 2 + 1)) >> 11) /
      9007199254740992.0);
}

__global__ void FillSyntheticKernel(void* out, DType out_type, int64_t offset, int64_t count,
                                    uint64_t key, SyntheticInit init, float mat_scale,
                                    float qk_scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t idx = offset + i;
    float v = 0.f;
    switch (init) {
      case SyntheticInit::kMatrix:
        v = __fmul_rn(Normal(key, idx), mat_scale);
        break;
      case SyntheticInit::kEmbedding:
        v = __fmul_rn(__fmul_rn(Normal(key, idx), 2.0f), mat_scale);
        break;
      case SyntheticInit::kNorm:
        v = __fadd_rn(1.0f, __fmul_rn(0.25f, Normal(key, idx)));
        break;
      case SyntheticInit::kQkNorm:
        v = __fdiv_rn(__fadd_rn(1.0f, __fmul_rn(0.25f, Normal(key, idx))), qk_scale);
        break;
      case SyntheticInit::kLayerScalar:
        v = __fadd_rn(0.6f, __fmul_rn(0.4f, Uniform(key, idx)));
        break;
      case SyntheticInit::kPositiveScale:
        v = __fadd_rn(0.5f, Uniform(key, idx));
        break;
      case SyntheticInit::kPermutation:
        v = 0.f;
        break;
    }
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    if (out_type == DType::kF32) {
      static_cast<float*>(out)[i] = __bfloat162float(h);
    } else if (out_type == DType::kF16) {
      static_cast<__half*>(out)[i] = __float2half_rn(__bfloat162float(h));
    } else {
      static_cast<__nv_bfloat16*>(out)[i] = h;
    }
  }
}

}  // namespace

cudaError_t LaunchFillSynthetic(void* out, DType out_type, int64_t offset, int64_t count,
                                uint64_t key, SyntheticInit init, int64_t fan_in,
                                cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (fan_in <= 0) return cudaErrorInvalidValue;
  // Host float math, as the CPU generator: 1 / sqrt(float(fan_in)) and sqrt(sqrt(float(fan_in))).
  const float f = static_cast<float>(fan_in);
  const float mat_scale = 1.0f / std::sqrt(f);
  const float qk_scale = std::sqrt(std::sqrt(f));
  const int64_t blocks64 = (count + 255) / 256;
  const int blocks = static_cast<int>(blocks64 < 65536 ? blocks64 : 65536);
  FillSyntheticKernel<<<blocks, 256, 0, stream>>>(out, out_type, offset, count, key, init,
                                                  mat_scale, qk_scale);
  return cudaGetLastError();
}

}  // namespace gannet::kernels

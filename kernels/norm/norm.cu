// RMSNorm kernels (norm.h): one CTA per row, f32 statistics, fixed-order block reductions (so
// results are run-to-run reproducible). The generic kernels read rows twice (statistics, then
// output; the second read hits L1/L2). The decode-path PostNormResidual (bf16 x, f32 residual,
// hidden <= 8192) keeps its row in registers instead: at batch 1 a single CTA does the whole op,
// and a loop of dependent L2 round trips cost ~20 us per call where one batch of loads costs ~3.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mat_access.cuh"
#include "kernels/norm/norm.h"
#include "kernels/norm/post_norm_residual_row.cuh"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(Mat x, const float* w, float eps, Mat out, int n) {
  PdlEnter();
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = LoadAt(x, row, i);
    ss += v * v;
  }
  const float inv = InvRms(BlockSum(ss, red), n, eps);
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = LoadAt(x, row, i) * inv;
    StoreAt(out, row, i, w ? v * w[i] : v);
  }
}

__global__ void __launch_bounds__(kThreads)
    PostNormResidualKernel(Mat x, const float* post_w, Mat res, const float* scalar,
                           const float* next_w, Mat next_out, float eps, int n) {
  PdlEnter();
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = LoadAt(x, row, i);
    ss += v * v;
  }
  const float inv = InvRms(BlockSum(ss, red), n, eps);
  const float s = scalar ? *scalar : 1.0f;
  float ss2 = 0.f;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float r = LoadAt(res, row, i) + (LoadAt(x, row, i) * inv) * post_w[i];
    if (scalar) r *= s;
    StoreAt(res, row, i, r);
    // Statistics of the stored value (what the next layer will read back).
    const float stored = LoadAt(res, row, i);
    ss2 += stored * stored;
  }
  if (next_out.data == nullptr) return;
  const float inv2 = InvRms(BlockSum(ss2, red), n, eps);
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = LoadAt(res, row, i) * inv2;  // this thread's own store: no barrier needed
    StoreAt(next_out, row, i, next_w ? v * next_w[i] : v);
  }
}

// Row-in-registers PostNormResidual for an f32 residual with bf16 x and bf16 (or no) next output,
// or (the fp16 path) f32 x and fp16 (or no) next output: every
// load of the row is issued before the first reduction, each thread owning kPer elements
// i = threadIdx.x + k * kRegThreads.
constexpr int kRegThreads = kPostNormRowThreads;

template <int kPer, typename XT, typename OT>
__global__ void __launch_bounds__(kRegThreads)
    PostNormResidualRegKernel(const XT* __restrict__ x, int64_t ldx,
                              const float* __restrict__ post_w, float* __restrict__ res,
                              int64_t ldr, const float* __restrict__ scalar,
                              const float* __restrict__ next_w, OT* __restrict__ next_out,
                              int64_t ldo, float eps, int n) {
  const PostNormConsts<kPer> c = LoadPostNormConsts<kPer>(post_w, scalar, next_w, n);
  PdlEnter();
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float xv[kPer], rv[kPer];
  LoadRowElems(x, ldx, row, n, xv);
  LoadRowElems(res, ldr, row, n, rv);
  PostNormResidualRow<kPer>(xv, rv, c, res + row * ldr,
                            next_out == nullptr ? nullptr : next_out + row * ldo, eps, n, red);
}

// Row-in-registers RmsNorm for decode rows (rows <= kRegMaxRows, 1024 <= n <= 8 * kRegThreads):
// one CTA of kRegThreads per row issues every load of its row, and of the weight (constant: read
// before PdlEnter, while the previous kernel drains), before the one reduction. The generic
// kernel's two dependent passes cost a batch-1 26B-A4B step ~7.6 us per call (3 per layer).
constexpr int kRegMaxRows = 64;

template <int kPer>
__global__ void __launch_bounds__(kRegThreads)
    RmsNormRegKernel(Mat x, const float* __restrict__ w, float eps, Mat out, int n) {
  float wv[kPer];
  LoadNormWeight(w, n, wv);
  PdlEnter();
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * kRegThreads;
    v[k] = i < n ? LoadAt(x, row, i) : 0.f;
  }
  const float inv = RowInvRms(v, n, eps, red);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * kRegThreads;
    if (i < n) StoreAt(out, row, i, (v[k] * inv) * wv[k]);
  }
}

template <typename XT, typename OT>
cudaError_t LaunchPostNormResidualReg(Mat x, const float* post_w, Mat res, const float* scalar,
                                      const float* next_w, Mat next_out, float eps, int rows, int n,
                                      cudaStream_t stream) {
  return WithRowPer(n, [&](auto per) {
    Launch(PostNormResidualRegKernel<decltype(per)::value, XT, OT>, rows, kRegThreads, 0, stream,
           static_cast<const XT*>(x.data), x.ld, post_w, static_cast<float*>(res.data), res.ld,
           scalar, next_w, static_cast<OT*>(next_out.data), next_out.ld, eps, n);
    return cudaGetLastError();
  });
}

// RmsNorm(a) * a_w + RmsNorm(b) * b_w, rounded as RmsNormRegKernel and AddKernel round (the same
// weight loads and row statistics as RmsNormRegKernel), then the PostNormResidual row arithmetic.
template <int kPer>
__global__ void __launch_bounds__(kRegThreads)
    NormAddPostNormResidualKernel(const bf16* __restrict__ a, int64_t lda,
                                  const float* __restrict__ a_w, const bf16* __restrict__ b,
                                  int64_t ldb, const float* __restrict__ b_w,
                                  const float* __restrict__ post_w, float* res, int64_t ldr,
                                  const float* scalar, const float* next_w, bf16* next_out,
                                  int64_t ldo, float eps, int n) {
  float wa[kPer], wb[kPer];  // constants: read while the previous kernel drains
  LoadNormWeight(a_w, n, wa);
  LoadNormWeight(b_w, n, wb);
  const PostNormConsts<kPer> c = LoadPostNormConsts<kPer>(post_w, scalar, next_w, n);
  PdlEnter();
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float va[kPer], vb[kPer], rv[kPer];
  LoadRowElems(a, lda, row, n, va);
  LoadRowElems(b, ldb, row, n, vb);
  LoadRowElems(res, ldr, row, n, rv);
  const float inva = RowInvRms(va, n, eps, red);
  const float invb = RowInvRms(vb, n, eps, red);
  float xv[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const float na = ToFloat(FromFloat<bf16>((va[k] * inva) * wa[k]));
    const float nb = ToFloat(FromFloat<bf16>((vb[k] * invb) * wb[k]));
    xv[k] = threadIdx.x + k * kRegThreads < n ? ToFloat(FromFloat<bf16>(na + nb)) : 0.f;
  }
  PostNormResidualRow<kPer>(xv, rv, c, res + row * ldr,
                            next_out == nullptr ? nullptr : next_out + row * ldo, eps, n, red);
}

__global__ void __launch_bounds__(kThreads)
    PleCombineKernel(Mat proj, Mat tok, const float* w, float proj_scale, float combine_scale,
                     float eps, Mat out, int group, int num_groups) {
  PdlEnter();
  // One warp per (row, group): blockIdx.x = row, blockIdx.y * 8 + warp = group.
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int g = blockIdx.y * (kThreads / 32) + (threadIdx.x >> 5);
  if (g >= num_groups) return;
  const int base = g * group;
  float ss = 0.f;
  for (int i = lane; i < group; i += 32) {
    const float v = LoadAt(proj, row, base + i) * proj_scale;
    ss += v * v;
  }
  const float inv = InvRms(WarpSum(ss), group, eps);
  for (int i = lane; i < group; i += 32) {
    const float v = LoadAt(proj, row, base + i) * proj_scale;
    StoreAt(out, row, base + i, ((v * inv) * w[i] + LoadAt(tok, row, base + i)) * combine_scale);
  }
}

}  // namespace

cudaError_t LaunchRmsNorm(Mat x, const float* weight, float eps, Mat out, int rows, int n,
                          cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows <= kRegMaxRows && n >= 1024 && n <= 8 * kRegThreads) {
    return WithRowPer(n, [&](auto per) {
      return Launch(RmsNormRegKernel<decltype(per)::value>, rows, kRegThreads, 0, stream, x, weight,
                    eps, out, n);
    });
  }
  Launch(RmsNormKernel, rows, kThreads, 0, stream, x, weight, eps, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchPostNormResidual(Mat x, const float* post_w, Mat residual, const float* scalar,
                                   const float* next_w, Mat next_out, float eps, int rows, int n,
                                   cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const bool no_next = next_out.data == nullptr;
  if (residual.type == DType::kF32 && n <= 8 * kRegThreads) {
    if (x.type == DType::kBF16 && (no_next || next_out.type == DType::kBF16)) {
      return LaunchPostNormResidualReg<bf16, bf16>(x, post_w, residual, scalar, next_w, next_out,
                                                   eps, rows, n, stream);
    }
    if (x.type == DType::kF32 && (no_next || next_out.type == DType::kF16)) {
      return LaunchPostNormResidualReg<float, f16>(x, post_w, residual, scalar, next_w, next_out,
                                                   eps, rows, n, stream);
    }
  }
  Launch(PostNormResidualKernel, rows, kThreads, 0, stream, x, post_w, residual, scalar, next_w,
         next_out, eps, n);
  return cudaGetLastError();
}

bool NormAddPostNormResidualFuses(int64_t rows, int64_t n) {
  // Where LaunchRmsNorm and LaunchPostNormResidual take their row-in-registers kernels.
  return rows >= 1 && rows <= kRegMaxRows && n >= 1024 && n <= 8 * kRegThreads;
}

cudaError_t LaunchNormAddPostNormResidual(Mat a, const float* a_w, Mat b, const float* b_w,
                                          const float* post_w, Mat residual, const float* scalar,
                                          const float* next_w, Mat next_out, float eps, int rows,
                                          int n, cudaStream_t stream) {
  if (!NormAddPostNormResidualFuses(rows, n) || a.type != DType::kBF16 || b.type != DType::kBF16 ||
      residual.type != DType::kF32 || (next_out.data != nullptr && next_out.type != DType::kBF16)) {
    return cudaErrorInvalidValue;
  }
  return WithRowPer(n, [&](auto per) {
    return Launch(NormAddPostNormResidualKernel<decltype(per)::value>, rows, kRegThreads, 0, stream,
                  static_cast<const bf16*>(a.data), a.ld, a_w, static_cast<const bf16*>(b.data),
                  b.ld, b_w, post_w, static_cast<float*>(residual.data), residual.ld, scalar,
                  next_w, static_cast<bf16*>(next_out.data), next_out.ld, eps, n);
  });
}

cudaError_t LaunchPleCombine(Mat proj, Mat token_part, const float* norm_w, float proj_scale,
                             float combine_scale, float eps, Mat out, int rows, int width,
                             int group, cudaStream_t stream) {
  if (group <= 0 || width % group != 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const int groups = width / group;
  dim3 grid(rows, (groups + kThreads / 32 - 1) / (kThreads / 32));
  Launch(PleCombineKernel, grid, kThreads, 0, stream, proj, token_part, norm_w, proj_scale,
         combine_scale, eps, out, group, groups);
  return cudaGetLastError();
}

}  // namespace gannet::kernels

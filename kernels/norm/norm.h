// RMSNorm family (Gemma-4: y = x / sqrt(mean(x^2) + eps) * w, plain w) and the PLE combine.
// Host-callable declarations; element types are bf16 or f16 (activations) or f32 (residual stream,
// norm inputs of the fp16 path, logits); norm weights are always f32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/mat.h"

namespace gannet::kernels {

// out[r] = RmsNorm(x[r]) (* weight if not null); rows of n elements. x and out may alias.
cudaError_t LaunchRmsNorm(Mat x, const float* weight, float eps, Mat out, int rows, int n,
                          cudaStream_t stream);

// residual[r] = (residual[r] + RmsNorm(x[r]) * post_w) * (*scalar if not null);
// then, if next_out.data: next_out[r] = RmsNorm(residual[r]) (* next_w if not null).
cudaError_t LaunchPostNormResidual(Mat x, const float* post_w, Mat residual, const float* scalar,
                                   const float* next_w, Mat next_out, float eps, int rows, int n,
                                   cudaStream_t stream);

// PostNormResidual (above) of RmsNorm(a[r]) * a_w + RmsNorm(b[r]) * b_w, each rounded to bf16 as
// the separate RmsNorm and Add kernels round it: the four kernels' bits in one. bf16 a and b,
// f32 residual, bf16 next_out (or none); only where NormAddPostNormResidualFuses(rows, n), which
// is where those kernels take their row-in-registers forms.
bool NormAddPostNormResidualFuses(int64_t rows, int64_t n);
cudaError_t LaunchNormAddPostNormResidual(Mat a, const float* a_w, Mat b, const float* b_w,
                                          const float* post_w, Mat residual, const float* scalar,
                                          const float* next_w, Mat next_out, float eps, int rows,
                                          int n, cudaStream_t stream);

// out = (RmsNorm(proj * proj_scale) * norm_w + token_part) * combine_scale over each group of
// `group` columns (the per-layer inputs of E2B/E4B); rows of `width` = N * group elements.
cudaError_t LaunchPleCombine(Mat proj, Mat token_part, const float* norm_w, float proj_scale,
                             float combine_scale, float eps, Mat out, int rows, int width,
                             int group, cudaStream_t stream);

}  // namespace gannet::kernels

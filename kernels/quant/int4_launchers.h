// The per-kernel launchers behind LaunchInt4Linear (int4_linear.cc checks the arguments first).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/quant/int4_linear.h"

namespace gannet::kernels::int4 {

cudaError_t LaunchMmaGemv(const Int4LinearParams& p, cudaStream_t stream);
cudaError_t LaunchMmaGemm(const Int4LinearParams& p, cudaStream_t stream);
cudaError_t LaunchSimt(const Int4LinearParams& p, cudaStream_t stream);

}  // namespace gannet::kernels::int4

// Which CUDA errors mean device loss (host code only: runs without a GPU).
#include "gtest/gtest.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/common/status.h"

namespace gannet::backend {
namespace {

TEST(CudaStatusTest, StickyErrorsAreDeviceLostOthersAreNot) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable,
                        cudaErrorMisalignedAddress, cudaErrorAssert}) {
    const absl::Status st = CudaErrorStatus(e, "k<<<>>>", "file.cc", 1);
    EXPECT_TRUE(IsDeviceLost(st)) << st;
    EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  }
  for (cudaError_t e : {cudaErrorInvalidValue, cudaErrorMemoryAllocation,
                        cudaErrorInvalidConfiguration, cudaErrorNoKernelImageForDevice}) {
    EXPECT_FALSE(IsDeviceLost(CudaErrorStatus(e, "x", "f", 1))) << cudaGetErrorName(e);
  }
}

}  // namespace
}  // namespace gannet::backend

#include "lib/backend/collectives.h"

#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {

absl::Status Collectives::AllReducePostNormResidual(Backend& be, Tensor x, Tensor post_weight,
                                                    Tensor residual, Tensor scalar,
                                                    Tensor next_weight, Tensor next_out,
                                                    float eps) {
  GANNET_RETURN_IF_ERROR(AllReduceSum(x));
  return be.PostNormResidual(x, post_weight, residual, scalar, next_weight, next_out, eps);
}

}  // namespace gannet::backend

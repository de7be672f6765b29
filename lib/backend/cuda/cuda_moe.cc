// MoE router and experts of the CUDA backend: the router is one fused kernel; the experts go
// through the registry (per-pair GEMVs for a few tokens, grouped tensor-core GEMMs otherwise).
#include <algorithm>
#include <tuple>

#include "kernels/moe/moe.h"
#include "kernels/moe/moe_entries.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"

namespace gannet::backend {

absl::Status CudaBackend::MoeRoute(const MoeRouteArgs& a) {
  GANNET_RETURN_IF_ERROR(CheckMoeRouteShapes(a));
  GANNET_RETURN_IF_ERROR(RequireDType(a.x, DType::kF32, "MoeRoute x (the f32 residual)"));
  GANNET_RETURN_IF_ERROR(RequireMatrixDType(a.router_proj, "MoeRoute router_proj"));
  GANNET_RETURN_IF_ERROR(RequireDType(a.router_scale, DType::kF32, "MoeRoute router_scale"));
  GANNET_RETURN_IF_ERROR(
      RequireDType(a.per_expert_scale, DType::kF32, "MoeRoute per_expert_scale"));
  GANNET_RETURN_IF_ERROR(RequireDType(a.topk_ids, DType::kI32, "MoeRoute topk_ids"));
  GANNET_RETURN_IF_ERROR(RequireDType(a.topk_weights, DType::kF32, "MoeRoute topk_weights"));
  const int64_t tokens = a.x.rows(), hidden = a.x.row_elems(), experts = a.router_proj.dim(0);
  if (a.top_k > 32 || experts > 256) {  // [1, E] checked above
    return InvalidArgumentError("MoeRoute: top_k {} with {} experts (kernel limits: 32 of 256)",
                                a.top_k, experts);
  }
  if (hidden % 8 != 0) {
    return InvalidArgumentError("MoeRoute: hidden {} must be a multiple of 8 (the kernel's loads)",
                                hidden);
  }
  GANNET_RETURN_IF_ERROR(CheckInt32("MoeRoute", {{"tokens", tokens}, {"hidden", hidden}}));
  kernels::MoeRouteParams p;
  p.x = a.x.as<float>();
  p.ldx = a.x.stride0();
  p.router_scale = a.router_scale.as<float>();
  p.router_proj = a.router_proj.data;
  p.router_type = a.router_proj.dtype;  // bf16 or f16; the kernel refuses others
  p.per_expert_scale = a.per_expert_scale.as<float>();
  p.topk_ids = a.topk_ids.as<int32_t>();
  p.topk_weights = a.topk_weights.as<float>();
  p.num_tokens = static_cast<int>(tokens);
  p.hidden = static_cast<int>(hidden);
  p.num_experts = static_cast<int>(experts);
  p.top_k = a.top_k;
  p.eps = a.eps;
  GANNET_ASSIGN_OR_RETURN(void* ws,
                          Workspace(WorkspaceId::kMoeRoute,
                                    kernels::MoeRouteWorkspaceBytes(p.num_tokens, p.num_experts)));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchMoeRoute(p, ws, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::MoeExperts(const MoeExpertsArgs& a) {
  // x and the weights share one type: bf16, or f16 on the fp16 compute path, where out is f32
  // (it feeds post_feedforward_layernorm_2).
  GANNET_RETURN_IF_ERROR(RequireMatrixDType(a.x, "MoeExperts x"));
  for (const Tensor* t : {&a.gate_up, &a.down}) {
    GANNET_RETURN_IF_ERROR(RequireDType(*t, a.x.dtype, "MoeExperts weights (x's type)"));
  }
  const bool f16_path = a.x.dtype == DType::kF16;
  GANNET_RETURN_IF_ERROR(
      RequireDType(a.out, f16_path ? DType::kF32 : DType::kBF16,
                   f16_path ? "MoeExperts out (f16 x)" : "MoeExperts out (bf16 x)"));
  GANNET_RETURN_IF_ERROR(RequireDType(a.topk_ids, DType::kI32, "MoeExperts topk_ids"));
  GANNET_RETURN_IF_ERROR(RequireDType(a.topk_weights, DType::kF32, "MoeExperts topk_weights"));
  const int64_t tokens = a.x.rows(), hidden = a.x.row_elems();
  const int64_t experts = a.gate_up.dim(0), inter = a.gate_up.dim(1) / 2;
  GANNET_RETURN_IF_ERROR(CheckMoeExpertsShapes(a));
  GANNET_RETURN_IF_ERROR(
      CheckInt32("MoeExperts", {{"token-expert pairs", tokens * a.topk_ids.row_elems()},
                                {"hidden", hidden},
                                {"intermediate", inter},
                                {"experts", experts}}));
  kernels::MoeExpertsParams p;
  p.w_type = f16_path ? DType::kF16 : DType::kBF16;
  p.out_type = f16_path ? DType::kF32 : DType::kBF16;
  p.x = a.x.data;
  p.ldx = a.x.stride0();
  p.topk_ids = a.topk_ids.as<int32_t>();
  p.topk_weights = a.topk_weights.as<float>();
  p.gate_up = a.gate_up.data;
  p.down = a.down.data;
  p.out = a.out.data;
  p.ldo = a.out.stride0();
  p.num_tokens = static_cast<int>(tokens);
  p.hidden = static_cast<int>(hidden);
  p.inter = static_cast<int>(inter);
  p.num_experts = static_cast<int>(experts);
  p.expert_begin = a.expert_begin;
  p.top_k = static_cast<int>(a.topk_ids.row_elems());
  const kernels::ProblemKey pk = kernels::MoeExpertsProblem(p);
  // Cache per problem class; the M limit of the decode entry makes the token count part of it
  // (every count up to the limit, and one class above it).
  const auto key = std::make_tuple(
      static_cast<int>(kernels::Op::kMoeExperts), pk.n, pk.k, pk.num_experts, pk.top_k, 0,
      std::min(pk.num_tokens, kernels::kMoePairGemvMaxTokens + 1), static_cast<int>(pk.flags),
      static_cast<int>(pk.kv_type), static_cast<int>(pk.in_type));
  const kernels::KernelEntry* entry = nullptr;
  if (auto it = chosen_.find(key); it != chosen_.end()) {
    entry = it->second;
  } else {
    const kernels::Selection sel = kernels::Select(pk, device_);
    if (sel.entry == nullptr) return InvalidArgumentError("MoeExperts: {}", sel.error);
    entry = chosen_[key] = sel.entry;
  }
  void* ws = nullptr;
  const size_t bytes = entry->workspace_bytes(pk, device_);
  if (bytes > 0) {
    GANNET_ASSIGN_OR_RETURN(ws, Workspace(WorkspaceId::kMoeExperts, bytes));
  }
  GANNET_CUDA_RETURN_IF_ERROR(entry->launch(&p, pk, device_, ws, stream_));
  return absl::OkStatus();
}

}  // namespace gannet::backend

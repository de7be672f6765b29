#include "kernels/moe/moe_entries.h"

#include <cstdint>

namespace gannet::kernels {
namespace {

KernelStatus MoeCanImplement(const ProblemKey& pk, const DeviceInfo&) {
  if (pk.k % 8 != 0 || pk.n % 8 != 0)
    return KernelStatus::Fail("hidden and inter must be multiples of 8");
  // num_experts counts the experts held here (fewer than top_k under expert parallelism).
  if (pk.top_k < 1 || pk.top_k > 256) return KernelStatus::Fail("bad top_k");
  if (pk.num_experts > 1024) return KernelStatus::Fail("more than 1024 experts");
  return KernelStatus::Ok();
}

size_t GroupedWorkspace(const ProblemKey& pk, const DeviceInfo&) {
  return MoeGroupedWorkspaceBytes(MoeParamsOfProblem(pk));
}
size_t PairWorkspace(const ProblemKey& pk, const DeviceInfo&) {
  return MoePairGemvWorkspaceBytes(MoeParamsOfProblem(pk));
}
cudaError_t GroupedLaunch(const void* args, const ProblemKey&, const DeviceInfo&, void* ws,
                          cudaStream_t stream) {
  return LaunchMoeGrouped(*static_cast<const MoeExpertsParams*>(args), ws, stream);
}
cudaError_t GroupedSm75Launch(const void* args, const ProblemKey&, const DeviceInfo&, void* ws,
                              cudaStream_t stream) {
  return LaunchMoeGroupedSm75(*static_cast<const MoeExpertsParams*>(args), ws, stream);
}
cudaError_t PairLaunch(const void* args, const ProblemKey&, const DeviceInfo&, void* ws,
                       cudaStream_t stream) {
  return LaunchMoePairGemv(*static_cast<const MoeExpertsParams*>(args), ws, stream);
}

// t: the activations' and weights' type (the key's in_type and kv_type).
ProblemPredicate MoePredicate(int max_m, DType t = DType::kBF16) {
  ProblemPredicate p;
  p.in_type = t;
  p.kv_type = t;
  p.max_m = max_m;
  p.required_flags = kFlagAligned16;
  return p;
}

}  // namespace

const KernelEntry kSm80MoeGroupedGemm = {
    "sm80_moe_grouped_bf16", Op::kMoeExperts,  80,           1000, MoePredicate(0), 0,
    MoeCanImplement,         GroupedWorkspace, GroupedLaunch};
const KernelEntry kSm75MoeGroupedGemm = {
    "sm75_moe_grouped_bf16", Op::kMoeExperts,  75, 1000, MoePredicate(0), 0, MoeCanImplement,
    GroupedWorkspace,        GroupedSm75Launch};
const KernelEntry kSm70MoePairGemv = {"sm70_moe_pair_gemv_bf16",
                                      Op::kMoeExperts,
                                      70,
                                      1000,
                                      MoePredicate(kMoePairGemvMaxTokens),
                                      0,
                                      MoeCanImplement,
                                      PairWorkspace,
                                      PairLaunch};
// The same GEMVs for any number of tokens: Volta's only MoE kernel above 24 tokens (no grouped
// tensor-core kernel runs on sm_70). Every newer arch ranks its grouped kernel above it.
const KernelEntry kSm70MoePairGemvAnyM = {"sm70_moe_pair_gemv_any_bf16",
                                          Op::kMoeExperts,
                                          70,
                                          1000,
                                          MoePredicate(0),
                                          0,
                                          MoeCanImplement,
                                          PairWorkspace,
                                          PairLaunch};
// The fp16 compute path: f16 activations and weights, f32 out (it feeds post_ff_norm_2).
const KernelEntry kSm70MoePairGemvF16 = {"sm70_moe_pair_gemv_f16",
                                         Op::kMoeExperts,
                                         70,
                                         1000,
                                         MoePredicate(kMoePairGemvMaxTokens, DType::kF16),
                                         0,
                                         MoeCanImplement,
                                         PairWorkspace,
                                         PairLaunch};
const KernelEntry kSm70MoePairGemvAnyMF16 = {"sm70_moe_pair_gemv_any_f16",
                                             Op::kMoeExperts,
                                             70,
                                             1000,
                                             MoePredicate(0, DType::kF16),
                                             0,
                                             MoeCanImplement,
                                             PairWorkspace,
                                             PairLaunch};

ProblemKey MoeExpertsProblem(const MoeExpertsParams& p) {
  ProblemKey pk;
  pk.op = Op::kMoeExperts;
  pk.in_type = pk.kv_type = p.w_type;  // the activations are in the weights' type
  pk.out_type = p.out_type;
  pk.num_tokens = p.num_tokens;
  pk.n = p.inter;
  pk.k = p.hidden;
  pk.num_experts = p.num_experts;
  pk.top_k = p.top_k;
  auto aligned = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  if (aligned(p.x) && aligned(p.out) && aligned(p.gate_up) && aligned(p.down) && p.ldx % 8 == 0 &&
      p.ldo % 8 == 0) {
    pk.flags |= kFlagAligned16;
  }
  return pk;
}

MoeExpertsParams MoeParamsOfProblem(const ProblemKey& pk) {
  MoeExpertsParams p;
  p.num_tokens = pk.num_tokens;
  p.inter = pk.n;
  p.hidden = pk.k;
  p.num_experts = pk.num_experts;
  p.top_k = pk.top_k;
  return p;
}

}  // namespace gannet::kernels

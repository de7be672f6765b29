// QkvPrep fused into the decode attention (kernels::AttentionPrep). At batch 1 the prep kernel is
// a link of the layer's dependent chain of its own (a launch, a wait, a load and a store round
// trip, then the attention's load of what it stored: 2-3 us of an E2B layer's ~57); the sm80
// decode kernels (sm_75 up) do its work on their own rows instead. Every other pairing runs the
// two ops apart: a step that is not all decode rows, an FP8 cache, the fp16 path, a kernel without
// the prep (Volta's, the CUDA-core one), arguments that do not pair up.
#include <cstdlib>
#include <cstring>
#include <algorithm>

#include "kernels/attention/attention_entries.h"
#include "lib/backend/cuda/attention_split.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"

namespace gannet::backend {
namespace {

// A/B only (GANNET_ATTN_PREP=0): the prep kernel and the attention apart.
bool FusedPrepOff() {
  static const bool off = [] {
    const char* env = std::getenv("GANNET_ATTN_PREP");
    return env != nullptr && std::strcmp(env, "0") == 0;
  }();
  return off;
}

bool SameRope(const RopeSpec& a, const RopeSpec& b) {
  return a.theta == b.theta && a.rotated_pairs == b.rotated_pairs && a.factor == b.factor;
}

// Whether prep and attention describe one layer's pair: the attention reads the prep's q and, when
// the prep stores K/V, the caches it stores into, with the same heads and rotation.
bool PairsUp(const QkvPrepArgs& prep, const AttentionArgs& a) {
  if (a.q.data != prep.q_out.data || a.num_q_heads != prep.num_q_heads || a.head_dim != prep.head_dim ||
      a.meta != prep.meta || a.group != prep.group || a.k_from_v != (prep.has_kv && prep.k_from_v)) {
    return false;
  }
  if (a.k_from_v && !SameRope(a.rope, prep.rope)) return false;
  if (!prep.has_kv) return true;  // KV-shared: the attention reads another layer's cache
  return a.num_kv_heads == prep.num_kv_heads && a.v_cache.data == prep.v_cache.data &&
         (a.k_from_v || a.k_cache.data == prep.k_cache.data);
}

// The kernel takes key fresh + j of a sequence for its token q0 + j: every sequence's query
// positions must run on one by one (the step metadata makes them so: start_pos + i).
bool ConsecutivePositions(const StepMetadata& m) {
  if (m.host_query_start == nullptr || m.host_positions == nullptr) return false;
  for (int s = 0; s < m.num_seqs; ++s) {
    for (int32_t t = m.host_query_start[s] + 1; t < m.host_query_start[s + 1]; ++t) {
      if (m.host_positions[t] != m.host_positions[t - 1] + 1) return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<const kernels::KernelEntry*> CudaBackend::RunFusedPrep(const QkvPrepArgs& prep,
                                                                      const AttentionArgs& a,
                                                                      const kernels::KernelEntry* entry,
                                                                      int num_splits) {
  GANNET_ASSIGN_OR_RETURN(const kernels::QkvPrepParams pp, PrepParams(prep));
  GANNET_ASSIGN_OR_RETURN(kernels::PagedAttentionParams p, AttentionParams(a));
  if (FusedPrepOff() || pp.qkv_type != kernels::DataType::kBF16 || pp.q_type != kernels::DataType::kBF16 ||
      pp.kv_fp8 || p.kv_fp8 || p.io_f16 || !PairsUp(prep, a) || !FitsDecodeCta(p) ||
      !ConsecutivePositions(*a.meta)) {
    return nullptr;
  }
  const int d = prep.head_dim, nq = prep.num_q_heads, nkv = prep.num_kv_heads;
  p.q = prep.qkv.data;  // the raw projection: the kernel preps its own rows
  p.q_stride = prep.qkv.stride0();
  p.prep.on = true;
  p.prep.has_kv = prep.has_kv;
  p.prep.k_eq_v = prep.k_eq_v;
  p.prep.eps = prep.eps;
  p.prep.q_norm = pp.q_norm;
  p.prep.k_norm = pp.k_norm;
  p.prep.k_offset = static_cast<int64_t>(nq) * d;
  p.prep.v_offset = p.prep.k_offset + (prep.k_eq_v ? 0 : static_cast<int64_t>(nkv) * d);
  std::copy(pp.inv_freq, pp.inv_freq + d / 2, p.inv_freq);  // k_from_v's pairs among them
  p.num_splits = num_splits;
  if (entry == nullptr) {
    GANNET_ASSIGN_OR_RETURN(entry, SelectAttentionFor(p));
    if (entry->op != kernels::Op::kAttentionDecode) return nullptr;
  }
  if (!kernels::FlashDecodeFusesPrep(*entry)) return nullptr;
  GANNET_RETURN_IF_ERROR(CheckPagesIfDebug(a));
  GANNET_RETURN_IF_ERROR(LaunchAttention(*entry, p));
  return entry;
}

absl::Status CudaBackend::PrepAndAttend(const QkvPrepArgs& prep, const AttentionArgs& a) {
  GANNET_ASSIGN_OR_RETURN(const kernels::KernelEntry* fused, RunFusedPrep(prep, a));
  if (fused != nullptr) return absl::OkStatus();
  GANNET_RETURN_IF_ERROR(QkvPrep(prep));
  return Attention(a);
}

}  // namespace gannet::backend

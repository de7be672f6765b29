// QkvPrep and paged attention of the CUDA backend. Attention picks its kernel through the
// registry (decode entries when every sequence's query rows fit one decode CTA, else prefill
// entries; a mixed step's leading decode rows apart from its prompt chunks), caches the choice
// per problem class, and sizes the entry's workspace from host-side sizes only, so the
// launch grid of a step shape is fixed and graph-capturable.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "kernels/attention/attention_entries.h"
#include "kernels/rope/qkv_prep.h"
#include "lib/backend/cuda/attention_split.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"
#include "lib/backend/kv_cache.h"

namespace gannet::backend {
namespace {

bool DebugKv() {
  const char* env = std::getenv("GANNET_DEBUG_KV");
  return env != nullptr && std::strcmp(env, "0") != 0;
}

// GANNET_DEBUG_KV=1: every page the kernels will read is checked on the host first.
absl::Status ValidatePages(const AttentionArgs& a) {
  const StepMetadata& meta = *a.meta;
  const KvGroupView& g = meta.groups[a.kv.group];
  for (int s = 0; s < meta.num_seqs; ++s) {
    for (int32_t t = meta.host_query_start[s]; t < meta.host_query_start[s + 1]; ++t) {
      const int32_t pos = meta.host_positions[t];
      const int32_t lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
      for (int32_t p = lo / g.page_size; p <= pos / g.page_size; ++p) {
        const int32_t page =
            p < g.max_pages_per_seq
                ? g.host_page_table[static_cast<int64_t>(s) * g.max_pages_per_seq + p]
                : -1;
        if (page < 0 || page >= g.num_pages) {
          return InvalidArgumentError(
              "Attention (GANNET_DEBUG_KV): sequence {} position {} reads page table entry {} = {} "
              "(pool has {})",
              s, pos, p, page, g.num_pages);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<float>& CudaBackend::InvFreq(const RopeSpec& rope, int d) {
  const auto key = std::make_tuple(rope.theta, rope.rotated_pairs, rope.factor, d);
  auto it = inv_freq_.find(key);
  if (it == inv_freq_.end()) {
    std::vector<float> f(d / 2);
    ComputeInvFreq(rope, d, f.data());
    it = inv_freq_.emplace(key, std::move(f)).first;
  }
  return it->second;
}

absl::StatusOr<kernels::PagedAttentionParams> CudaBackend::AttentionParams(const AttentionArgs& a) {
  if (a.meta == nullptr) return InvalidArgumentError("Attention: no step metadata");
  const StepMetadata& meta = *a.meta;
  const KvGroupView& g = meta.groups[a.kv.group];
  // q and out: the activation type, bf16, or f16 on the fp16 compute path (any backend takes
  // either, so tests run the f16 entries everywhere).
  if ((a.q.dtype != DType::kBF16 && a.q.dtype != DType::kF16) || a.out.dtype != a.q.dtype) {
    return InvalidArgumentError(
        "cuda backend: Attention q and out must both be bf16 or both f16, got {} and {}",
        DTypeName(a.q.dtype), DTypeName(a.out.dtype));
  }
  const int d = a.head_dim;
  if (a.num_kv_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0) {
    return InvalidArgumentError("Attention: {} query heads do not group over {} kv heads",
                                a.num_q_heads, a.num_kv_heads);
  }
  GANNET_RETURN_IF_ERROR(
      CheckKvCache("Attention", a.kv, a.num_kv_heads, g.page_size, d, DType::kBF16));
  if (a.kv.k_from_v) {
    GANNET_RETURN_IF_ERROR(CheckKFromV("Attention", a.kv.k_norm, a.kv.rope.rotated_pairs, d));
    if (a.kv.rope.rotated_pairs > kernels::kMaxKFromVRopePairs) {
      return InvalidArgumentError(
          "Attention: deriving K from V takes at most {} rotated pairs, not {}",
          kernels::kMaxKFromVRopePairs, a.kv.rope.rotated_pairs);
    }
  }
  if (a.q.row_elems() != static_cast<int64_t>(a.num_q_heads) * d ||
      a.out.row_elems() != static_cast<int64_t>(a.num_q_heads) * d ||
      a.q.rows() < meta.num_tokens || a.out.rows() < meta.num_tokens) {
    return InvalidArgumentError("Attention: q/out must be [{}, {}, {}]", meta.num_tokens,
                                a.num_q_heads, d);
  }
  kernels::PagedAttentionParams p;
  p.q = a.q.data;
  p.io_f16 = a.q.dtype == DType::kF16;
  p.k_cache = a.kv.k.data;
  p.v_cache = a.kv.v.data;
  p.kv_fp8 = a.kv.v.dtype == DType::kF8E4M3;
  p.k_scale = p.kv_fp8 && !a.kv.k_from_v ? a.kv.k_scale.as<float>() : nullptr;
  p.v_scale = p.kv_fp8 ? a.kv.v_scale.as<float>() : nullptr;
  if (a.kv.k_from_v) {
    p.k_cache = nullptr;
    p.k_from_v = true;
    p.k_norm = a.kv.k_norm.as<float>();
    p.rope_pairs = a.kv.rope.rotated_pairs;
    const std::vector<float>& f = InvFreq(a.kv.rope, d);
    std::copy(f.begin(), f.begin() + p.rope_pairs, p.inv_freq);
  }
  p.out = a.out.data;
  p.query_start = meta.query_start;
  p.seq_lens = meta.seq_lens;
  p.positions = meta.positions;
  p.page_table = g.page_table;
  p.num_seqs = meta.num_seqs;
  p.num_tokens = meta.num_tokens;
  p.max_query_len = meta.max_query_len;
  p.max_seq_len = meta.max_seq_len;
  p.num_q_heads = a.num_q_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.head_dim = d;
  p.page_size = g.page_size;
  p.max_pages_per_seq = g.max_pages_per_seq;
  p.window = a.window;
  p.q_stride = a.q.stride0();
  p.out_stride = a.out.stride0();
  p.scale = a.scale;
  if (a.image_block_mask) {
    if (meta.image_block == nullptr) {
      return InvalidArgumentError(
          "Attention: the image-block mask needs the step's image block ids");
    }
    p.image_block = meta.image_block;  // sets kFlagImageBlocks: only capable entries are chosen
  }
  return p;
}

absl::Status CudaBackend::QkvPrep(const QkvPrepArgs& a) {
  if (a.meta == nullptr) return InvalidArgumentError("QkvPrep: no step metadata");
  const StepMetadata& meta = *a.meta;
  const KvGroupView& g = meta.groups[a.kv.group];
  const int d = a.head_dim;
  // The two paths: bf16 qkv -> bf16 q, or (fp16 compute) f32 qkv -> f16 q.
  const bool f16_path = a.q_out.dtype == DType::kF16;
  GANNET_RETURN_IF_ERROR(RequireDType(a.qkv, f16_path ? DType::kF32 : DType::kBF16, "QkvPrep qkv"));
  if (!f16_path) GANNET_RETURN_IF_ERROR(RequireDType(a.q_out, DType::kBF16, "QkvPrep q_out"));
  GANNET_RETURN_IF_ERROR(RequireDType(a.q_norm, DType::kF32, "QkvPrep q_norm"));
  const int64_t kv_cols =
      a.has_kv ? static_cast<int64_t>(a.num_kv_heads) * d * (a.k_eq_v ? 1 : 2) : 0;
  if (a.qkv.row_elems() != static_cast<int64_t>(a.num_q_heads) * d + kv_cols) {
    return InvalidArgumentError("QkvPrep: qkv row has {} values, heads imply {}", a.qkv.row_elems(),
                                a.num_q_heads * d + kv_cols);
  }
  if (d % 2 != 0 || d > 2 * kernels::kMaxRopePairs) {
    return InvalidArgumentError("QkvPrep: head_dim {} unsupported (even, <= {})", d,
                                2 * kernels::kMaxRopePairs);
  }
  if (a.has_kv && a.kv.k_from_v && !a.k_eq_v) {  // without has_kv, kv is only read for its group
    return InvalidArgumentError("QkvPrep: a single K/V store needs a K=V layer");
  }
  if (a.has_kv) {
    GANNET_RETURN_IF_ERROR(
        CheckKvCache("QkvPrep", a.kv, a.num_kv_heads, g.page_size, d, DType::kBF16));
    if (a.k_norm.valid())
      GANNET_RETURN_IF_ERROR(RequireDType(a.k_norm, DType::kF32, "QkvPrep k_norm"));
  }
  kernels::QkvPrepParams p;
  p.qkv = a.qkv.data;
  p.ld_qkv = a.qkv.stride0();
  p.qkv_type = f16_path ? DType::kF32 : DType::kBF16;
  p.q_type = f16_path ? DType::kF16 : DType::kBF16;
  p.num_tokens = meta.num_tokens;
  p.num_q_heads = a.num_q_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.head_dim = d;
  p.has_kv = a.has_kv;
  p.k_eq_v = a.k_eq_v;
  p.eps = a.eps;
  p.q_norm = a.q_norm.as<float>();
  p.k_norm = a.has_kv ? F32OrNull(a.k_norm) : nullptr;
  p.positions = meta.positions;
  p.slot_mapping = g.slot_mapping;
  p.q_out = a.q_out.data;
  p.ld_q = a.q_out.stride0();
  p.k_cache = a.has_kv && !a.kv.k_from_v ? a.kv.k.data : nullptr;  // null: V alone (k_from_v)
  p.v_cache = a.has_kv ? a.kv.v.data : nullptr;
  p.kv_fp8 = a.has_kv && a.kv.v.dtype == DType::kF8E4M3;
  p.k_scale = p.kv_fp8 && !a.kv.k_from_v ? a.kv.k_scale.as<float>() : nullptr;
  p.v_scale = p.kv_fp8 ? a.kv.v_scale.as<float>() : nullptr;
  p.page_size = g.page_size;
  const std::vector<float>& f = InvFreq(a.rope, d);
  std::copy(f.begin(), f.end(), p.inv_freq);
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchQkvPrep(p, stream_));
  return absl::OkStatus();
}

absl::StatusOr<const kernels::KernelEntry*> CudaBackend::SelectAttention(const AttentionArgs& a) {
  GANNET_ASSIGN_OR_RETURN(kernels::PagedAttentionParams p, AttentionParams(a));
  return SelectAttentionFor(p);
}

absl::StatusOr<const kernels::KernelEntry*> CudaBackend::SelectAttentionFor(
    const kernels::PagedAttentionParams& p) {
  // Decode kernels also serve the few tokens of a speculative verify chunk.
  const bool decode = FitsDecodeCta(p);
  for (kernels::Op op : {kernels::Op::kAttentionDecode, kernels::Op::kAttentionPrefill}) {
    if (op == kernels::Op::kAttentionDecode && !decode) continue;
    const kernels::ProblemKey pk = kernels::AttentionProblem(op, p);
    const auto key = std::make_tuple(static_cast<int>(op), pk.head_dim, pk.page_size,
                                     pk.num_q_heads, pk.num_kv_heads, pk.window > 0 ? 1 : 0,
                                     std::min(pk.max_query_len, 17), static_cast<int>(pk.flags),
                                     static_cast<int>(pk.kv_type), static_cast<int>(pk.in_type));
    auto it = chosen_.find(key);
    if (it != chosen_.end()) return it->second;
    const kernels::Selection sel = kernels::Select(pk, device_);
    if (sel.entry != nullptr) {
      chosen_[key] = sel.entry;
      return sel.entry;
    }
    if (op == kernels::Op::kAttentionPrefill && (pk.flags & kernels::kFlagImageBlocks)) {
      // Never fall back to a kernel that would ignore the mask: that answer would be wrong.
      return UnimplementedError("Attention: no kernel applies the image-block mask to {}: {}",
                                pk.ClassString(), sel.error);
    }
    if (op == kernels::Op::kAttentionPrefill || sel.error.find("forced") != std::string::npos) {
      return InvalidArgumentError("Attention: {}", sel.error);
    }
  }
  return InternalError("Attention: no kernel selected");
}

absl::Status CudaBackend::RunAttentionEntry(const kernels::KernelEntry& entry,
                                            const AttentionArgs& a, int num_splits) {
  GANNET_ASSIGN_OR_RETURN(kernels::PagedAttentionParams p, AttentionParams(a));
  if (DebugKv()) GANNET_RETURN_IF_ERROR(ValidatePages(a));
  p.num_splits = num_splits;
  return LaunchAttention(entry, p);
}

absl::Status CudaBackend::LaunchAttention(const kernels::KernelEntry& entry,
                                          const kernels::PagedAttentionParams& p) {
  const kernels::ProblemKey pk = kernels::AttentionProblem(entry.op, p);
  const kernels::KernelStatus st = kernels::CheckEntry(entry, pk, device_);
  if (!st.ok)
    return InvalidArgumentError("Attention: {} cannot run {}: {}", entry.name, pk.ClassString(),
                                st.reason);
  size_t ws_bytes = entry.workspace_bytes(pk, device_);
  if (p.num_splits > 0) {
    // A forced split count sizes its own workspace (tests and benchmarks sweep it).
    ws_bytes = std::max(ws_bytes, kernels::FlashAttentionWorkspace(entry, pk, p.num_splits));
  }
  void* ws = nullptr;
  if (ws_bytes > 0) {
    GANNET_ASSIGN_OR_RETURN(ws, Workspace(WorkspaceId::kAttention, ws_bytes));
  }
  GANNET_CUDA_RETURN_IF_ERROR(entry.launch(&p, pk, device_, ws, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Attention(const AttentionArgs& a) {
  GANNET_ASSIGN_OR_RETURN(kernels::PagedAttentionParams p, AttentionParams(a));
  if (DebugKv()) GANNET_RETURN_IF_ERROR(ValidatePages(a));
  // A mixed step: its decode rows in a decode entry, its prompt chunks in a prefill entry
  // (attention_split.h says why).
  if (const std::optional<MixedStepLaunches> l = SplitMixedStep(p, *a.meta)) {
    absl::StatusOr<const kernels::KernelEntry*> de = SelectAttentionFor(l->decode);
    if (de.ok() && (*de)->op == kernels::Op::kAttentionDecode) {
      GANNET_ASSIGN_OR_RETURN(const kernels::KernelEntry* pe, SelectAttentionFor(l->rest));
      GANNET_RETURN_IF_ERROR(LaunchAttention(**de, l->decode));
      return LaunchAttention(*pe, l->rest);
    }
  }
  GANNET_ASSIGN_OR_RETURN(const kernels::KernelEntry* entry, SelectAttentionFor(p));
  return LaunchAttention(*entry, p);
}

}  // namespace gannet::backend

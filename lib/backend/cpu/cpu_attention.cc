// QKV preparation (q/k/v norms, RoPE, paged KV write) and paged attention on the CPU.
// Both read positions, page tables and slot mappings from StepMetadata's host mirrors; Attention
// also the image block ids, when the layer applies the image-block mask (backend.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"
#include "lib/backend/kv_cache.h"

namespace gannet::backend {
namespace {

// Normalises one head vector with an optional weight and applies rotate-half RoPE.
void NormRope(const float* in, const float* norm_w, float eps, const float* inv_freq, int d,
              int32_t pos, bool rope, float* out) {
  float inv = cpu::RmsInvScale(in, d, eps);
  std::vector<float> tmp(d);
  for (int i = 0; i < d; ++i) tmp[i] = norm_w ? (in[i] * inv) * norm_w[i] : in[i] * inv;
  if (!rope) {
    std::copy(tmp.begin(), tmp.end(), out);
    return;
  }
  const int half = d / 2;
  for (int j = 0; j < half; ++j) {
    // HF: freqs = inv_freq * position in f32, cos/sin in f32.
    float angle = inv_freq[j] * static_cast<float>(pos);
    float c = std::cos(angle);
    float s = std::sin(angle);
    float a = tmp[j];
    float b = tmp[j + half];
    out[j] = a * c - b * s;
    out[j + half] = b * c + a * s;
  }
}

// Element offset of (slot, head) in a [num_pages, n_kv, page_size, d] cache, or of its scale in a
// [num_pages, n_kv, page_size] scale array (d = 1).
int64_t RowOffset(const Tensor& cache, int64_t slot, int head, int page_size, int64_t d) {
  const int64_t page = slot / page_size;
  const int64_t off = slot % page_size;
  return ((page * cache.dim(1) + head) * page_size + off) * d;
}

// One layer's K or V cache: writes a row in the cache's storage and reads it back as f32 (the
// FP8 storage of backend.h: one f32 scale per row, amax / 448).
struct CacheRows {
  const Tensor& cache;
  const Tensor& scale;
  int page_size;

  void Write(int64_t slot, int head, const float* x) const {
    const int64_t d = cache.dim(3);
    const int64_t at = RowOffset(cache, slot, head, page_size, d);
    if (cache.dtype == DType::kF32) {
      std::copy(x, x + d, cache.as<float>() + at);
      return;
    }
    scale.as<float>()[at / d] = QuantizeFp8E4M3Row(x, d, cache.as<uint8_t>() + at);
  }
  // The row as f32: in place for f32 storage, else dequantised into `tmp` (d floats).
  const float* Read(int64_t slot, int head, float* tmp) const {
    const int64_t d = cache.dim(3);
    const int64_t at = RowOffset(cache, slot, head, page_size, d);
    if (cache.dtype == DType::kF32) return cache.as<float>() + at;
    DequantizeFp8E4M3Row(cache.as<uint8_t>() + at, d, scale.as<float>()[at / d], tmp);
    return tmp;
  }
};

// Single-store K=V (backend.h): K = RoPE_pos(k_norm * v), the products and rotation exactly as
// NormRope forms them from the same normalised row, so the CPU's K is bit-identical either way.
const float* DeriveK(const float* v, const float* k_norm, const float* inv_freq, int d, int32_t pos,
                     float* out) {
  const int half = d / 2;
  for (int j = 0; j < half; ++j) {
    const float a = v[j] * k_norm[j], b = v[j + half] * k_norm[j + half];
    const float angle = inv_freq[j] * static_cast<float>(pos);
    const float c = std::cos(angle), s = std::sin(angle);
    out[j] = a * c - b * s;
    out[j + half] = b * c + a * s;
  }
  return out;
}

}  // namespace

absl::Status CpuBackend::QkvPrep(const QkvPrepArgs& a) {
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(a.qkv, "QkvPrep qkv"));
  const StepMetadata& meta = *a.meta;
  const KvGroupView& g = meta.groups[a.kv.group];
  const int d = a.head_dim;
  const int64_t kv_cols =
      a.has_kv ? static_cast<int64_t>(a.num_kv_heads) * d * (a.k_eq_v ? 1 : 2) : 0;
  if (a.qkv.row_elems() != static_cast<int64_t>(a.num_q_heads) * d + kv_cols) {
    return InvalidArgumentError("QkvPrep: qkv row has {} values, heads imply {}", a.qkv.row_elems(),
                                a.num_q_heads * d + kv_cols);
  }
  if (a.has_kv && a.kv.k_from_v && !a.k_eq_v) {  // without has_kv, kv is only read for its group
    return InvalidArgumentError("QkvPrep: a single K/V store needs a K=V layer");
  }
  if (a.has_kv) {
    GANNET_RETURN_IF_ERROR(
        CheckKvCache("QkvPrep", a.kv, a.num_kv_heads, g.page_size, d, kv_dtype()));
  }
  std::vector<float> inv_freq(d / 2);
  ComputeInvFreq(a.rope, d, inv_freq.data());
  const float* qn = a.q_norm.as<float>();
  const float* kn = a.k_norm.valid() ? a.k_norm.as<float>() : nullptr;
  const int64_t num_tokens = meta.num_tokens;
  for (int64_t t = 0; t < num_tokens && a.has_kv; ++t) {
    int32_t slot = g.host_slot_mapping[t];
    if (slot >= static_cast<int64_t>(g.num_pages) * g.page_size) {
      return InvalidArgumentError("QkvPrep: slot {} of token {} is outside the {}-page pool", slot,
                                  t, g.num_pages);
    }
  }
  pool().ParallelFor(num_tokens, 1, [&](int64_t b, int64_t e) {
    std::vector<float> row_buf(d);
    for (int64_t t = b; t < e; ++t) {
      const float* row = a.qkv.as<float>() + t * a.qkv.stride0();
      const int32_t pos = meta.host_positions[t];
      float* qo = a.q_out.as<float>() + t * a.q_out.stride0();
      for (int h = 0; h < a.num_q_heads; ++h) {
        NormRope(row + h * d, qn, a.eps, inv_freq.data(), d, pos, true, qo + h * d);
      }
      if (!a.has_kv) continue;
      const int32_t slot = g.host_slot_mapping[t];
      if (slot < 0) continue;
      const float* k_raw = row + static_cast<int64_t>(a.num_q_heads) * d;
      const float* v_raw = a.k_eq_v ? k_raw : k_raw + static_cast<int64_t>(a.num_kv_heads) * d;
      const CacheRows k_rows{a.kv.k, a.kv.k_scale, g.page_size};
      const CacheRows v_rows{a.kv.v, a.kv.v_scale, g.page_size};
      for (int h = 0; h < a.num_kv_heads; ++h) {
        if (!a.kv.k_from_v) {
          NormRope(k_raw + h * d, kn, a.eps, inv_freq.data(), d, pos, true, row_buf.data());
          k_rows.Write(slot, h, row_buf.data());
        }
        NormRope(v_raw + h * d, nullptr, a.eps, inv_freq.data(), d, pos, false, row_buf.data());
        v_rows.Write(slot, h, row_buf.data());
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Attention(const AttentionArgs& a) {
  const StepMetadata& meta = *a.meta;
  const KvGroupView& g = meta.groups[a.kv.group];
  const int d = a.head_dim;
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(a.q, "Attention q"));
  GANNET_RETURN_IF_ERROR(
      CheckKvCache("Attention", a.kv, a.num_kv_heads, g.page_size, d, kv_dtype()));
  if (a.kv.k_from_v) {
    GANNET_RETURN_IF_ERROR(CheckKFromV("Attention", a.kv.k_norm, a.kv.rope.rotated_pairs, d));
  }
  std::vector<float> inv_freq(d / 2);
  if (a.kv.k_from_v) ComputeInvFreq(a.kv.rope, d, inv_freq.data());
  const int group_size = a.num_q_heads / a.num_kv_heads;
  // Token -> sequence, from query_start.
  std::vector<int32_t> seq_of(meta.num_tokens);
  for (int s = 0; s < meta.num_seqs; ++s) {
    for (int32_t t = meta.host_query_start[s]; t < meta.host_query_start[s + 1]; ++t) {
      seq_of[t] = s;
    }
  }
  // The last key each token sees: itself, or with the image-block mask the last token of its
  // block (a block is one run of the step's tokens, so that is the end of the token's run).
  if (a.image_block_mask && meta.host_image_block == nullptr) {
    return InvalidArgumentError("Attention: the image-block mask needs the step's image block ids");
  }
  std::vector<int32_t> last_key(meta.num_tokens);
  for (int64_t t = meta.num_tokens - 1; t >= 0; --t) {
    last_key[t] = meta.host_positions[t];
    if (!a.image_block_mask) continue;
    const int32_t b = meta.host_image_block[t];
    if (b >= 0 && t + 1 < meta.num_tokens && seq_of[t + 1] == seq_of[t] &&
        meta.host_image_block[t + 1] == b) {
      last_key[t] = last_key[t + 1];
    }
  }
  // Validate every page the loops below will read (cheap on the CPU, and it turns a bad table
  // into an error instead of a wild read).
  for (int64_t t = 0; t < meta.num_tokens; ++t) {
    const int s = seq_of[t];
    const int32_t pos = meta.host_positions[t];
    const int32_t lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
    for (int32_t p = lo / g.page_size; p <= last_key[t] / g.page_size; ++p) {
      if (p >= g.max_pages_per_seq) {
        return InvalidArgumentError("Attention: position {} needs page column {} beyond {}", pos, p,
                                    g.max_pages_per_seq);
      }
      int32_t page = g.host_page_table[static_cast<int64_t>(s) * g.max_pages_per_seq + p];
      if (page < 0 || page >= g.num_pages) {
        return InvalidArgumentError(
            "Attention: sequence {} position {} reads page table entry {} = {} (pool has {})", s,
            pos, p, page, g.num_pages);
      }
    }
  }
  const CacheRows k_rows{a.kv.k, a.kv.k_scale, g.page_size};
  const CacheRows v_rows{a.kv.v, a.kv.v_scale, g.page_size};
  const int64_t work = meta.num_tokens * a.num_q_heads;
  pool().ParallelFor(work, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    std::vector<float> acc(d), row_buf(d), k_buf(d);
    for (int64_t w = b; w < e; ++w) {
      const int64_t t = w / a.num_q_heads;
      const int h = static_cast<int>(w % a.num_q_heads);
      const int kvh = h / group_size;
      const int s = seq_of[t];
      const int32_t pos = meta.host_positions[t];
      const int32_t lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
      const int32_t hi = last_key[t];  // keys (pos, hi]: the rest of the query's image block
      const float* q = a.q.as<float>() + t * a.q.stride0() + h * d;
      const int32_t* table = g.host_page_table + static_cast<int64_t>(s) * g.max_pages_per_seq;
      scores.resize(hi - lo + 1);
      float mx = -INFINITY;
      for (int32_t kp = lo; kp <= hi; ++kp) {
        int64_t slot =
            static_cast<int64_t>(table[kp / g.page_size]) * g.page_size + kp % g.page_size;
        const float* k =
            a.kv.k_from_v ? DeriveK(v_rows.Read(slot, kvh, row_buf.data()), a.kv.k_norm.as<float>(),
                                    inv_freq.data(), d, kp, k_buf.data())
                          : k_rows.Read(slot, kvh, row_buf.data());
        float sc = cpu::Dot(q, k, d) * a.scale;
        scores[kp - lo] = sc;
        mx = std::max(mx, sc);
      }
      double denom = 0;
      for (float& sc : scores) {
        sc = std::exp(sc - mx);
        denom += sc;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t kp = lo; kp <= hi; ++kp) {
        int64_t slot =
            static_cast<int64_t>(table[kp / g.page_size]) * g.page_size + kp % g.page_size;
        const float* v = v_rows.Read(slot, kvh, row_buf.data());
        const float p = scores[kp - lo];
        for (int i = 0; i < d; ++i) acc[i] += p * v[i];
      }
      float* o = a.out.as<float>() + t * a.out.stride0() + h * d;
      const float inv = static_cast<float>(1.0 / denom);
      for (int i = 0; i < d; ++i) o[i] = acc[i] * inv;
    }
  });
  return absl::OkStatus();
}

}  // namespace gannet::backend

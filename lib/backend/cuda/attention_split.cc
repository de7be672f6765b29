#include "lib/backend/cuda/attention_split.h"

#include <algorithm>

namespace gannet::backend {

std::optional<MixedStepLaunches> SplitMixedStep(const kernels::PagedAttentionParams& p,
                                                const StepMetadata& m) {
  if (FitsDecodeCta(p) || m.host_query_start == nullptr || m.host_seq_lens == nullptr)
    return std::nullopt;
  const int group = p.num_q_heads / p.num_kv_heads;
  MixedStepLaunches l{p, p};
  kernels::PagedAttentionParams& dec = l.decode;
  dec.num_seqs = dec.max_query_len = dec.max_seq_len = 0;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q = m.host_query_start[s + 1] - m.host_query_start[s];
    if (q * group > kDecodeCtaRows) break;
    dec.num_seqs = s + 1;
    dec.max_query_len = std::max(dec.max_query_len, q);
    dec.max_seq_len = std::max(dec.max_seq_len, m.host_seq_lens[s]);
  }
  if (dec.num_seqs == 0 || dec.num_seqs == p.num_seqs) return std::nullopt;
  dec.num_tokens = m.host_query_start[dec.num_seqs] - m.host_query_start[0];
  // query_start keeps its absolute token indices into q, out and positions, which every kernel
  // reads them as (kernels/attention/paged_attention.h).
  kernels::PagedAttentionParams& rest = l.rest;
  rest.query_start += dec.num_seqs;
  rest.seq_lens += dec.num_seqs;
  rest.page_table += static_cast<int64_t>(dec.num_seqs) * p.max_pages_per_seq;
  rest.num_seqs -= dec.num_seqs;
  rest.num_tokens -= dec.num_tokens;
  return l;
}

}  // namespace gannet::backend

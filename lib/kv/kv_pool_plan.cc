#include "lib/kv/kv_pool_plan.h"

#include <algorithm>
#include <limits>

#include "lib/common/status.h"

namespace gannet::kv {
namespace {

constexpr int kSliding = GroupIndex(KvGroup::kSliding);
constexpr int kFull = GroupIndex(KvGroup::kFull);

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Most blocks of size P that m consecutive positions can touch: 1 + ceil((m - 1) / P), reached
// when the first position is the last slot of a block.
int64_t SpanPages(int64_t m, int64_t page_size) {
  return m <= 0 ? 0 : 1 + CeilDiv(m - 1, page_size);
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace

PerGroup<int64_t> KvBytesPerToken(absl::Span<const KvLayerGeometry> layers, int64_t dtype_bytes) {
  PerGroup<int64_t> bytes = {0, 0};
  for (const KvLayerGeometry& layer : layers) {
    if (!layer.owns_kv) continue;
    bytes[GroupIndex(layer.group)] +=
        2 * static_cast<int64_t>(layer.num_kv_heads) * layer.head_dim * dtype_bytes;
  }
  return bytes;
}

// Derivation. Before each step every running sequence calls ReleaseSlidingBefore(s - W + 1),
// s being its next position, and the step then grows it by n >= 0 tokens (at most S sequences,
// sum of n <= T). During the step the sequence holds sliding pages exactly for the blocks
// touching positions [max(0, s - W + 1), s + n - 1]: at most m = W - 1 + n positions, so at most
//   g(n) = min(C, SpanPages(W - 1 + n)),   C = ceil(max_seq_len / P)
// pages (a sequence never has more than C blocks). Unscheduled sequences hold g(0).
// SpanPages(m) steps up at m = 1 and then at every m = 2 + kP, so the tokens that buy a
// sequence its extra pages cost c1 (the first, <= P), c2 (the second, c1 <= c2 <= P) and then P
// each. Step tokens are the only thing that buys pages beyond S * g(0), and within a sequence
// the prices never fall, so buying the cheapest pages first across sequences is the worst case:
//   k1 = min(S, floor(T / c1)) sequences get their first extra page; if all S do,
//   k2 = min(S, floor(T' / c2)) get a second one from the remaining T'; if all S do again,
//   the rest buys floor(T'' / P) more, never more than C - g(0) per sequence.
// Every term is reachable: each sequence independently sits at the alignment where its window
// starts on the last slot of a block, so the bound is exact when max_seq_len >= W + T + P (tests
// compare it with a brute force and build that state); for shorter contexts it is an upper bound.
int64_t SlidingPagesWorstCase(int64_t window, int64_t page_size, int64_t max_running_seqs,
                              int64_t max_step_tokens, int64_t max_seq_len) {
  const int64_t cap = CeilDiv(max_seq_len, page_size);
  auto pages = [&](int64_t n) { return std::min(cap, SpanPages(window - 1 + n, page_size)); };
  const int64_t g0 = pages(0);
  int64_t total = max_running_seqs * g0;
  int64_t tokens = max_step_tokens;
  int64_t n = 0;  // tokens each sequence has spent so far
  for (int64_t extra = 1; g0 + extra <= cap; ++extra) {
    if (extra == 3) {  // from here on every page costs P tokens, in any sequence
      total += std::min(tokens / page_size, max_running_seqs * (cap - g0 - 2));
      break;
    }
    int64_t cost = 1;
    while (pages(n + cost) < g0 + extra) ++cost;
    const int64_t buyers = std::min(max_running_seqs, tokens / cost);
    total += buyers;
    tokens -= buyers * cost;
    n += cost;
    if (buyers < max_running_seqs) break;
  }
  return total;
}

absl::StatusOr<KvPoolPlan> PlanKvPools(const KvPoolPlanOptions& o) {
  const PerGroup<bool> present = {o.bytes_per_token[kSliding] > 0, o.bytes_per_token[kFull] > 0};
  if (!present[kSliding] && !present[kFull]) {
    return InvalidArgumentError("kv plan: no KV group has a positive bytes_per_token");
  }
  if (o.page_size < 1 || o.max_running_seqs < 1 || o.max_step_tokens < 1 || o.max_seq_len < 1 ||
      o.budget_bytes < 0 || o.bytes_per_token[0] < 0 || o.bytes_per_token[1] < 0) {
    return InvalidArgumentError(
        "kv plan: page_size {}, max_running_seqs {}, max_step_tokens {}, max_seq_len {} must be "
        ">= 1 and budget {} / bytes per token {}, {} >= 0",
        o.page_size, o.max_running_seqs, o.max_step_tokens, o.max_seq_len, o.budget_bytes,
        o.bytes_per_token[0], o.bytes_per_token[1]);
  }
  if (present[kSliding] && o.sliding_window < 1) {
    return InvalidArgumentError("kv plan: sliding layers need a window >= 1, got {}",
                                o.sliding_window);
  }
  KvPoolPlan plan;
  PerGroup<int64_t> page_bytes = {0, 0};
  int64_t remaining = o.budget_bytes;
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    KvPoolCapacity& cap = plan.groups[gi];
    const int32_t override_pages = o.num_pages_override[gi];
    if (override_pages < 0 || (override_pages > 0 && !present[gi])) {
      return InvalidArgumentError("kv plan: bad {} page override {} (group {})", KvGroupName(g),
                                  override_pages, present[gi] ? "present" : "absent");
    }
    page_bytes[gi] = o.bytes_per_token[gi] * o.page_size;
    if (!present[gi]) continue;
    cap.min_pages = g == KvGroup::kSliding
                        ? SlidingPagesWorstCase(o.sliding_window, o.page_size, o.max_running_seqs,
                                                o.max_step_tokens, o.max_seq_len)
                        : CeilDiv(o.max_seq_len, o.page_size);
    if (override_pages > 0) {
      cap.pages = override_pages;
      cap.overridden = true;
      remaining -= override_pages * page_bytes[gi];
    }
  }
  if (remaining < 0) {
    return ResourceExhaustedError(
        "kv plan: the page overrides need {} B, more than the {} B budget",
        o.budget_bytes - remaining, o.budget_bytes);
  }
  // The sliding pool gets its worst case only when the full pool takes the rest; alone, or next
  // to an overridden full pool, it takes the rest itself (more room for cached prefixes).
  const bool sliding_gets_min = present[kSliding] && !plan.groups[kSliding].overridden &&
                                present[kFull] && !plan.groups[kFull].overridden;
  if (sliding_gets_min) {
    plan.groups[kSliding].pages = static_cast<int32_t>(
        std::min<int64_t>(plan.groups[kSliding].min_pages, std::numeric_limits<int32_t>::max()));
    remaining -= plan.groups[kSliding].pages * page_bytes[kSliding];
  }
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    KvPoolCapacity& cap = plan.groups[gi];
    if (!present[gi] || cap.overridden || (sliding_gets_min && g == KvGroup::kSliding)) continue;
    cap.pages = static_cast<int32_t>(std::min<int64_t>(
        std::max<int64_t>(remaining, 0) / page_bytes[gi], std::numeric_limits<int32_t>::max()));
  }
  for (KvGroup g : kAllKvGroups) {
    const KvPoolCapacity& cap = plan.groups[GroupIndex(g)];
    if (!present[GroupIndex(g)] || cap.overridden || cap.pages >= cap.min_pages) continue;
    const KvPoolCapacity& sliding = plan.groups[kSliding];
    const KvPoolCapacity& full = plan.groups[kFull];
    const int64_t need =
        sliding.min_pages * page_bytes[kSliding] + full.min_pages * page_bytes[kFull];
    return ResourceExhaustedError(
        "kv plan: a {} B KV budget cannot hold the minimum {} pool ({} pages). Minimums: sliding "
        "{} pages = {} B ({} sequences at window {} plus {} step tokens, page size {}), full {} "
        "pages = {} B (one {}-token sequence); together {} B{}. Lower max_running_seqs, the step "
        "token budget or the context length, or raise the budget",
        o.budget_bytes, KvGroupName(g), cap.min_pages, sliding.min_pages,
        sliding.min_pages * page_bytes[kSliding], o.max_running_seqs, o.sliding_window,
        o.max_step_tokens, o.page_size, full.min_pages, full.min_pages * page_bytes[kFull],
        o.max_seq_len, need,
        sliding.overridden || full.overridden ? " (the other pool is overridden)" : "");
  }
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    KvPoolCapacity& cap = plan.groups[gi];
    const std::string_view name = KvGroupName(g);
    if (!present[gi]) {
      cap.report = fmt::format("kv {} pool: none (the model has no {} layers)", name,
                               g == KvGroup::kSliding ? "sliding-window" : "full-attention");
      continue;
    }
    cap.tokens = static_cast<int64_t>(cap.pages) * o.page_size;
    cap.bytes = static_cast<int64_t>(cap.pages) * page_bytes[gi];
    const std::string sizing =
        g == KvGroup::kSliding
            ? fmt::format("worst case of {} sequences at window {} + {} step tokens: {} pages",
                          o.max_running_seqs, o.sliding_window, o.max_step_tokens, cap.min_pages)
            : fmt::format("{:.1f} sequences of {} tokens; minimum {} pages",
                          static_cast<double>(cap.tokens) / o.max_seq_len, o.max_seq_len,
                          cap.min_pages);
    const std::string note = !cap.overridden ? ""
                             : cap.pages >= cap.min_pages
                                 ? "; override"
                                 : "; override BELOW the minimum: the scheduler must admit less";
    cap.report = fmt::format("kv {} pool: {} pages x {} tokens = {} tokens, {} ({}/token; {}{})",
                             name, cap.pages, o.page_size, cap.tokens, FormatBytes(cap.bytes),
                             FormatBytes(o.bytes_per_token[gi]), sizing, note);
  }
  return plan;
}

}  // namespace gannet::kv

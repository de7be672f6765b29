#include "lib/kv/kv_pool_plan.h"

#include <algorithm>
#include <functional>

#include "lib/common/status.h"
#include "lib/common/units.h"

namespace gannet::kv {
namespace {

constexpr int kSliding = GroupIndex(KvGroup::kSliding);
constexpr int kFull = GroupIndex(KvGroup::kFull);

// PlanKvPoolsWithDefaults lowers a default context length no further than this.
constexpr int64_t kShortestDefaultContext = 1024;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Most blocks of size P that m consecutive positions can touch: 1 + ceil((m - 1) / P), reached
// when the first position is the last slot of a block.
int64_t SpanPages(int64_t m, int64_t page_size) {
  return m <= 0 ? 0 : 1 + CeilDiv(m - 1, page_size);
}

// The largest x in [lo, hi] with fits(x), for a predicate that holds up to some point and not
// after it; lo - 1 when it holds nowhere.
int64_t LargestFitting(int64_t lo, int64_t hi, const std::function<bool(int64_t)>& fits) {
  int64_t good = lo - 1;
  while (lo <= hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      good = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return good;
}

}  // namespace

// g(n) of the derivation below.
int64_t SlidingPagesHeld(int64_t window, int64_t page_size, int64_t new_tokens,
                         int64_t max_seq_len) {
  return std::min(CeilDiv(max_seq_len, page_size), SpanPages(window - 1 + new_tokens, page_size));
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
  auto pages = [&](int64_t n) { return SlidingPagesHeld(window, page_size, n, max_seq_len); };
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

int64_t KvMinimumBytes(const KvPoolPlanOptions& o) {
  int64_t total = 0;
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    if (o.bytes_per_token[gi] <= 0) continue;
    const int64_t pages =
        g == KvGroup::kSliding
            ? SlidingPagesWorstCase(o.sliding_window, o.page_size, o.max_running_seqs,
                                    o.max_step_tokens, o.max_seq_len)
            : CeilDiv(o.max_seq_len, o.page_size);
    total += (pages + 1) * o.page_size * o.bytes_per_token[gi];  // + the padding page
  }
  return total;
}

absl::StatusOr<KvPoolPlan> PlanKvPools(const KvPoolPlanOptions& o) {
  const PerGroup<bool> present = {o.bytes_per_token[kSliding] > 0, o.bytes_per_token[kFull] > 0};
  if (!present[kSliding] && !present[kFull]) {
    return InvalidArgumentError("kv plan: no KV group has a positive bytes_per_token");
  }
  if (o.page_size < 1 || o.page_size > kMaxPageSize || o.max_running_seqs < 1 ||
      o.max_step_tokens < 1 || o.max_seq_len < 1 || o.budget_bytes < 0 ||
      o.bytes_per_token[0] < 0 || o.bytes_per_token[1] < 0) {
    return InvalidArgumentError(
        "kv plan: page_size {} must be in [1, {}], max_running_seqs {}, max_step_tokens {}, "
        "max_seq_len {} >= 1, and budget {} / bytes per token {}, {} >= 0",
        o.page_size, kMaxPageSize, o.max_running_seqs, o.max_step_tokens, o.max_seq_len,
        o.budget_bytes, o.bytes_per_token[0], o.bytes_per_token[1]);
  }
  if (present[kSliding] && o.sliding_window < 1) {
    return InvalidArgumentError("kv plan: sliding layers need a window >= 1, got {}",
                                o.sliding_window);
  }
  // Slot ids are int32 (kv_layout.h): managed pages + the padding page stay within the range.
  const int64_t max_pages = kMaxPoolTokens / o.page_size - 1;
  KvPoolPlan plan;
  PerGroup<int64_t> page_bytes = {0, 0};
  int64_t remaining = o.budget_bytes;
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    KvPoolCapacity& cap = plan.groups[gi];
    const int32_t override_pages = o.num_pages_override[gi];
    if (override_pages < 0 || (override_pages > 0 && !present[gi]) || override_pages > max_pages) {
      return InvalidArgumentError(
          "kv plan: {} page override {} is invalid (group {}; at most {} pages of {} tokens fit "
          "int32 slot ids)",
          KvGroupName(g), override_pages, present[gi] ? "present" : "absent", max_pages,
          o.page_size);
    }
    page_bytes[gi] = o.bytes_per_token[gi] * o.page_size;
    if (!present[gi]) continue;
    remaining -= page_bytes[gi];  // the padding page
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
        "kv plan: the page overrides (and padding pages) need {} B, more than the {} B budget",
        o.budget_bytes - remaining, o.budget_bytes);
  }
  // The sliding pool gets its worst case only when the full pool takes the rest; alone, or next
  // to an overridden full pool, it takes the rest itself (more room for cached prefixes).
  const bool sliding_gets_min = present[kSliding] && !plan.groups[kSliding].overridden &&
                                present[kFull] && !plan.groups[kFull].overridden;
  if (sliding_gets_min) {
    plan.groups[kSliding].pages =
        static_cast<int32_t>(std::min(plan.groups[kSliding].min_pages, max_pages));
    remaining -= plan.groups[kSliding].pages * page_bytes[kSliding];
  }
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    KvPoolCapacity& cap = plan.groups[gi];
    if (!present[gi] || cap.overridden || (sliding_gets_min && g == KvGroup::kSliding)) continue;
    cap.pages =
        static_cast<int32_t>(std::min(std::max<int64_t>(remaining, 0) / page_bytes[gi], max_pages));
  }
  for (KvGroup g : kAllKvGroups) {
    const KvPoolCapacity& cap = plan.groups[GroupIndex(g)];
    if (!present[GroupIndex(g)] || cap.overridden || cap.pages >= cap.min_pages) continue;
    const KvPoolCapacity& sliding = plan.groups[kSliding];
    const KvPoolCapacity& full = plan.groups[kFull];
    if (cap.min_pages > max_pages) {
      return ResourceExhaustedError(
          "kv plan: the minimum {} pool ({} pages of {} tokens) passes the {} tokens that int32 "
          "slot ids address; lower max_running_seqs or the context length",
          KvGroupName(g), cap.min_pages, o.page_size, kMaxPoolTokens);
    }
    return ResourceExhaustedError(
        "kv plan: a {} KV budget cannot hold the minimum {} pool ({} pages). Minimums: sliding "
        "{} pages = {} ({} sequences at window {} plus {} step tokens, page size {}), full {} "
        "pages = {} (one {}-token sequence); together with the padding pages {}{}",
        FormatBytes(o.budget_bytes), KvGroupName(g), cap.min_pages, sliding.min_pages,
        FormatBytes(sliding.min_pages * page_bytes[kSliding]), o.max_running_seqs, o.sliding_window,
        o.max_step_tokens, o.page_size, full.min_pages,
        FormatBytes(full.min_pages * page_bytes[kFull]), o.max_seq_len,
        FormatBytes(KvMinimumBytes(o)),
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

absl::StatusOr<KvPlanResult> PlanKvPoolsWithDefaults(const KvPlanRequest& r) {
  const KvPoolPlanOptions& o = r.options;
  KvPlanResult result;
  result.max_running_seqs = o.max_running_seqs;
  result.max_seq_len = o.max_seq_len;
  // Whether a plan's full pool holds `seqs` sequences of the planned length (kPlannedSeqTokens):
  // asked of a default running limit only, and of a full pool the planner sizes.
  auto planned_tokens = [](int64_t len) { return std::min(len, kPlannedSeqTokens); };
  auto planned_pages = [&](int64_t len) { return CeilDiv(planned_tokens(len), o.page_size); };
  auto follows = [&](const KvPoolPlan& p, int64_t seqs, int64_t len) {
    const KvPoolCapacity& full = p.groups[kFull];
    return r.user_running_seqs || o.bytes_per_token[kFull] == 0 || full.overridden ||
           full.pages >= seqs * planned_pages(len);
  };
  absl::StatusOr<KvPoolPlan> plan = PlanKvPools(o);
  if (plan.ok() && follows(*plan, o.max_running_seqs, o.max_seq_len)) {
    result.plan = *std::move(plan);
    return result;
  }
  if (!plan.ok() && !absl::IsResourceExhausted(plan.status())) return plan.status();
  if (!plan.ok() && (o.num_pages_override[0] > 0 || o.num_pages_override[1] > 0)) {
    return ResourceExhaustedError("{}. The pools are set by kv_sliding_pages / kv_full_pages",
                                  plan.status().message());
  }
  // A plan for `seqs` running sequences of up to `len` tokens whose full pool follows them.
  auto fits = [&](int64_t seqs, int64_t len) {
    KvPoolPlanOptions t = o;
    t.max_running_seqs = static_cast<int32_t>(seqs);
    t.max_seq_len = len;
    absl::StatusOr<KvPoolPlan> p = PlanKvPools(t);
    return p.ok() && follows(*p, seqs, len);
  };
  auto need = [&](int64_t seqs, int64_t len) {
    KvPoolPlanOptions t = o;
    t.max_running_seqs = static_cast<int32_t>(seqs);
    t.max_seq_len = len;
    return FormatBytes(KvMinimumBytes(t));
  };
  const std::string budget_note =
      r.user_budget || r.budget_origin.empty() ? "" : fmt::format(" ({})", r.budget_origin);
  const std::string budget = FormatBytes(o.budget_bytes);
  const int64_t seqs =
      LargestFitting(1, o.max_running_seqs - 1, [&](int64_t s) { return fits(s, o.max_seq_len); });
  if (plan.ok()) {
    // The windows of the default limit fit, but leave the full pool short of its sequences. One
    // sequence always follows (the full pool's minimum is one max_seq_len sequence).
    const int64_t full_holds = plan->groups[kFull].pages / planned_pages(o.max_seq_len);
    result.max_running_seqs = static_cast<int32_t>(std::max<int64_t>(seqs, 1));
    result.warning = fmt::format(
        "kv: the {} KV budget holds the sliding windows of the default {} running sequences, but "
        "then its full-attention pool holds only {} sequences of {} tokens; running at most {} "
        "sequences, not the default {}, so that it holds every one. Set max_running_seqs, "
        "max_model_len or kv_memory_bytes to choose otherwise",
        budget, o.max_running_seqs, full_holds, planned_tokens(o.max_seq_len),
        result.max_running_seqs, o.max_running_seqs);
  } else if (seqs >= 1) {
    if (r.user_running_seqs) {
      return ResourceExhaustedError(
          "kv: max_running_seqs {} does not fit: the sliding windows of {} sequences and one "
          "{}-token sequence need {} of the {} KV budget{}. Set max_running_seqs <= {}, lower "
          "max_model_len, or raise kv_memory_bytes to >= {}",
          o.max_running_seqs, o.max_running_seqs, o.max_seq_len,
          need(o.max_running_seqs, o.max_seq_len), budget, budget_note, seqs,
          need(o.max_running_seqs, o.max_seq_len));
    }
    result.max_running_seqs = static_cast<int32_t>(seqs);
    result.warning = fmt::format(
        "kv: the {} KV budget holds the sliding windows of {} running sequences next to one "
        "{}-token sequence and a full-attention pool for each of them at {} tokens, not the "
        "default {} (whose windows and one such sequence need {}); running at most {} sequences. "
        "Set max_running_seqs, max_model_len or kv_memory_bytes to choose otherwise",
        budget, seqs, o.max_seq_len, planned_tokens(o.max_seq_len), o.max_running_seqs,
        need(o.max_running_seqs, o.max_seq_len), seqs);
  } else {
    // Not even one sequence of this length fits: the context length must give.
    const int64_t s = r.user_running_seqs ? o.max_running_seqs : 1;
    const int64_t len = LargestFitting(1, o.max_seq_len - 1, [&](int64_t l) { return fits(s, l); });
    // A default context is not lowered into uselessness: below this it is an error.
    const int64_t shortest = r.user_max_seq_len
                                 ? 2 * static_cast<int64_t>(o.page_size)
                                 : std::min<int64_t>(kShortestDefaultContext, o.max_seq_len);
    if (len < shortest) {
      return ResourceExhaustedError(
          "kv: the {} KV budget{} cannot hold even {} sequence(s) of {} tokens (they need {}). "
          "Free device memory, or raise kv_memory_bytes",
          budget, budget_note, s, shortest, need(s, shortest));
    }
    if (r.user_max_seq_len) {
      return ResourceExhaustedError(
          "kv: max_model_len {} does not fit: {} sequence(s) of {} tokens need {} of the {} KV "
          "budget{}. Set max_model_len <= {}{}, or raise kv_memory_bytes to >= {}",
          o.max_seq_len, s, o.max_seq_len, need(s, o.max_seq_len), budget, budget_note, len,
          r.user_running_seqs ? " or lower max_running_seqs" : "", need(s, o.max_seq_len));
    }
    result.max_running_seqs = static_cast<int32_t>(s);
    result.max_seq_len = len;
    result.warning = fmt::format(
        "kv: the {} KV budget cannot hold one sequence of the default {} tokens (it needs {}); "
        "max_model_len lowered to {}{}. Set max_model_len or kv_memory_bytes to choose otherwise",
        budget, o.max_seq_len, need(s, o.max_seq_len), len,
        s < o.max_running_seqs ? fmt::format(" and max_running_seqs to {}", s) : "");
  }
  KvPoolPlanOptions t = o;
  t.max_running_seqs = result.max_running_seqs;
  t.max_seq_len = result.max_seq_len;
  GANNET_ASSIGN_OR_RETURN(result.plan, PlanKvPools(t));
  return result;
}

}  // namespace gannet::kv

// Randomized property test of speculative-decoding scheduling against the KV manager's invariants:
// 10,000 simulated engine rounds (lib/engine/engine.cc RunStep without a model) over several KV
// configurations, with GANNET_DEBUG_KV=1 (CMake) and debug validation on.
//
// Each round: arrivals and cancels, Plan, ValidatePlanReads, BuildStepBatch, a simulated forward
// pass that reads and writes a shadow "device" (per group, per page slot: the token and position
// written there), StepCompleted, then per sampled sequence the accepted drafts and one more token
// through Append, CompleteVerify for verify chunks, and new random drafts the way
// lib/spec/spec_decoder.cc proposes them. After every round: KvManager::CheckInvariants, KV length
// == num_computed for every running request, the request's tokens equal the simulation's, every
// computed position of every running request and every slot of every prefix-cache block holds the
// token written for that position (so a rejected draft can never survive in reused KV), and the
// pools account for every page. Fixed seed per configuration: deterministic; failures name the
// configuration, seed and round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/kv/kv_manager.h"
#include "lib/sched/request.h"
#include "lib/sched/scheduler.h"
#include "lib/engine/step_batch.h"
#include "lib/sched/plan_inputs.h"
#include "tests/kv/kv_test_layout.h"

namespace gannet::sched {
namespace {

using kv::GroupIndex;
using kv::kAllKvGroups;
using kv::kNoPage;
using kv::KvGroup;
using kv::KvGroupName;

constexpr int32_t kVocab = 64;
constexpr int32_t kLogitsPerDraft = 4;  // stand-in for the drafter's [drafts, vocab] rows
constexpr int kMaxDrafts = 8;

struct Config {
  std::string name;
  int32_t page_size;
  int32_t window;  // 0 without a sliding group
  int32_t sliding_pages;
  int32_t full_pages;
  SchedulerOptions sched;
  int rounds;
  uint64_t seed;
  kv::BlockHashFn hash = nullptr;
};

// Collides constantly: the prefix cache stops caching a chain at a collision.
uint64_t WeakHash(uint64_t parent, absl::Span<const int32_t> tokens) {
  return parent * 8 + static_cast<uint64_t>(tokens[0] % 4) * 2 + tokens.back() % 2 + 1;
}

struct Slot {
  int32_t token = -1;
  int64_t pos = -1;
};

// What the simulation knows about a live request (owned by the scheduler).
struct Sim {
  Request* r = nullptr;
  std::vector<int32_t> tokens;    // what the request's tokens must be
  std::vector<int32_t> proposed;  // the drafts last proposed
  bool want_logits = false;       // the drafter hands out logits rows (sampled requests)
  bool cancelled = false;
  bool stop_string = false;  // the last Append reported a stop string
  int64_t drafted = 0;
  int64_t accepted = 0;
  bool scheduled_once = false;
  int64_t deadline_round = -1;  // >= 0: expires at this round (virtual clock)
  bool step_failed = false;     // failed with a step the runner could not run
};

class Harness {
 public:
  explicit Harness(const Config& c) : c_(c), rng_(c.seed) {
    kv::KvManagerOptions options;
    options.enable_prefix_cache = true;
    options.debug_validate = true;
    options.block_hash = c.hash;
    const kv::KvLayout layout =
        kv::TestKvLayout(c.page_size, c.window, c.sliding_pages, c.full_pages);
    kv_ = kv::KvManager::Create(layout, options).value();
    sched_ = std::make_unique<Scheduler>(c.sched, kv_.get());
    for (KvGroup g : kAllKvGroups) {
      memory_[GroupIndex(g)].resize(static_cast<size_t>(layout.num_pages[GroupIndex(g)]) *
                                    c.page_size);
    }
    // Documents that prompts share prefixes of.
    for (int d = 0; d < 4; ++d) {
      std::vector<int32_t> doc(c.sched.max_model_len);
      for (auto& t : doc) t = Token();
      docs_.push_back(doc);
    }
  }

  void Run() {
    ASSERT_TRUE(kv_->debug_validate());
    for (round_ = 0; round_ < c_.rounds; ++round_) {
      Round(/*arrivals=*/true);
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Drain: no new arrivals for a few rounds, then what is left (mid-prefill, drafts pending,
    // waiting) is cancelled: every page must come back.
    for (int i = 0; i < 12 && !sched_->idle(); ++i, ++round_) {
      Round(/*arrivals=*/false);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (auto& [id, s] : sims_) {
      if (s.r->state != RequestState::kFinished) {
        s.cancelled = true;
        ASSERT_TRUE(sched_->Cancel(id)) << Where();
        ++counts_["drain_cancel"];
      }
    }
    TakeRetired();
    if (::testing::Test::HasFatalFailure()) return;
    CheckAll();
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(sims_.empty()) << Where();
    ASSERT_TRUE(sched_->idle()) << Where();
    ASSERT_EQ(kv_->num_sequences(), 0) << Where();
    int64_t cached_pages[2] = {0, 0};
    kv_->ForEachCachedBlock(
        [&](int64_t, absl::Span<const int32_t>, const kv::PerGroup<int32_t>& p) {
          for (KvGroup g : kAllKvGroups) cached_pages[GroupIndex(g)] += p[GroupIndex(g)] != kNoPage;
        });
    for (KvGroup g : kAllKvGroups) {
      const kv::PoolUsage u = kv_->Usage(g);
      EXPECT_EQ(u.owned, 0) << KvGroupName(g) << " " << Where();
      EXPECT_EQ(u.free + u.cached, u.capacity) << KvGroupName(g) << " " << Where();
      EXPECT_EQ(u.cached, cached_pages[GroupIndex(g)]) << KvGroupName(g) << " " << Where();
    }
    Report();
  }

 private:
  std::string Where() const {
    return "[config " + c_.name + ", seed " + std::to_string(c_.seed) + ", round " +
           std::to_string(round_) + "]";
  }
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  // The engine's clock as the round number: deadlines expire deterministically.
  static Clock::time_point VirtualTime(int64_t round) {
    return Clock::time_point(std::chrono::seconds(round));
  }
  int32_t Token() { return static_cast<int32_t>(Uniform(0, kVocab - 1)); }
  bool Has(KvGroup g) const { return kv_->has_group(g); }
  int64_t Length(const Request* r) const {
    auto len = kv_->Length(r->kv_id());
    return len.ok() ? *len : -1;
  }
  absl::Span<const int32_t> Table(int64_t seq, KvGroup g) const {
    auto table = kv_->PageTable(seq, g);
    return table.ok() ? *table : absl::Span<const int32_t>();
  }
  Slot& At(KvGroup g, int32_t page, int64_t pos) {
    return memory_[GroupIndex(g)][static_cast<size_t>(page) * c_.page_size + pos % c_.page_size];
  }
  int64_t SlidingFloor(int64_t next) const {
    return Has(KvGroup::kSliding) ? std::max<int64_t>(0, next - c_.window + 1) : 0;
  }

  // ---- Arrivals and cancels ----

  void Arrive() {
    RequestSpec spec;
    spec.id = next_id_++;
    const int64_t max_len = c_.sched.max_model_len;
    const int64_t kind = Uniform(0, 99);
    if (kind < 50) {
      // A document prefix, sometimes with a private suffix: prefix-cache hits.
      const auto& doc = docs_[Uniform(0, static_cast<int64_t>(docs_.size()) - 1)];
      spec.prompt.assign(doc.begin(), doc.begin() + Uniform(1, max_len * 2 / 3));
      if (Coin(0.5)) {
        for (int64_t i = Uniform(1, 12); i > 0; --i) spec.prompt.push_back(Token());
      }
    } else if (kind < 65 && !past_prompts_.empty()) {
      // A repeat of an earlier prompt (with what it generated, now and then): long hits.
      spec.prompt = past_prompts_[Uniform(0, static_cast<int64_t>(past_prompts_.size()) - 1)];
    } else {
      for (int64_t i = Uniform(1, max_len / 2); i > 0; --i) spec.prompt.push_back(Token());
    }
    if (Coin(0.01)) {
      // Invalid: too long for the context, or empty.
      spec.prompt.resize(Coin(0.5) ? max_len + Uniform(0, 4) : 0, 5);
    } else if (static_cast<int64_t>(spec.prompt.size()) > max_len - 2) {
      spec.prompt.resize(max_len - 2);
    }
    const int64_t mt = Uniform(0, 99);
    spec.max_tokens = mt < 10   ? 0
                      : mt < 35 ? static_cast<int32_t>(Uniform(1, 3))
                                : static_cast<int32_t>(Uniform(4, 48));
    if (Coin(0.2)) spec.min_tokens = static_cast<int32_t>(Uniform(1, 6));
    if (Coin(0.7)) {
      for (int32_t t = 0; t < 4; ++t) {
        if (Coin(0.4)) spec.stop_token_ids.push_back(t);  // sorted, as the engine keeps them
      }
    }
    spec.priority = Coin(0.1) ? 1 : 0;
    int64_t deadline_round = -1;
    if (Coin(0.03)) {
      deadline_round = round_ + Uniform(0, 40);
      spec.deadline = VirtualTime(deadline_round);
    }
    const bool sampled = Coin(0.4);
    if (sampled) spec.sampling.temperature = 0.8f;
    auto req = std::make_unique<Request>(spec);
    req->speculate = Coin(0.9);
    Request* raw = req.get();
    const absl::Status st = sched_->Add(std::move(req));
    const int64_t n = static_cast<int64_t>(spec.prompt.size());
    if (n == 0 || n >= max_len) {
      ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st << " " << Where();
      ++counts_["add_rejected"];
      return;
    }
    if (Has(KvGroup::kFull) &&
        (n + 1 + c_.page_size - 1) / c_.page_size > kv_->Usage(KvGroup::kFull).capacity) {
      ASSERT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st << " " << Where();
      ++counts_["add_rejected"];
      return;
    }
    ASSERT_TRUE(st.ok()) << st << " " << Where();
    Sim s;
    s.r = raw;
    s.tokens = spec.prompt;
    s.want_logits = sampled;
    s.deadline_round = deadline_round;
    sims_.emplace(spec.id, std::move(s));
    if (past_prompts_.size() < 64 && Coin(0.3)) past_prompts_.push_back(spec.prompt);
    ++counts_["arrivals"];
  }

  void CancelSome() {
    if (Coin(0.03) && !sims_.empty()) {
      auto it = sims_.begin();
      std::advance(it, Uniform(0, static_cast<int64_t>(sims_.size()) - 1));
      it->second.cancelled = true;
      const bool was_running = it->second.r->state == RequestState::kRunning;
      ASSERT_TRUE(sched_->Cancel(it->first)) << Where();
      ASSERT_FALSE(kv_->HasSequence(static_cast<int64_t>(it->first))) << Where();
      ++counts_[was_running ? "cancel_running" : "cancel_waiting"];
    }
    if (Coin(0.005)) {
      ASSERT_FALSE(sched_->Cancel(next_id_ + 1000)) << Where();
    }
  }

  // ---- One engine round ----

  void Round(bool arrivals) {
    if (arrivals) {
      const int64_t live = static_cast<int64_t>(sims_.size());
      const int64_t n = live < 4 ? Uniform(1, 3) : live < 14 ? Uniform(0, 1) * Coin(0.6) : 0;
      for (int64_t i = 0; i < n; ++i) {
        Arrive();
        if (::testing::Test::HasFatalFailure()) return;
      }
      CancelSome();
      if (::testing::Test::HasFatalFailure()) return;
    } else if (round_ % 50 == 0) {
      CancelSome();
    }
    sched_->ExpireDeadlines(VirtualTime(round_));
    TakeRetired();  // cancels and expired deadlines
    if (::testing::Test::HasFatalFailure()) return;

    const bool was_idle = sched_->idle();
    running_before_.clear();
    for (auto& [id, sim] : sims_) {
      if (sim.r->state == RequestState::kRunning) running_before_.insert(sim.r);
    }
    const StepPlan plan = sched_->Plan();
    TakeRetired();  // failures found by Plan
    if (::testing::Test::HasFatalFailure()) return;
    if (plan.empty()) {
      if (!was_idle) ++empty_plans_;
      // Empty only for the round right after a request was left alone and failed, with the
      // request it preempted waiting one round (no thrashing); never twice in a row.
      ASSERT_LT(empty_plans_, 2) << "the scheduler makes no progress " << Where();
      CheckAll();
      return;
    }
    empty_plans_ = 0;
    ++counts_["steps"];
    CheckPlan(plan);
    if (::testing::Test::HasFatalFailure()) return;
    const absl::Status reads = ValidatePlanReads(plan, *kv_);
    ASSERT_TRUE(reads.ok()) << reads << " " << Where();
    CheckBatch(plan);
    if (::testing::Test::HasFatalFailure()) return;
    Forward(plan);
    if (::testing::Test::HasFatalFailure()) return;
    if (Coin(0.002)) {
      // The runner failed the step: the engine fails every request in it, verify chunks with
      // their grown KV included.
      for (const ScheduledSeq& q : plan.seqs) {
        if (q.request->state != RequestState::kRunning) continue;
        sims_[q.request->spec.id].step_failed = true;
        sched_->Finish(q.request, FinishReason::kError);
      }
      ++counts_["failed_steps"];
      TakeRetired();
      if (::testing::Test::HasFatalFailure()) return;
      CheckAll();
      return;
    }

    sched_->StepCompleted(plan);
    for (const ScheduledSeq& q : plan.seqs) {
      if (!q.sample) {
        ASSERT_EQ(q.request->num_computed, q.start + q.num_tokens) << Where();
        continue;
      }
      Emit(q);
      if (::testing::Test::HasFatalFailure()) return;
      Propose(q.request);
    }
    TakeRetired();
    if (::testing::Test::HasFatalFailure()) return;
    CheckAll();
  }

  // Plan shape: budget, running limit, chunk positions, sample flags and verify chunks.
  void CheckPlan(const StepPlan& plan) {
    int64_t total = 0, decode_seqs = 0, decode_tokens = 0;
    std::set<const Request*> seen;
    ASSERT_LE(static_cast<int64_t>(plan.seqs.size()), c_.sched.max_running_seqs) << Where();
    for (const ScheduledSeq& q : plan.seqs) {
      Request* r = q.request;
      ASSERT_TRUE(seen.insert(r).second) << "request " << r->spec.id << " twice " << Where();
      ASSERT_TRUE(sims_.contains(r->spec.id)) << Where();
      Sim& s = sims_[r->spec.id];
      ASSERT_EQ(r->state, RequestState::kRunning) << Where();
      ASSERT_GE(q.num_tokens, 1) << Where();
      ASSERT_EQ(q.start, r->num_computed) << "request " << r->spec.id << " " << Where();
      ASSERT_EQ(Length(r), q.start + q.num_tokens) << "request " << r->spec.id << " " << Where();
      ASSERT_LE(q.start + q.num_tokens - q.num_drafts, r->num_tokens()) << Where();
      ASSERT_EQ(q.sample, q.start + q.num_tokens - q.num_drafts == r->num_tokens()) << Where();
      if (!s.scheduled_once && q.start > 0) {
        ++counts_["prefix_hit_admissions"];
        hit_tokens_ += q.start;
      }
      s.scheduled_once = true;
      if (q.num_drafts > 0) {
        ++counts_["verify_chunks"];
        ASSERT_TRUE(q.sample) << Where();
        ASSERT_EQ(q.num_tokens, q.num_drafts + 1) << Where();
        ASSERT_EQ(q.start, r->num_tokens() - 1) << Where();
        ASSERT_EQ(static_cast<int64_t>(r->drafts.size()), q.num_drafts) << Where();
        ASSERT_LE(q.num_drafts, MaxUsefulDrafts(*r, c_.sched.max_model_len)) << Where();
        ASSERT_LE(r->drafts.size(), s.proposed.size()) << Where();
        ASSERT_TRUE(std::equal(r->drafts.begin(), r->drafts.end(), s.proposed.begin()))
            << "the verified drafts are not a prefix of the proposed ones " << Where();
        if (r->drafts.size() < s.proposed.size()) ++counts_["verify_cut"];
        std::vector<int32_t> want = {r->tokens.back()};
        want.insert(want.end(), r->drafts.begin(), r->drafts.end());
        ASSERT_EQ(r->verify_input, want) << Where();
        ASSERT_EQ(r->draft_logits.size(), s.want_logits ? r->drafts.size() * kLogitsPerDraft : 0u)
            << Where();
      } else {
        ASSERT_TRUE(r->drafts.empty() && r->verify_input.empty() && r->draft_logits.empty())
            << "request " << r->spec.id << " planned without its drafts keeps them " << Where();
        if (q.sample && !s.proposed.empty()) ++counts_["drafts_dropped"];
      }
      total += q.num_tokens;
      // A decode: running before this step with one token left (not a fresh admission).
      if (q.start == r->num_tokens() - 1 && running_before_.contains(r)) {
        ++decode_seqs;
        decode_tokens += q.num_tokens;
      }
    }
    ASSERT_EQ(total, plan.num_tokens) << Where();
    ASSERT_LE(total, c_.sched.max_step_tokens) << Where();
    if (c_.sched.max_prefill_tokens_while_decoding > 0 && decode_seqs > 0) {
      ASSERT_LE(total - decode_tokens, c_.sched.max_prefill_tokens_while_decoding) << Where();
      if (total - decode_tokens > 0) ++counts_["prefill_capped_steps"];
    }
    // Running requests left out of the plan keep their KV as it was.
    for (auto& [id, s] : sims_) {
      if (s.r->state == RequestState::kRunning && !seen.contains(s.r)) {
        ASSERT_EQ(Length(s.r), s.r->num_computed) << "request " << id << " " << Where();
        ++counts_["running_unscheduled"];
      }
    }
  }

  // The runner's view: tokens and page tables cover every position computed.
  void CheckBatch(const StepPlan& plan) {
    const runner::StepBatch batch = engine::BuildStepBatch(plan, *kv_);
    ASSERT_EQ(batch.seqs.size(), plan.seqs.size()) << Where();
    size_t rows = 0;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const ScheduledSeq& q = plan.seqs[i];
      const runner::SeqStep& step = batch.seqs[i];
      const Request& r = *q.request;
      ASSERT_EQ(step.start_pos, q.start) << Where();
      ASSERT_EQ(static_cast<int64_t>(step.tokens.size()), q.num_tokens) << Where();
      if (q.num_drafts > 0) {
        ASSERT_TRUE(std::equal(step.tokens.begin(), step.tokens.end(), r.verify_input.begin()))
            << Where();
        ASSERT_EQ(step.logits, runner::SeqStep::Logits::kAll) << Where();
        rows += q.num_drafts + 1;
      } else {
        ASSERT_TRUE(std::equal(step.tokens.begin(), step.tokens.end(), r.tokens.begin() + q.start))
            << Where();
        ASSERT_EQ(step.logits,
                  q.sample ? runner::SeqStep::Logits::kLast : runner::SeqStep::Logits::kNone)
            << Where();
        rows += q.sample ? 1 : 0;
      }
      const int64_t end = q.start + q.num_tokens;
      for (KvGroup g : kAllKvGroups) {
        const auto& table = step.page_table[GroupIndex(g)];
        if (!Has(g)) {
          ASSERT_TRUE(table.empty()) << Where();
          continue;
        }
        ASSERT_EQ(static_cast<int64_t>(table.size()), (end + c_.page_size - 1) / c_.page_size)
            << KvGroupName(g) << " " << Where();
        const int64_t first = g == KvGroup::kSliding ? SlidingFloor(q.start) : 0;
        for (int64_t pos = first; pos < end; ++pos) {
          const int32_t page = table[pos / c_.page_size];
          ASSERT_TRUE(page >= 0 && page < kv_->Usage(g).capacity)
              << "request " << r.spec.id << " " << KvGroupName(g) << " position " << pos
              << " -> page " << page << " " << Where();
        }
      }
    }
    ASSERT_EQ(batch.device_sampling.size(), rows) << Where();
    ASSERT_EQ(batch.host_logits.size(), rows) << Where();
  }

  // The simulated forward pass: every read of cached KV must find the token of that position;
  // every write goes to a page that only this sequence references and no cached block holds.
  void Forward(const StepPlan& plan) {
    kv::PerGroup<std::map<int32_t, int>> refs;
    for (const auto& [id, s] : sims_) {
      if (!s.r->has_kv_sequence) continue;
      for (KvGroup g : kAllKvGroups) {
        if (!Has(g)) continue;
        for (int32_t p : Table(s.r->kv_id(), g)) {
          if (p != kNoPage) ++refs[GroupIndex(g)][p];
        }
      }
    }
    kv::PerGroup<std::set<int32_t>> cached;
    kv_->ForEachCachedBlock(
        [&](int64_t, absl::Span<const int32_t>, const kv::PerGroup<int32_t>& p) {
          for (KvGroup g : kAllKvGroups) {
            if (p[GroupIndex(g)] != kNoPage) cached[GroupIndex(g)].insert(p[GroupIndex(g)]);
          }
        });
    for (const ScheduledSeq& q : plan.seqs) {
      const Request& r = *q.request;
      for (KvGroup g : kAllKvGroups) {
        if (!Has(g)) continue;
        const auto table = Table(r.kv_id(), g);
        for (int64_t pos = g == KvGroup::kSliding ? SlidingFloor(q.start) : 0; pos < q.start;
             ++pos) {
          const Slot& slot = At(g, table[pos / c_.page_size], pos);
          ASSERT_TRUE(slot.token == r.tokens[pos] && slot.pos == pos)
              << "request " << r.spec.id << " reads " << KvGroupName(g) << " position " << pos
              << " (page " << table[pos / c_.page_size] << "): found token " << slot.token
              << " of position " << slot.pos << ", want " << r.tokens[pos] << " " << Where();
        }
      }
    }
    for (const ScheduledSeq& q : plan.seqs) {
      const Request& r = *q.request;
      const int32_t* tokens = q.num_drafts > 0 ? r.verify_input.data() : r.tokens.data() + q.start;
      for (KvGroup g : kAllKvGroups) {
        if (!Has(g)) continue;
        const auto table = Table(r.kv_id(), g);
        for (int64_t pos = q.start; pos < q.start + q.num_tokens; ++pos) {
          const int32_t page = table[pos / c_.page_size];
          ASSERT_NE(page, kNoPage) << Where();
          ASSERT_EQ(refs[GroupIndex(g)][page], 1)
              << "request " << r.spec.id << " writes " << KvGroupName(g) << " position " << pos
              << " into page " << page << " shared by other tables " << Where();
          ASSERT_FALSE(cached[GroupIndex(g)].contains(page))
              << "request " << r.spec.id << " writes " << KvGroupName(g) << " position " << pos
              << " into page " << page << " that holds a prefix-cache block " << Where();
          At(g, page, pos) = Slot{tokens[pos - q.start], pos};
        }
      }
    }
  }

  // The engine's handling of a sampled sequence: the accepted drafts and one more token, stopping
  // where the request retires, then CompleteVerify for a verify chunk.
  void Emit(const ScheduledSeq& q) {
    Request* r = q.request;
    Sim& s = sims_[r->spec.id];
    const std::vector<int32_t> drafts = r->drafts;  // Append does not touch them; be safe
    int accepted = 0;
    if (q.num_drafts > 0) {
      const int64_t pick = Uniform(0, 9);
      accepted = pick < 3   ? 0
                 : pick < 6 ? q.num_drafts
                            : static_cast<int>(Uniform(0, q.num_drafts));
    }
    std::vector<int32_t> out(drafts.begin(), drafts.begin() + accepted);
    int32_t next = Token();
    // The token after a rejected draft differs from it (it is what rejected it).
    while (accepted < q.num_drafts && next == drafts[accepted]) next = Token();
    out.push_back(next);
    for (int32_t token : out) {
      if (r->state != RequestState::kRunning) break;  // stopped inside an accepted run
      const bool stop_string = Coin(0.005);
      sched_->Append(r, token, stop_string);
      s.tokens.push_back(token);
      s.stop_string = stop_string;
      ++counts_["tokens"];
      // Exactly the stop conditions retire it.
      const int64_t n_out = static_cast<int64_t>(s.tokens.size()) - r->prompt_len;
      const bool stop_id =
          n_out > r->spec.min_tokens &&
          std::count(r->spec.stop_token_ids.begin(), r->spec.stop_token_ids.end(), token) > 0;
      const bool length = (r->spec.max_tokens > 0 && n_out >= r->spec.max_tokens) ||
                          static_cast<int64_t>(s.tokens.size()) >= c_.sched.max_model_len;
      ASSERT_EQ(r->state == RequestState::kFinished, stop_id || stop_string || length)
          << "request " << r->spec.id << " after token " << token << " " << Where();
    }
    if (q.num_drafts > 0) {
      const bool running = r->state == RequestState::kRunning;
      const absl::Status st = sched_->CompleteVerify(q, accepted);
      ASSERT_TRUE(st.ok()) << st << " request " << r->spec.id << " " << Where();
      s.drafted += q.num_drafts;
      s.accepted += accepted;
      ASSERT_EQ(r->num_drafted, s.drafted) << Where();
      ASSERT_EQ(r->num_accepted, s.accepted) << Where();
      ++counts_[running ? "verify_completed" : "verify_after_stop"];
      counts_["drafts_verified"] += q.num_drafts;
      counts_["drafts_accepted"] += accepted;
      if (running) {
        ASSERT_EQ(r->num_computed, q.start + 1 + accepted) << Where();
        ASSERT_EQ(Length(r), r->num_computed) << Where();
        ASSERT_EQ(r->num_tokens(), r->num_computed + 1) << Where();
        ASSERT_TRUE(r->drafts.empty() && r->verify_input.empty() && r->draft_logits.empty())
            << Where();
        if (accepted < q.num_drafts) ++counts_["rollbacks"];
        if ((q.start + q.num_tokens + c_.page_size - 1) / c_.page_size >
            (r->num_computed + c_.page_size - 1) / c_.page_size) {
          ++counts_["rollbacks_releasing_pages"];
        }
      }
    } else if (r->state == RequestState::kRunning) {
      ASSERT_EQ(r->num_tokens(), r->num_computed + 1) << Where();
    }
  }

  // What SpecDecoder::Propose does with a drafter's output, with random drafts.
  void Propose(Request* r) {
    Sim& s = sims_[r->spec.id];
    r->ClearDrafts();
    s.proposed.clear();
    if (!r->speculate || r->state != RequestState::kRunning) return;
    if (Coin(0.03)) return;  // drafting failed: the request goes on without drafts
    const int k = static_cast<int>(Uniform(0, kMaxDrafts));
    const int cap =
        static_cast<int>(std::min<int64_t>(k, MaxUsefulDrafts(*r, c_.sched.max_model_len)));
    if (cap < 1) return;
    std::vector<int32_t> t(cap);
    for (auto& x : t) x = Token();
    int n = cap;
    for (int i = 0; i < n; ++i) {
      const bool may_stop = r->num_output() + i + 1 > r->spec.min_tokens;
      if (may_stop &&
          std::binary_search(r->spec.stop_token_ids.begin(), r->spec.stop_token_ids.end(), t[i])) {
        n = i + 1;
        break;
      }
    }
    r->drafts.assign(t.begin(), t.begin() + n);
    if (s.want_logits) r->draft_logits.assign(static_cast<size_t>(n) * kLogitsPerDraft, 0.5f);
    s.proposed = r->drafts;
    ++counts_["proposals"];
  }

  void TakeRetired() {
    for (Retired& ret : sched_->TakeRetired()) {
      const Request& r = *ret.request;
      auto it = sims_.find(r.spec.id);
      ASSERT_NE(it, sims_.end()) << "unknown retired request " << r.spec.id << " " << Where();
      const Sim& s = it->second;
      ASSERT_EQ(it->second.r, &r) << Where();
      ASSERT_EQ(r.state, RequestState::kFinished) << Where();
      ASSERT_FALSE(r.has_kv_sequence) << Where();
      ASSERT_FALSE(kv_->HasSequence(r.kv_id()))
          << "request " << r.spec.id << " leaks KV " << Where();
      ASSERT_EQ(r.tokens, s.tokens) << Where();
      ASSERT_LE(r.num_tokens(), c_.sched.max_model_len) << Where();
      if (r.spec.max_tokens > 0) {
        ASSERT_LE(r.num_output(), r.spec.max_tokens) << Where();
      }
      switch (r.finish) {
        case FinishReason::kCancelled:
          ASSERT_TRUE(s.cancelled) << Where();
          ++counts_["finish_cancelled"];
          break;
        case FinishReason::kStop: {
          const bool stop_id = r.num_output() > r.spec.min_tokens &&
                               std::count(r.spec.stop_token_ids.begin(),
                                          r.spec.stop_token_ids.end(), r.tokens.back()) > 0;
          ASSERT_TRUE(stop_id || s.stop_string) << Where();
          ++counts_["finish_stop"];
          break;
        }
        case FinishReason::kLength:
          ASSERT_TRUE((r.spec.max_tokens > 0 && r.num_output() == r.spec.max_tokens) ||
                      r.num_tokens() == c_.sched.max_model_len)
              << Where();
          ++counts_["finish_length"];
          break;
        case FinishReason::kError:
          if (s.step_failed) {
            ++counts_["finish_error_step"];
          } else if (ret.error.code() == absl::StatusCode::kDeadlineExceeded) {
            ASSERT_TRUE(s.deadline_round >= 0 && s.deadline_round <= round_) << Where();
            ++counts_["finish_deadline"];
          } else {
            // Otherwise only a request that cannot fit in the pools even alone fails.
            ASSERT_EQ(ret.error.code(), absl::StatusCode::kResourceExhausted)
                << ret.error << " " << Where();
            ++counts_["finish_error"];
          }
          break;
        default:
          FAIL() << "request " << r.spec.id << " retired without a reason " << Where();
      }
      sims_.erase(it);
    }
  }

  // ---- After every round ----

  void CheckAll() {
    const absl::Status inv = kv_->CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv << " " << Where();
    int32_t running = 0, waiting = 0;
    kv::PerGroup<std::set<int32_t>> referenced;
    for (const auto& [id, s] : sims_) {
      const Request& r = *s.r;
      ASSERT_EQ(r.tokens, s.tokens) << "request " << id << " " << Where();
      if (r.state == RequestState::kWaiting) {
        ++waiting;
        ASSERT_FALSE(r.has_kv_sequence) << Where();
        ASSERT_FALSE(kv_->HasSequence(r.kv_id())) << Where();
        ASSERT_EQ(r.num_computed, 0) << Where();
        ASSERT_TRUE(r.drafts.empty() && r.verify_input.empty()) << Where();
        continue;
      }
      ASSERT_EQ(r.state, RequestState::kRunning) << Where();
      ++running;
      ASSERT_TRUE(r.has_kv_sequence && kv_->HasSequence(r.kv_id())) << Where();
      // The KV manager holds exactly the computed tokens: no rejected draft lingers past them.
      ASSERT_EQ(Length(&r), r.num_computed) << "request " << id << " " << Where();
      ASSERT_LT(r.num_computed, r.num_tokens()) << "request " << id << " " << Where();
      ASSERT_TRUE(r.verify_input.empty()) << Where();
      if (!r.drafts.empty()) {
        ASSERT_EQ(r.num_computed + 1, r.num_tokens())
            << "drafts on a prefilling request " << Where();
        ASSERT_EQ(r.drafts, s.proposed) << Where();
      }
      // Every computed position this sequence can still read holds its token.
      for (KvGroup g : kAllKvGroups) {
        if (!Has(g)) continue;
        const auto table = Table(r.kv_id(), g);
        for (int64_t pos = 0; pos < r.num_computed; ++pos) {
          const int32_t page = table[pos / c_.page_size];
          if (page == kNoPage) {
            ASSERT_TRUE(g == KvGroup::kSliding && pos < SlidingFloor(r.num_computed))
                << "request " << id << " lost " << KvGroupName(g) << " position " << pos << " "
                << Where();
            continue;
          }
          referenced[GroupIndex(g)].insert(page);
          const Slot& slot = At(g, page, pos);
          ASSERT_TRUE(slot.token == r.tokens[pos] && slot.pos == pos)
              << "request " << id << " " << KvGroupName(g) << " position " << pos << " (page "
              << page << ") holds token " << slot.token << " of position " << slot.pos << ", want "
              << r.tokens[pos] << " " << Where();
        }
      }
    }
    ASSERT_EQ(running, sched_->num_running()) << Where();
    ASSERT_EQ(waiting, sched_->num_waiting()) << Where();
    ASSERT_EQ(kv_->num_sequences(), running) << "KV sequences leak " << Where();
    // Every prefix-cache block's pages hold its tokens: rollback never leaves a rejected draft
    // in a block another request can attach.
    bool ok = true;
    std::ostringstream bad;
    kv_->ForEachCachedBlock(
        [&](int64_t block, absl::Span<const int32_t> tokens, const kv::PerGroup<int32_t>& pages) {
          for (KvGroup g : kAllKvGroups) {
            const int32_t page = pages[GroupIndex(g)];
            if (!ok || page == kNoPage) continue;
            for (int64_t j = 0; j < c_.page_size; ++j) {
              const int64_t pos = block * c_.page_size + j;
              const Slot& slot = At(g, page, pos);
              if (slot.token != tokens[j] || slot.pos != pos) {
                ok = false;
                bad << "cached block " << block << " " << KvGroupName(g) << " page " << page
                    << " slot " << j << ": token " << slot.token << " of position " << slot.pos
                    << ", want token " << tokens[j] << " of position " << pos;
                return;
              }
            }
          }
        });
    ASSERT_TRUE(ok) << bad.str() << " " << Where();
    for (KvGroup g : kAllKvGroups) {
      const kv::PoolUsage u = kv_->Usage(g);
      ASSERT_EQ(u.free + u.owned + u.cached, u.capacity) << Where();
      ASSERT_EQ(u.owned, static_cast<int32_t>(referenced[GroupIndex(g)].size()))
          << KvGroupName(g) << " pages owned outside any running request " << Where();
    }
  }

  void Report() {
    const kv::KvStats& st = kv_->stats();
    std::printf(
        "%s (seed %llu): %d rounds + drain to %lld, %lld preemptions, prefix hit rate %.2f "
        "(%lld tokens, %lld at admission), evictions sliding %lld full %lld\n ",
        c_.name.c_str(), static_cast<unsigned long long>(c_.seed), c_.rounds,
        static_cast<long long>(round_), static_cast<long long>(sched_->num_preemptions()),
        st.HitRate(), static_cast<long long>(st.prefix_hit_tokens),
        static_cast<long long>(hit_tokens_), static_cast<long long>(st.evictions[0]),
        static_cast<long long>(st.evictions[1]));
    for (const auto& [k, v] : counts_)
      std::printf(" %s=%lld", k.c_str(), static_cast<long long>(v));
    std::printf("\n");
    // The run exercised what it is for.
    EXPECT_GT(counts_["verify_completed"], c_.rounds / 4) << Where();
    EXPECT_GT(counts_["rollbacks"], c_.rounds / 10) << Where();
    if (c_.sched.max_step_tokens < 4 * c_.sched.max_running_seqs) {
      // Decodes come first, so only a budget below the running sequences' verify chunks cuts.
      EXPECT_GT(counts_["verify_cut"], 0) << Where();
    }
    if (c_.sched.max_prefill_tokens_while_decoding > 0) {
      EXPECT_GT(counts_["prefill_capped_steps"], 0) << Where();
    }
    EXPECT_GT(counts_["verify_after_stop"], 0) << Where();
    EXPECT_GT(counts_["prefix_hit_admissions"], 0) << Where();
    EXPECT_GT(sched_->num_preemptions(), 0) << Where();
    EXPECT_GT(counts_["cancel_running"], 0) << Where();
    EXPECT_GT(counts_["finish_stop"], 0) << Where();
    EXPECT_GT(counts_["finish_length"], 0) << Where();
    if (c_.page_size > 1) {
      EXPECT_GT(counts_["rollbacks_releasing_pages"], 0) << Where();
    }
  }

  const Config c_;
  std::mt19937_64 rng_;
  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  kv::PerGroup<std::vector<Slot>> memory_;
  std::vector<std::vector<int32_t>> docs_;
  std::vector<std::vector<int32_t>> past_prompts_;
  std::map<uint64_t, Sim> sims_;
  std::map<std::string, int64_t> counts_;
  std::set<const Request*> running_before_;  // running when the current Plan() began
  uint64_t next_id_ = 1;
  int64_t round_ = 0;
  int empty_plans_ = 0;
  int64_t hit_tokens_ = 0;
};

SchedulerOptions Opts(int64_t max_model_len = 96) {
  return {.max_running_seqs = 6, .max_step_tokens = 24, .max_model_len = max_model_len};
}

void PrintTo(const Config& c, std::ostream* os) { *os << c.name << " seed " << c.seed; }

// For soak runs: GANNET_SPEC_ROUNDS_SCALE=k runs k times the rounds, GANNET_SPEC_ROUNDS_SEED=s
// replaces each configuration's seed by s + its own.
int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 0) : fallback;
}

class SpecRoundsTest : public ::testing::TestWithParam<Config> {};

TEST_P(SpecRoundsTest, RandomRounds) {
  Config c = GetParam();
  c.rounds = static_cast<int>(c.rounds * EnvInt("GANNET_SPEC_ROUNDS_SCALE", 1));
  c.seed += static_cast<uint64_t>(EnvInt("GANNET_SPEC_ROUNDS_SEED", 0));
  Harness h(c);
  h.Run();
}

// 10,000 rounds in all. Pools are small enough that requests are preempted and cached blocks
// evicted; the window (16) is shorter than most requests.
INSTANTIATE_TEST_SUITE_P(
    Configs, SpecRoundsTest,
    ::testing::Values(Config{"hybrid_p1", 1, 16, 110, 260, Opts(), 1400, 0x5eed0001},
                      Config{"hybrid_p4", 4, 16, 34, 68, Opts(), 1400, 0x5eed0004},
                      Config{"hybrid_p16", 16, 16, 14, 18, Opts(), 1400, 0x5eed0016},
                      // 144 tokens, less than max_model_len: a long request fails even alone.
                      Config{"full_only_p4", 4, 0, 0, 36, Opts(160), 1000, 0x5eed0104},
                      Config{"sliding_only_p4", 4, 16, 22, 0, Opts(), 1000, 0x5eed0204},
                      Config{"hybrid_p4_weak_hash", 4, 16, 34, 68, Opts(), 950, 0x5eed0304,
                             WeakHash},
                      Config{"hybrid_p4_w10", 4, 10, 30, 68, Opts(), 950, 0x5eed0404},
                      Config{"hybrid_p16_w6", 16, 6, 12, 18, Opts(), 950, 0x5eed0516},
                      // A budget of 8 tokens: verify chunks are cut to fit most of the time.
                      Config{"hybrid_p4_budget8",
                             4,
                             16,
                             20,
                             36,
                             {.max_running_seqs = 4, .max_step_tokens = 8, .max_model_len = 96},
                             950,
                             0x5eed0604},
                      // Prompt tokens capped at 5 per step while decodes run.
                      Config{"hybrid_p4_prefill_cap5",
                             4,
                             16,
                             34,
                             68,
                             {.max_running_seqs = 6,
                              .max_step_tokens = 24,
                              .max_model_len = 96,
                              .max_prefill_tokens_while_decoding = 5},
                             950,
                             0x5eed0704}),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace
}  // namespace gannet::sched

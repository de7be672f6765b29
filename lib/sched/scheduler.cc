#include "lib/sched/scheduler.h"

#include <algorithm>

#include "lib/common/check.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"

namespace gannet::sched {

Scheduler::Scheduler(const SchedulerOptions& options, kv::KvManager* kv)
    : options_(options), kv_(kv) {}

bool Scheduler::Before(const Request* a, const Request* b) {
  if (a->spec.priority != b->spec.priority) return a->spec.priority > b->spec.priority;
  return a->arrival < b->arrival;
}

absl::Status Scheduler::Add(std::unique_ptr<Request> r) {
  const int64_t n = r->num_tokens();
  if (n == 0) return InvalidArgumentError("request {}: the prompt is empty", r->spec.id);
  if (n >= options_.max_model_len) {
    return InvalidArgumentError(
        "request {}: the prompt has {} tokens but the context holds {} (max_model_len): at least "
        "one must remain for the output",
        r->spec.id, n, options_.max_model_len);
  }
  // The whole prompt plus one token must fit in the full-attention pool on its own, or the
  // request could never run.
  if (kv_->has_group(kv::KvGroup::kFull)) {
    const int64_t pages = (n + 1 + kv_->page_size() - 1) / kv_->page_size();
    const int64_t capacity = kv_->Usage(kv::KvGroup::kFull).capacity;
    if (pages > capacity) {
      return ResourceExhaustedError(
          "request {}: the prompt needs {} full-attention KV pages but the pool has {}", r->spec.id,
          pages, capacity);
    }
  }
  if (requests_.contains(r->spec.id)) {
    return InvalidArgumentError("request {} already exists", r->spec.id);
  }
  if (!r->spec.image_blocks.empty()) {
    GANNET_RETURN_IF_ERROR(CheckImageBlocks(r->spec.image_blocks, r->prompt_len));
    // A prefill chunk never splits an image block (its tokens attend to each other, so they are
    // computed in one step): a block must fit in one step.
    for (size_t k = 0; k < r->spec.image_blocks.size(); ++k) {
      const ImageBlock& b = r->spec.image_blocks[k];
      if (b.size() > options_.max_step_tokens) {
        return InvalidArgumentError(
            "request {}: image block {} has {} tokens, more than a step computes "
            "(max_step_tokens {}); an image block is prefilled in one step",
            r->spec.id, k, b.size(), options_.max_step_tokens);
      }
    }
    r->image_block_ids = ImageBlockIds(r->spec.image_blocks, r->num_tokens());
    const int64_t p = kv_->page_size();
    r->page_salts = ImagePageSalts(r->spec.image_blocks, p, (r->prompt_len + p - 1) / p);
  }
  r->state = RequestState::kWaiting;
  r->arrival = next_arrival_++;
  waiting_.push_back(r.get());
  requests_.emplace(r->spec.id, std::move(r));
  return absl::OkStatus();
}

void Scheduler::ReleaseKv(Request* r) {
  if (!r->has_kv_sequence) return;
  absl::Status st = kv_->Free(r->kv_id());
  GANNET_CHECK(st.ok());
  r->has_kv_sequence = false;
}

void Scheduler::Retire(Request* r, FinishReason reason, absl::Status error) {
  ReleaseKv(r);
  auto erase = [&](std::vector<Request*>& v) {
    v.erase(std::remove(v.begin(), v.end(), r), v.end());
  };
  erase(running_);
  erase(waiting_);
  r->state = RequestState::kFinished;
  r->finish = reason;
  auto it = requests_.find(r->spec.id);
  GANNET_CHECK(it != requests_.end());
  retired_.push_back(Retired{std::move(it->second), std::move(error)});
  requests_.erase(it);
}

bool Scheduler::Cancel(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  Retire(it->second.get(), FinishReason::kCancelled);
  return true;
}

void Scheduler::ExpireDeadlines(Clock::time_point now) {
  std::vector<Request*> expired;
  for (auto& [id, r] : requests_) {
    if (r->spec.deadline <= now) expired.push_back(r.get());
  }
  for (Request* r : expired) {
    Retire(r, FinishReason::kError,
           absl::DeadlineExceededError(
               fmt::format("request {}: deadline exceeded after {} generated tokens", r->spec.id,
                           r->num_output())));
  }
}

void Scheduler::Preempt(Request* r) {
  ReleaseKv(r);
  r->ClearDrafts();
  r->num_computed = 0;
  r->state = RequestState::kWaiting;
  ++r->num_preemptions;
  ++num_preemptions_;
  preempted_now_.push_back(r);
  running_.erase(std::remove(running_.begin(), running_.end(), r), running_.end());
  waiting_.push_back(r);
  GANNET_LOG_DEBUG("scheduler: preempted request {} after {} tokens (recompute later)", r->spec.id,
                   r->num_tokens());
}

int32_t Scheduler::FitImageBlocks(const Request& r, int64_t start, int32_t n, int32_t room) {
  const int64_t end = start + n;
  if (r.spec.image_blocks.empty() || end >= r.num_tokens()) return n;
  const ImageBlock* b = ImageBlockAt(r.spec.image_blocks, end);
  if (b == nullptr || b->begin == end) return n;  // the cut is not inside a block
  // Cut before the block; a chunk that starts at (or, after a prefix-cache hit, inside) the
  // block takes the rest of it if the step has room, else waits for a step that has.
  if (b->begin > start) return static_cast<int32_t>(b->begin - start);
  return b->end - start <= room ? static_cast<int32_t>(b->end - start) : 0;
}

int64_t Scheduler::SlidingFirstNeeded(int64_t next_pos) const {
  return next_pos - kv_->sliding_window() + 1;
}

absl::Status Scheduler::EnsurePages(Request* r, int64_t new_len) {
  if (kv_->has_group(kv::KvGroup::kSliding)) {
    // For newly admitted sequences (running ones were released at the top of Plan).
    GANNET_RETURN_IF_ERROR(
        kv_->ReleaseSlidingBefore(r->kv_id(), SlidingFirstNeeded(r->num_computed)));
  }
  return kv_->Grow(r->kv_id(), new_len);
}

void Scheduler::PlanRunning(bool decoding, int32_t* budget, StepPlan* plan,
                            absl::flat_hash_set<const Request*>* planned) {
  // Running sequences, best first; victims of preemption are taken from the back, among those not
  // planned in this step.
  auto last_unplanned_after = [&](size_t i) -> Request* {
    for (size_t j = running_.size(); j-- > i + 1;) {
      if (!planned->contains(running_[j])) return running_[j];
    }
    return nullptr;
  };
  for (size_t i = 0; i < running_.size() && *budget > 0;) {
    Request* r = running_[i];
    const int64_t remaining = r->num_tokens() - r->num_computed;
    if ((remaining == 1) != decoding || planned->contains(r)) {
      ++i;
      continue;
    }
    int32_t n = static_cast<int32_t>(std::min<int64_t>(remaining, *budget));
    if (!decoding) {
      n = FitImageBlocks(*r, r->num_computed, n, options_.max_step_tokens - plan->num_tokens);
      if (n == 0) {
        ++i;
        continue;
      }
    }
    // A decoding request with drafts verifies them in this chunk, as many as fit the budget, the
    // context and max_tokens.
    int32_t drafts = 0;
    if (remaining == 1 && !r->drafts.empty()) {
      drafts = static_cast<int32_t>(
          std::min<int64_t>({static_cast<int64_t>(r->drafts.size()), *budget - 1,
                             MaxUsefulDrafts(*r, options_.max_model_len)}));
    }
    absl::Status st = EnsurePages(r, r->num_computed + n + drafts);
    if (!st.ok() && drafts > 0 && absl::IsResourceExhausted(st)) {
      drafts = 0;  // pages for the plain decode token first, before preempting anyone
      st = EnsurePages(r, r->num_computed + n);
    }
    if (st.ok()) {
      if (drafts > 0) {
        // Drop the drafts that do not fit (their logits rows too).
        r->draft_logits.resize(r->draft_logits.size() / r->drafts.size() * drafts);
        r->drafts.resize(drafts);
        r->verify_input.assign(1, r->tokens.back());
        r->verify_input.insert(r->verify_input.end(), r->drafts.begin(), r->drafts.end());
        n += drafts;
      } else {
        r->ClearDrafts();
      }
      plan->seqs.push_back(
          {r, r->num_computed, n, r->num_computed + n - drafts == r->num_tokens(), drafts});
      plan->num_tokens += n;
      *budget -= n;
      planned->insert(r);
      ++i;
      continue;
    }
    if (!absl::IsResourceExhausted(st)) {
      Retire(r, FinishReason::kError, st);
      continue;
    }
    if (Request* victim = last_unplanned_after(i)) {
      Preempt(victim);  // the lowest-priority, latest request not planned
      continue;         // retry r
    }
    if (running_.size() == 1) {
      // Alone (everything else is preempted or finished) and still no pages.
      Retire(r, FinishReason::kError,
             ResourceExhaustedError("request {}: {} tokens do not fit in the KV pools even with "
                                    "no other request running: {}",
                                    r->spec.id, r->num_computed + n, st.message()));
      continue;
    }
    Preempt(r);  // r itself is the lowest unplanned; the planned ones keep their pages
  }
}

StepPlan Scheduler::Plan() {
  StepPlan plan;
  int32_t budget = options_.max_step_tokens;
  std::sort(running_.begin(), running_.end(), Before);
  preempted_now_.clear();
  // Every running sequence returns the sliding pages it can no longer read, scheduled this step or
  // not: the sliding pool is sized for exactly that protocol (kv_pool_plan.h).
  if (kv_->has_group(kv::KvGroup::kSliding)) {
    for (Request* r : running_) {
      absl::Status st = kv_->ReleaseSlidingBefore(r->kv_id(), SlidingFirstNeeded(r->num_computed));
      GANNET_CHECK(st.ok());
    }
  }

  // Decode-first: every decoding sequence (one token, or a verify chunk) is planned before any
  // prompt token, so a long prompt's chunk never pushes a decode out of the step. Prompt tokens
  // (chunks of running prefills, then admissions) get what is left, and at most
  // max_prefill_tokens_while_decoding of it when the step decodes, which bounds how much a prefill
  // slows the decodes sharing its step.
  absl::flat_hash_set<const Request*> planned;
  PlanRunning(/*decoding=*/true, &budget, &plan, &planned);
  if (!plan.empty() && options_.max_prefill_tokens_while_decoding > 0) {
    budget = std::min(budget, options_.max_prefill_tokens_while_decoding);
  }
  PlanRunning(/*decoding=*/false, &budget, &plan, &planned);

  // Admission: priority, then arrival order, while limits and pages allow.
  std::sort(waiting_.begin(), waiting_.end(), Before);
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < options_.max_running_seqs) {
    Request* r = waiting_.front();
    // Pages just taken from a preempted request must not go straight back to it (thrashing).
    if (std::find(preempted_now_.begin(), preempted_now_.end(), r) != preempted_now_.end()) {
      break;
    }
    if (!r->has_kv_sequence) {
      absl::Status st = kv_->AddSequence(r->kv_id());
      if (!st.ok()) {
        Retire(r, FinishReason::kError, st);
        continue;
      }
      r->has_kv_sequence = true;
      const int64_t cached = kv_->MatchPrefix(r->tokens, r->num_tokens() - 1, r->page_salts);
      if (cached > 0 && kv_->AttachPrefix(r->kv_id(), r->tokens, cached, r->page_salts).ok()) {
        r->num_computed = cached;
        if (r->num_preemptions == 0) {
          r->num_cached_prompt = static_cast<int32_t>(std::min(cached, r->prompt_len));
        }
      }
    }
    const int64_t remaining = r->num_tokens() - r->num_computed;
    const int32_t n = FitImageBlocks(*r, r->num_computed,
                                     static_cast<int32_t>(std::min<int64_t>(remaining, budget)),
                                     options_.max_step_tokens - plan.num_tokens);
    if (n == 0) {  // an image block that does not fit this step: admit it in a later one
      ReleaseKv(r);
      r->num_computed = 0;
      break;
    }
    absl::Status st = EnsurePages(r, r->num_computed + n);
    if (!st.ok()) {
      if (absl::IsResourceExhausted(st) && (!running_.empty() || !plan.empty())) {
        // Wait for running requests to free pages; give back what we attached meanwhile.
        ReleaseKv(r);
        r->num_computed = 0;
        break;
      }
      Retire(r, FinishReason::kError,
             absl::IsResourceExhausted(st)
                 ? ResourceExhaustedError("request {}: {} tokens do not fit in the KV pools even "
                                          "with no other request running: {}",
                                          r->spec.id, r->num_computed + n, st.message())
                 : st);
      continue;
    }
    waiting_.erase(waiting_.begin());
    r->state = RequestState::kRunning;
    running_.push_back(r);
    plan.seqs.push_back({r, r->num_computed, n, r->num_computed + n == r->num_tokens()});
    plan.num_tokens += n;
    budget -= n;
  }
  return plan;
}

void Scheduler::StepCompleted(const StepPlan& plan) {
  for (const ScheduledSeq& s : plan.seqs) {
    Request* r = s.request;
    if (r->state != RequestState::kRunning || s.num_drafts > 0) continue;
    r->num_computed = s.start + s.num_tokens;
    absl::Status st = kv_->CommitPages(r->kv_id(), r->tokens, r->num_computed, r->page_salts);
    if (!st.ok()) GANNET_LOG_WARNING("scheduler: prefix-cache commit failed: {}", st.message());
  }
}

absl::Status Scheduler::CompleteVerify(const ScheduledSeq& v, int accepted) {
  Request* r = v.request;
  if (accepted < 0 || accepted > v.num_drafts) {
    return InternalError("request {}: {} of {} drafts accepted", r->spec.id, accepted,
                         v.num_drafts);
  }
  r->num_drafted += v.num_drafts;
  r->num_accepted += accepted;
  if (r->state != RequestState::kRunning) return absl::OkStatus();
  r->num_computed = v.start + 1 + accepted;
  r->ClearDrafts();
  // The rejected drafts' KV lies past the new length: release the pages it alone used. The
  // positions it wrote in the kept last page are rewritten before anything reads them.
  GANNET_ASSIGN_OR_RETURN(std::vector<kv::PageCopy> copies,
                          kv_->Truncate(r->kv_id(), r->num_computed));
  if (!copies.empty()) {
    // Truncate copies a page only when it is shared, and a verify chunk writes only pages this
    // request alone owns (past every prefix-cache block it attached).
    return InternalError("request {}: rolling back a verify step would copy {} shared pages",
                         r->spec.id, copies.size());
  }
  absl::Status st = kv_->CommitPages(r->kv_id(), r->tokens, r->num_computed, r->page_salts);
  if (!st.ok()) GANNET_LOG_WARNING("scheduler: prefix-cache commit failed: {}", st.message());
  return absl::OkStatus();
}

void Scheduler::Append(Request* r, int32_t token, bool stop_string_hit) {
  r->tokens.push_back(token);
  if (!r->image_block_ids.empty()) r->image_block_ids.push_back(kTextBlock);
  if (r->spec.sampling.needs_penalties()) r->counts.AddOutput(token);
  const int64_t out = r->num_output();
  const bool stop_id = r->spec.StopsAt(out) &&
                       std::find(r->spec.stop_token_ids.begin(), r->spec.stop_token_ids.end(),
                                 token) != r->spec.stop_token_ids.end();
  if (stop_id || stop_string_hit) {
    Retire(r, FinishReason::kStop);
  } else if ((r->spec.max_tokens > 0 && out >= r->spec.max_tokens) ||
             r->num_tokens() >= options_.max_model_len) {
    Retire(r, FinishReason::kLength);
  }
}

void Scheduler::Finish(Request* r, FinishReason reason) { Retire(r, reason); }

std::vector<Retired> Scheduler::TakeRetired() {
  std::vector<Retired> out;
  out.swap(retired_);
  return out;
}

}  // namespace gannet::sched

#include "lib/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "lib/common/mutex.h"
#include "lib/common/hash.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/engine/chat_prompt.h"
#include "lib/engine/image_input.h"
#include "lib/engine/image_prompt.h"
#include "lib/engine/model_setup.h"
#include "lib/engine/request_check.h"
#include "lib/engine/step_batch.h"
#include "lib/engine/step_stats.h"
#include "lib/engine/text_output.h"
#include "lib/sampling/draw.h"
#include "lib/sampling/row_policy.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/plan_inputs.h"
#include "lib/spec/verify.h"
#include "lib/vision/image_prompt.h"
#include "lib/common/check.h"

namespace gannet::engine {
namespace {

// <eos>, <turn|>, <|tool_response>: Gemma-4's generation stop ids (docs/gemma4-model.md §5).
constexpr int32_t kDefaultStopIds[] = {1, 106, 50};

// 64 bits of OS entropy for an unseeded request.
uint64_t RandomSeed() {
  static thread_local std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

struct Submission {
  std::unique_ptr<sched::Request> request;
  TextOutput text;
  std::vector<ImageInput> images;  // encoded by the engine thread (the tower shares the backend)
};

}  // namespace

class Engine::Impl {
 public:
  EngineConfig cfg;
  std::unique_ptr<LoadedEngineParts> parts;
  std::unique_ptr<sched::Scheduler> scheduler;

  // Shared with client threads.
  mutable Mutex mu;
  CondVar work_cv;   // engine thread: submissions, cancels, stop
  CondVar event_cv;  // pollers: events
  std::vector<Submission> submissions ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> cancels ABSL_GUARDED_BY(mu);
  std::unordered_set<uint64_t> live ABSL_GUARDED_BY(mu);  // submitted and not yet finished
  // FINISH/ERROR events not yet handed out by Poll.
  size_t unpolled_terminal ABSL_GUARDED_BY(mu) = 0;
  // TOKEN events not yet handed out by Poll: per request, and in all.
  std::unordered_map<uint64_t, int32_t> unpolled_tokens ABSL_GUARDED_BY(mu);
  int64_t unpolled_tokens_total ABSL_GUARDED_BY(mu) = 0;
  std::deque<Event> events ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  absl::Status dead ABSL_GUARDED_BY(mu);  // sticky device-lost status
  StepStats stats ABSL_GUARDED_BY(mu);

  // Engine thread only.
  std::unordered_map<uint64_t, TextOutput> texts;
  std::vector<float> sample_row, sample_scratch;  // SampleRow's host buffers
  // Why a request the engine ended itself (kError without a step error) failed.
  std::unordered_map<uint64_t, absl::Status> failures;
  spec::VerifyScratch verify_scratch;
  std::vector<spec::ProposeFrom> propose;
  std::thread thread;
  // The previous step's start, its device span (-1: none) and whether it was a decode step (no
  // prompt tokens), while steps run back to back.
  std::optional<sched::Clock::time_point> prev_step_start;
  double prev_device_span = -1;
  bool prev_step_decode = false;

  void Emit(Event e) {
    MutexLock lock(&mu);
    if (e.type != EventType::kToken) {
      live.erase(e.request_id);
      ++unpolled_terminal;
    }
    events.push_back(std::move(e));
    event_cv.NotifyAll();
  }

  // Queues a TOKEN event unless the request's or the engine's undelivered tokens are at their
  // bound; then returns the RESOURCE_EXHAUSTED status that ends the request.
  absl::Status EmitTokenEvent(Event e) {
    MutexLock lock(&mu);
    const int per_request = cfg.max_undelivered_tokens_per_request > 0
                                ? cfg.max_undelivered_tokens_per_request
                                : kDefaultMaxUndeliveredTokensPerRequest;
    const int64_t total =
        cfg.max_undelivered_tokens > 0 ? cfg.max_undelivered_tokens : kDefaultMaxUndeliveredTokens;
    int32_t& mine = unpolled_tokens[e.request_id];
    if (mine >= per_request) {
      return ResourceExhaustedError(
          "request {}: {} generated tokens are waiting to be polled "
          "(max_undelivered_tokens_per_request); the request was ended",
          e.request_id, mine);
    }
    if (unpolled_tokens_total >= total) {
      if (mine == 0) unpolled_tokens.erase(e.request_id);
      return ResourceExhaustedError(
          "request {}: the engine holds {} generated tokens waiting to be polled "
          "(max_undelivered_tokens); the request was ended",
          e.request_id, unpolled_tokens_total);
    }
    ++mine;
    ++unpolled_tokens_total;
    events.push_back(std::move(e));
    event_cv.NotifyAll();
    return absl::OkStatus();
  }

  void EmitRetired(std::vector<sched::Retired> retired);
  void Loop();

  // The step (RunStep) and its named parts, in order.
  struct StepTally {                 // what a step did, for the stats
    sched::Clock::time_point start;  // the forward's start
    double device_seconds = -1;      // the forward's and drafting's device time (-1: unknown)
    int64_t prompt_tokens = 0, generated = 0, verify_chunks = 0, drafts = 0, accepted = 0;
  };
  bool RunStep();  // false when there was nothing to run
  void RecordBackToBackTiming();
  // Builds the plan's batch and runs it; false (the failure reported: FailStep) on an error.
  bool Forward(const sched::StepPlan& plan, runner::StepResult* result, StepTally* tally);
  void FailStep(const sched::StepPlan& plan, const absl::Status& st);
  void DeviceLost(const absl::Status& st);  // sticky: every request fails, later steps too
  void CountScheduled(const sched::StepPlan& plan, StepTally* tally);
  // Each sampling sequence's tokens (SampleRow, or spec::VerifyChunk for one with drafts), and
  // the requests the drafter continues (`propose`).
  void EmitTokens(const sched::StepPlan& plan, const runner::StepResult& result, StepTally* tally);
  // Drafts for `propose`; false only when the device was lost.
  bool Propose(StepTally* tally);
  void Record(const StepTally& tally);
  // The token of a sequence's one logits row without drafts: the device's draw, or the host path's
  // (sampling/row_policy.h) where the row's logits were copied.
  sampling::SampleResult SampleRow(sched::Request& r, const runner::StepResult& result, int row);
  // Emits one generated token of a running request and appends it (which may finish it).
  void EmitToken(sched::Request* r, sampling::SampleResult sr);
  void UpdateGauges();
  void FailAll(const absl::Status& status);
  absl::StatusOr<std::unique_ptr<sched::Request>> BuildRequest(RequestInput& in, uint64_t id);
  // Runs the vision tower over a submission's images (engine thread), filling
  // request->image_features.
  absl::Status EncodeRequestImages(Submission& sub);
  // The C ABI's images (in.image_sources): decoded and preprocessed on the submitting thread,
  // each placeholder of `prompt` expanded to boi + N soft tokens + eoi; in.images set.
  absl::Status ExpandRequestImages(RequestInput& in, std::vector<int32_t>& prompt);
};

void Engine::Impl::EmitRetired(std::vector<sched::Retired> retired) {
  if (retired.empty()) return;
  // Stats first: a caller that sees a request's last event also sees its pages released.
  UpdateGauges();
  for (sched::Retired& r : retired) {
    const sched::Request& q = *r.request;
    Event e;
    e.request_id = q.spec.id;
    e.num_prompt_tokens = static_cast<int32_t>(q.prompt_len);
    e.num_generated_tokens = static_cast<int32_t>(q.num_output());
    e.num_cached_prompt_tokens = q.num_cached_prompt;
    e.num_draft_tokens = static_cast<int32_t>(q.num_drafted);
    e.num_accepted_draft_tokens = static_cast<int32_t>(q.num_accepted);
    auto t = texts.find(q.spec.id);
    if (q.finish == sched::FinishReason::kError) {
      e.type = EventType::kError;
      e.finish = EventFinish::kError;
      e.status = r.error.ok() ? absl::InternalError("request failed") : r.error;
      if (auto f = failures.find(q.spec.id); f != failures.end()) {
        if (r.error.ok()) e.status = f->second;
        failures.erase(f);
      }
    } else {
      e.type = EventType::kFinish;
      e.finish = q.finish == sched::FinishReason::kStop     ? EventFinish::kStop
                 : q.finish == sched::FinishReason::kLength ? EventFinish::kLength
                                                            : EventFinish::kCancelled;
      if (t != texts.end() && q.finish != sched::FinishReason::kCancelled) {
        TextOutput::Delta tail = t->second.Finish();
        e.text = std::move(tail.text);
        e.thinking = tail.thinking;
      }
    }
    if (t != texts.end()) texts.erase(t);
    Emit(std::move(e));
  }
}

void Engine::Impl::FailAll(const absl::Status& status) {
  std::vector<uint64_t> ids;
  {
    MutexLock lock(&mu);
    ids.assign(live.begin(), live.end());
  }
  for (uint64_t id : ids) scheduler->Cancel(id);
  std::vector<sched::Retired> retired = scheduler->TakeRetired();
  for (sched::Retired& r : retired) {
    r.request->finish = sched::FinishReason::kError;
    r.error = status;
  }
  EmitRetired(std::move(retired));
}

// One step: plan, forward, emit, propose, record. Each returns early (true: a step ran) when a
// failure ended it; the failure has then been reported to the requests it touched.
bool Engine::Impl::RunStep() {
  RecordBackToBackTiming();
  sched::Scheduler& s = *scheduler;
  s.ExpireDeadlines(sched::Clock::now());
  sched::StepPlan plan = s.Plan();
  EmitRetired(s.TakeRetired());
  if (plan.empty()) {
    prev_step_start.reset();
    return false;
  }
  StepTally tally;
  runner::StepResult result;
  if (!Forward(plan, &result, &tally)) return true;
  s.StepCompleted(plan);
  CountScheduled(plan, &tally);
  EmitTokens(plan, result, &tally);
  if (!Propose(&tally)) return true;
  Record(tally);
  EmitRetired(s.TakeRetired());
  return true;
}

void Engine::Impl::RecordBackToBackTiming() {
  // The interval since the previous step's start is one back-to-back step: its wall time less
  // the device time of its work is host time on the critical path.
  const auto now = sched::Clock::now();
  if (prev_step_start.has_value() && prev_step_decode && prev_device_span >= 0) {
    const double wall = std::chrono::duration<double>(now - *prev_step_start).count();
    MutexLock lock(&mu);
    stats.RecordTiming(wall, prev_device_span);
  }
  prev_step_start = now;
  prev_device_span = -1;
}

bool Engine::Impl::Forward(const sched::StepPlan& plan, runner::StepResult* result,
                           StepTally* tally) {
  kv::KvManager& kv = *parts->kv;
  runner::StepBatch batch = BuildStepBatch(plan, kv);
  absl::Status st;
  if (kv.debug_validate()) st = sched::ValidatePlanReads(plan, kv);
  tally->start = sched::Clock::now();
  if (st.ok()) st = parts->runner->Forward(batch, result);
  if (!st.ok()) {
    FailStep(plan, st);
    return false;
  }
  // The device time of the forward (the runner marks its span; its results were copied, so the
  // span has ended).
  absl::StatusOr<double> span = parts->runner->LastStepDeviceSeconds();
  if (span.ok()) tally->device_seconds = *span;
  return true;
}

void Engine::Impl::FailStep(const sched::StepPlan& plan, const absl::Status& st) {
  GANNET_LOG_ERROR("engine: step failed: {}", st.message());
  if (IsDeviceLost(st)) {
    DeviceLost(st);
    return;
  }
  for (const sched::ScheduledSeq& q : plan.seqs) {
    if (q.request->state == sched::RequestState::kRunning) {
      scheduler->Finish(q.request, sched::FinishReason::kError);
    }
  }
  std::vector<sched::Retired> retired = scheduler->TakeRetired();
  for (auto& r : retired) r.error = st;
  EmitRetired(std::move(retired));
}

void Engine::Impl::DeviceLost(const absl::Status& st) {
  // The device's state is gone: every later step would fail too (sticky DEVICE_LOST).
  {
    MutexLock lock(&mu);
    dead = st;
  }
  FailAll(st);
}

void Engine::Impl::CountScheduled(const sched::StepPlan& plan, StepTally* tally) {
  prev_step_decode = true;
  for (const sched::ScheduledSeq& q : plan.seqs) {
    if (q.start < q.request->prompt_len) {
      tally->prompt_tokens += std::min<int64_t>(q.num_tokens, q.request->prompt_len - q.start);
    }
    // Decode: from the last known token (one token, or a verify chunk behind it).
    prev_step_decode &= q.start == q.request->num_tokens() - 1;
  }
}

void Engine::Impl::EmitTokens(const sched::StepPlan& plan, const runner::StepResult& result,
                              StepTally* tally) {
  // Rows come in plan order: one per sampling sequence, K + 1 per verify chunk.
  propose.clear();
  int row = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const sched::ScheduledSeq& q = plan.seqs[i];
    if (!q.sample) continue;
    GANNET_CHECK(row < result.rows() && result.row_seq[row] == static_cast<int>(i));
    sched::Request* r = q.request;
    spec::VerifiedTokens out;
    if (q.num_drafts == 0) {
      out.tokens.push_back(SampleRow(*r, result, row));
    } else {
      out = spec::VerifyChunk(q, result, row, &verify_scratch, &cfg.override_accept);
    }
    for (sampling::SampleResult& sr : out.tokens) {
      if (r->state != sched::RequestState::kRunning) break;  // stopped inside an accepted run
      EmitToken(r, std::move(sr));
      ++tally->generated;
    }
    if (q.num_drafts > 0) {
      ++tally->verify_chunks;
      tally->drafts += q.num_drafts;
      tally->accepted += out.accepted;
      absl::Status vst = scheduler->CompleteVerify(q, out.accepted);
      if (!vst.ok()) {
        GANNET_LOG_ERROR("engine: {}", vst.message());
        scheduler->Finish(r, sched::FinishReason::kError);
      }
    }
    // The drafter continues from the row that produced the request's newest token.
    if (parts->spec != nullptr && r->state == sched::RequestState::kRunning) {
      propose.push_back({r, row + out.accepted});
    }
    row += q.num_drafts + 1;
  }
}

bool Engine::Impl::Propose(StepTally* tally) {
  if (propose.empty()) return true;
  // One device: its span around the rounds. A tensor-parallel group measures rank 0's on the
  // thread that drives that device (lib/parallel/tp_runner.h) and hands it over.
  backend::Backend& be = *parts->backend;
  const bool group = parts->tensor_parallel_size > 1;
  absl::Status st = group ? absl::OkStatus() : be.BeginDeviceSpan();
  if (st.ok()) st = parts->spec->Propose(propose, *parts->kv, scheduler->max_model_len());
  if (st.ok() && !group) st = be.EndDeviceSpan();
  if (st.ok() && tally->device_seconds >= 0) {
    // Drafting's device time, host gaps between its rounds included.
    absl::StatusOr<double> span = group ? parts->spec->TakeDeviceSeconds() : be.DeviceSpanSeconds();
    tally->device_seconds = span.ok() ? tally->device_seconds + *span : -1;
  }
  if (st.ok()) return true;
  // Drafting is an optimisation: the requests go on without drafts, unless the device is gone.
  for (const spec::ProposeFrom& f : propose) f.request->ClearDrafts();
  GANNET_LOG_ERROR("engine: drafting failed: {}", st.message());
  if (!IsDeviceLost(st)) return true;
  DeviceLost(st);
  return false;
}

void Engine::Impl::Record(const StepTally& tally) {
  prev_device_span = tally.device_seconds;
  // Counted before the final events go out: whoever sees them sees these counts.
  const double seconds = std::chrono::duration<double>(sched::Clock::now() - tally.start).count();
  MutexLock lock(&mu);
  stats.Record(tally.prompt_tokens, tally.generated, seconds);
  stats.RecordSpec(tally.verify_chunks, tally.drafts, tally.accepted,
                   parts->spec != nullptr ? parts->spec->stats().rounds : 0);
}

sampling::SampleResult Engine::Impl::SampleRow(sched::Request& r, const runner::StepResult& result,
                                               int row) {
  if (!result.has_logits(row)) {
    sampling::SampleResult sr;
    sr.token = result.sampled[row];
    return sr;
  }
  return sampling::SampleOnHost(result.Row(row), sched::RowRequestOf(r), &r.counts, &sample_row,
                                &sample_scratch);
}

void Engine::Impl::EmitToken(sched::Request* r, sampling::SampleResult sr) {
  Event e;
  e.request_id = r->spec.id;
  e.type = EventType::kToken;
  e.token_id = sr.token;
  e.logprob = sr.logprob;
  e.top_ids = std::move(sr.top_ids);
  e.top_logprobs = std::move(sr.top_logprobs);
  bool stop_string = false;
  auto t = texts.find(r->spec.id);
  if (t != texts.end()) {
    auto delta = t->second.Push(sr.token, r->spec.StopsAt(r->num_output() + 1));
    if (delta.ok()) {
      e.text = std::move(delta->text);
      e.thinking = delta->thinking;
      stop_string = delta->stop_hit;
    }
  }
  const uint64_t id = e.request_id;
  if (absl::Status full = EmitTokenEvent(std::move(e)); !full.ok()) {
    // Nobody polls this request (or the engine) fast enough: it ends here, named, instead of
    // growing the event queue without bound.
    failures[id] = std::move(full);
    scheduler->Finish(r, sched::FinishReason::kError);
    return;
  }
  scheduler->Append(r, sr.token, stop_string);
}

void Engine::Impl::UpdateGauges() {
  const kv::KvManager& kv = *parts->kv;
  MutexLock lock(&mu);
  EngineStats& g = stats.gauges();
  g.num_running = scheduler->num_running();
  g.num_waiting = scheduler->num_waiting() + static_cast<int32_t>(submissions.size());
  g.page_size = kv.page_size();
  for (kv::KvGroup grp : kv::kAllKvGroups) {
    const int i = kv::GroupIndex(grp);
    kv::PoolUsage u = kv.Usage(grp);
    g.kv_pages_total[i] = u.capacity;
    g.kv_pages_used[i] = u.owned;
    g.kv_pages_cached[i] = u.cached;
    g.kv_pages_free[i] = u.free;
  }
  g.prefix_cache_hit_tokens = kv.stats().prefix_hit_tokens;
  g.prefix_cache_query_tokens = kv.stats().prefix_queried_tokens;
  g.prefix_cache_hit_rate = kv.stats().HitRate();
  g.num_preemptions = scheduler->num_preemptions();
  g.weight_bytes = static_cast<int64_t>(parts->runner->weight_bytes());
  const kv::KvLayout& layout = parts->kv_sizing.layout;
  for (kv::KvGroup grp : kv::kAllKvGroups) {
    g.kv_bytes_per_token[kv::GroupIndex(grp)] =
        layout.has_group(grp) ? layout.bytes_per_token(grp) : 0;
  }
  g.sliding_window = parts->config.text.sliding_window;
  g.max_model_len = static_cast<int32_t>(parts->max_model_len);
  g.max_running_seqs = parts->max_running_seqs;
  g.kv_bytes = layout.TotalBytes();
  g.backend = std::string(parts->backend->name());
  g.kv_cache_dtype = layout.quant != kv::KvQuant::kNone
                         ? std::string(kv::KvQuantName(layout.quant))
                         : (parts->backend->kv_dtype() == DType::kF32 ? "f32" : "bf16");
  switch (parts->backend->activation_dtype()) {
    case DType::kF16:
      g.compute_dtype = "f16";
      break;
    case DType::kF32:
      g.compute_dtype = "f32";
      break;
    default:
      g.compute_dtype = "bf16";
  }
  g.device_id = parts->backend->device_id();
  g.device_name = parts->backend->DeviceName();
  if (parts->tensor_parallel_size > 1) {
    // Rank 0's device, and how many share the model (stats, the CLI's banner, bench headers).
    g.device_name += fmt::format(", tensor parallel over {} ranks", parts->tensor_parallel_size);
  }
  g.device_memory_bytes = parts->backend->TotalMemoryBytes();
  g.backend_fallback = parts->backend_fallback;
  g.load_seconds = parts->load_seconds;
  g.num_speculative_tokens = parts->spec != nullptr ? parts->spec->num_speculative_tokens() : 0;
}

void Engine::Impl::Loop() {
  while (true) {
    std::vector<Submission> subs;
    std::vector<uint64_t> cancel_ids;
    {
      MutexLock lock(&mu);
      if (scheduler->idle() && submissions.empty() && cancels.empty() && !stopping) {
        prev_step_start.reset();  // idle: the next step does not follow one back to back
        work_cv.WaitFor(mu, std::chrono::milliseconds(50));
      }
      if (stopping) return;
      subs.swap(submissions);
      cancel_ids.swap(cancels);
    }
    try {
      for (Submission& sub : subs) {
        const uint64_t id = sub.request->spec.id;
        const int64_t prompt_len = sub.request->prompt_len;
        absl::Status st = EncodeRequestImages(sub);
        if (st.ok()) st = scheduler->Add(std::move(sub.request));
        if (!st.ok()) {
          Event e;
          e.request_id = id;
          e.type = EventType::kError;
          e.finish = EventFinish::kError;
          e.status = st;
          e.num_prompt_tokens = static_cast<int32_t>(prompt_len);
          Emit(std::move(e));
          continue;
        }
        texts.emplace(id, std::move(sub.text));
      }
      for (uint64_t id : cancel_ids) scheduler->Cancel(id);
      EmitRetired(scheduler->TakeRetired());
      absl::Status dead_now;
      {
        MutexLock lock(&mu);
        dead_now = dead;
      }
      if (!dead_now.ok()) {
        FailAll(dead_now);
        continue;
      }
      if (!scheduler->idle()) RunStep();
      UpdateGauges();
    } catch (const std::exception& ex) {
      // Keep serving: fail what was in flight, not the process.
      GANNET_LOG_ERROR("engine: step raised {}", ex.what());
      FailAll(absl::InternalError(fmt::format("engine step failed: {}", ex.what())));
    }
  }
}

absl::Status Engine::Impl::EncodeRequestImages(Submission& sub) {
  if (sub.images.empty()) return absl::OkStatus();
  sched::Request& r = *sub.request;
  int64_t soft = 0;
  for (const ImageBlock& b : r.spec.image_blocks) soft += b.size();
  GANNET_ASSIGN_OR_RETURN(r.image_features, EncodeImages(*parts->vision.tower, sub.images));
  const int64_t width = parts->config.text.hidden_size;
  if (static_cast<int64_t>(r.image_features.size()) != soft * width) {
    return InvalidArgumentError(
        "request {}: the vision tower made {} soft tokens for {} image tokens", r.spec.id,
        r.image_features.size() / width, soft);
  }
  sub.images.clear();  // the pixels are no longer needed: the features stand for them
  sub.images.shrink_to_fit();
  return absl::OkStatus();
}

absl::Status Engine::Impl::ExpandRequestImages(RequestInput& in, std::vector<int32_t>& prompt) {
  if (!in.images.empty()) {
    return InvalidArgumentError("request: give images either preprocessed or as sources, not both");
  }
  GANNET_RETURN_IF_ERROR(parts->vision.unavailable);
  const model::ModelConfig& config = parts->config;
  // Counted before anything is decoded: a mismatch costs nothing.
  const int64_t placeholders = CountImagePlaceholders(prompt, config.image_token_id);
  if (placeholders != static_cast<int64_t>(in.image_sources.size())) {
    return InvalidArgumentError(
        "request: the prompt has {} image placeholders (<|image|>, id {}) for {} images",
        placeholders, config.image_token_id, in.image_sources.size());
  }
  GANNET_ASSIGN_OR_RETURN(PreparedImages prepared,
                          PrepareImages(in.image_sources, {config.vision->patch_size,
                                                           config.vision->pooling_kernel_size}));
  in.image_sources.clear();
  const int64_t expanded_len = ExpandedPromptLength(prompt.size(), prepared.soft_tokens);
  if (expanded_len >= parts->max_model_len) {
    return InvalidArgumentError(
        "request: the prompt with its {} images is {} tokens but the context holds {}: at least "
        "one must remain for the output (fewer images or a smaller max_soft_tokens)",
        prepared.images.size(), expanded_len, parts->max_model_len);
  }
  absl::StatusOr<vision::ExpandedPrompt> expanded = vision::ExpandImagePlaceholders(
      prompt, prepared.soft_tokens,
      {config.boi_token_id, config.image_token_id, config.eoi_token_id});
  if (!expanded.ok()) return Annotate(expanded.status(), "request");
  prompt = std::move(expanded->tokens);
  in.images = std::move(prepared.images);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<sched::Request>> Engine::Impl::BuildRequest(RequestInput& in,
                                                                           uint64_t id) {
  RequestModelFacts facts;
  facts.vocab_size = parts->config.text.vocab_size;
  facts.has_tokenizer = parts->tokenizer != nullptr;
  facts.check_prompt_ids = false;  // reported as this request's ERROR event (see Submit)
  GANNET_RETURN_IF_ERROR(CheckRequest(in, facts));
  sched::RequestSpec spec;
  spec.id = id;
  if (!in.messages.empty() || in.prompt_text || in.chat) {
    GANNET_RETURN_IF_ERROR(
        CheckPromptBytes(in, parts->max_model_len, parts->tokenizer->max_token_bytes()));
  }
  if (!in.messages.empty() || in.chat) {
    std::vector<std::pair<size_t, size_t>> content;
    const tokenizer::ChatTemplateOptions options =
        ChatOptions(parts->config.variant, in.add_generation_prompt, in.enable_thinking);
    std::vector<std::pair<size_t, size_t>>* ranges = in.split_special_tokens ? &content : nullptr;
    GANNET_ASSIGN_OR_RETURN(std::string text,
                            in.chat ? parts->chat_format->Render(*in.chat, options, ranges)
                                    : parts->chat_format->Render(in.messages, options, ranges));
    // After the content ranges, so never read as users' text.
    text += in.reply_prefix;
    spec.prompt = parts->tokenizer->Encode(text, {.add_special_tokens = false}, content);
  } else if (in.prompt_text) {
    spec.prompt = parts->tokenizer->Encode(*in.prompt_text, {.add_special_tokens = true});
    // Exactly one <bos>: a text that already starts with "<bos>" must not get a second one.
    const int32_t bos = parts->tokenizer->bos_id();
    if (spec.prompt.size() >= 2 && spec.prompt[0] == bos && spec.prompt[1] == bos) {
      spec.prompt.erase(spec.prompt.begin());
    }
  } else {
    spec.prompt = std::move(in.prompt_tokens);
  }
  spec.sampling = in.sampling;
  switch (in.seed_mode) {
    case SeedMode::kFixed:
      spec.sampling.seed = in.seed;
      break;
    case SeedMode::kRequestId:
      spec.sampling.seed = SplitMix64(id);
      break;
    case SeedMode::kRandom:
      spec.sampling.seed = RandomSeed();
      break;
  }
  spec.max_tokens = in.max_tokens;
  spec.min_tokens = in.min_tokens;
  if (!in.ignore_default_stop_tokens) {
    spec.stop_token_ids.assign(std::begin(kDefaultStopIds), std::end(kDefaultStopIds));
    for (int32_t e : parts->config.eos_token_ids) spec.stop_token_ids.push_back(e);
  }
  if (in.stop_token_ids) {
    for (int32_t t : *in.stop_token_ids) spec.stop_token_ids.push_back(t);
  }
  // Duplicates (the defaults repeat config eos ids) would only crowd the device sampler's
  // banned-token slots before min_tokens; defaults the vocabulary lacks (tiny models) never stop.
  {
    std::vector<int32_t>& stops = spec.stop_token_ids;
    const int64_t vocab = parts->config.text.vocab_size;
    stops.erase(
        std::remove_if(stops.begin(), stops.end(), [&](int32_t t) { return t < 0 || t >= vocab; }),
        stops.end());
    std::sort(stops.begin(), stops.end());
    stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  }
  spec.logprobs = in.logprobs;
  spec.priority = in.priority;
  if (in.deadline_ms > 0) {
    // Saturating: a deadline past what the clock can represent means "never".
    const auto now = sched::Clock::now();
    const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
        sched::Clock::time_point::max() - now);
    spec.deadline = in.deadline_ms >= room.count()
                        ? sched::Clock::time_point::max()
                        : now + std::chrono::milliseconds(in.deadline_ms);
  }
  if (!in.image_sources.empty()) GANNET_RETURN_IF_ERROR(ExpandRequestImages(in, spec.prompt));
  // Image soft-token runs of the prompt matched to the images (the pixels stay with the
  // submission until the engine thread encodes them).
  GANNET_ASSIGN_OR_RETURN(spec.image_blocks,
                          MatchImageBlocks(parts->config, parts->vision, spec.prompt, in.images));
  auto request = std::make_unique<sched::Request>(std::move(spec));
  request->speculate = parts->spec != nullptr && !in.disable_speculation;
  if (request->spec.sampling.needs_penalties()) request->counts.AddPrompt(request->tokens);
  return request;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  {
    MutexLock lock(&impl_->mu);
    impl_->stopping = true;
  }
  impl_->work_cv.NotifyAll();
  impl_->event_cv.NotifyAll();
  if (impl_->thread.joinable()) impl_->thread.join();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  GANNET_ASSIGN_OR_RETURN(impl->parts, LoadEngineParts(config));
  if (impl->parts->tp_worker != nullptr) {
    // A rank other than 0: no scheduler, no engine thread; requests go to rank 0.
    {
      MutexLock lock(&impl->mu);  // no other thread yet; taken for the analysis (tsa preset)
      impl->dead = FailedPreconditionError(
          "engine: this is rank {} of a tensor-parallel group; submit requests to rank 0",
          impl->parts->tp_rank);
    }
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  }
  sched::SchedulerOptions so;
  so.max_running_seqs = impl->parts->max_running_seqs;
  so.max_step_tokens = impl->parts->max_step_tokens;
  so.max_prefill_tokens_while_decoding = impl->parts->max_prefill_tokens_while_decoding;
  so.max_model_len = impl->parts->max_model_len;
  impl->scheduler = std::make_unique<sched::Scheduler>(so, impl->parts->kv.get());
  Impl* raw = impl.get();
  impl->UpdateGauges();
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

absl::StatusOr<uint64_t> Engine::Submit(RequestInput input) {
  Impl& m = *impl_;
  uint64_t id;
  {
    MutexLock lock(&m.mu);
    if (!m.dead.ok()) return m.dead;
    // Requests count until their terminal event is polled, so a caller that submits without
    // polling (or whose requests fail at once) cannot grow the engine without bound.
    const size_t limit = m.cfg.max_queued_requests > 0 ? m.cfg.max_queued_requests : 4096;
    if (m.live.size() + m.unpolled_terminal >= limit) {
      return ResourceExhaustedError(
          "engine: {} requests are unfinished or have unpolled final events (max_queued_requests)",
          limit);
    }
    id = m.next_id++;
    // The slot is taken now, under the lock that checked it: the prompt is tokenized without the
    // lock, and concurrent submitters must see this request counted meanwhile (issue 56: 64
    // threads against a limit of 4 got 58 accepted when the id was counted only after it).
    m.live.insert(id);
  }
  auto release = [&m, id] {
    MutexLock lock(&m.mu);
    m.live.erase(id);
  };
  absl::StatusOr<std::unique_ptr<sched::Request>> built = m.BuildRequest(input, id);
  if (!built.ok()) {
    release();
    return built.status();
  }
  std::unique_ptr<sched::Request> request = std::move(*built);
  absl::StatusOr<TextOutput> made =
      TextOutput::Create(m.parts->tokenizer.get(), input.stop_strings);
  if (!made.ok()) {
    release();
    return made.status();
  }
  TextOutput text = std::move(*made);
  // A token id outside the vocabulary is this request's error, reported as its event (the id is
  // valid and other requests are unaffected).
  const int64_t vocab = m.parts->config.text.vocab_size;
  auto bad = std::find_if(request->tokens.begin(), request->tokens.end(),
                          [&](int32_t t) { return t < 0 || t >= vocab; });
  if (bad != request->tokens.end()) {
    Event e;
    e.request_id = id;
    e.type = EventType::kError;
    e.finish = EventFinish::kError;
    e.status = InvalidArgumentError(
        "request {}: prompt token {} (id {}) is outside the "
        "vocabulary [0, {})",
        id, bad - request->tokens.begin(), *bad, vocab);
    e.num_prompt_tokens = static_cast<int32_t>(request->prompt_len);
    m.Emit(std::move(e));
    return id;
  }
  MutexLock lock(&m.mu);
  m.submissions.push_back({std::move(request), std::move(text), std::move(input.images)});
  m.work_cv.NotifyAll();
  return id;
}

absl::Status Engine::Cancel(uint64_t request_id) {
  MutexLock lock(&impl_->mu);
  if (!impl_->live.count(request_id)) {
    return NotFoundError("request {} is unknown or already finished", request_id);
  }
  impl_->cancels.push_back(request_id);
  impl_->work_cv.NotifyAll();
  return absl::OkStatus();
}

absl::Status Engine::Poll(int timeout_ms, size_t max_events, std::vector<Event>* out) {
  MutexLock lock(&impl_->mu);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu) {
    return !impl_->events.empty() || impl_->stopping;
  };
  if (timeout_ms < 0) {
    impl_->event_cv.Wait(impl_->mu, ready);
  } else if (timeout_ms > 0) {
    impl_->event_cv.WaitFor(impl_->mu, std::chrono::milliseconds(timeout_ms), ready);
  }
  while (!impl_->events.empty() && max_events > 0) {
    if (impl_->events.front().type != EventType::kToken) {
      --impl_->unpolled_terminal;
    } else {
      auto it = impl_->unpolled_tokens.find(impl_->events.front().request_id);
      if (it != impl_->unpolled_tokens.end() && --it->second == 0) impl_->unpolled_tokens.erase(it);
      --impl_->unpolled_tokens_total;
    }
    out->push_back(std::move(impl_->events.front()));
    impl_->events.pop_front();
    --max_events;
  }
  return absl::OkStatus();
}

const tokenizer::Tokenizer* Engine::tokenizer() const { return impl_->parts->tokenizer.get(); }
const tokenizer::ChatFormat* Engine::chat_format() const {
  return impl_->parts->chat_format ? &*impl_->parts->chat_format : nullptr;
}
model::Variant Engine::variant() const { return impl_->parts->config.variant; }

absl::Status Engine::Serve(double timeout_s) {
  if (impl_->parts->tp_worker == nullptr) {
    return FailedPreconditionError(
        "engine: Serve is for ranks other than 0 of a multi-process "
        "tensor-parallel group; this engine serves requests itself");
  }
  return impl_->parts->tp_worker->Wait(timeout_s);
}

EngineStats Engine::GetStats() const {
  MutexLock lock(&impl_->mu);
  return impl_->stats.Snapshot();
}

}  // namespace gannet::engine

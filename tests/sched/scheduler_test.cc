#include "lib/sched/scheduler.h"
#include "lib/engine/step_batch.h"
#include "lib/sched/plan_inputs.h"

#include <memory>

#include "gtest/gtest.h"
#include "tests/kv/kv_test_layout.h"

namespace gannet::sched {
namespace {

std::unique_ptr<Request> MakeRequest(uint64_t id, int prompt_len, int priority = 0) {
  RequestSpec spec;
  spec.id = id;
  for (int i = 0; i < prompt_len; ++i) spec.prompt.push_back(100 + i);
  spec.priority = priority;
  return std::make_unique<Request>(std::move(spec));
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int full_pages, int sliding_pages, SchedulerOptions o) {
    kv_ = *kv::KvManager::Create(kv::TestKvLayout(4, 8, sliding_pages, full_pages));
    sched_ = std::make_unique<Scheduler>(o, kv_.get());
  }
  void Complete(const StepPlan& plan) {
    sched_->StepCompleted(plan);
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.sample) sched_->Append(s.request, 7);
    }
  }
  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(SchedulerTest, ChunkedPrefillUnderTheTokenBudget) {
  Init(64, 64, {.max_running_seqs = 4, .max_step_tokens = 8, .max_model_len = 128});
  ASSERT_TRUE(sched_->Add(MakeRequest(1, 20)).ok());
  std::vector<int> chunks;
  std::vector<bool> samples;
  for (int step = 0; step < 3; ++step) {
    StepPlan plan = sched_->Plan();
    ASSERT_EQ(plan.seqs.size(), 1u);
    chunks.push_back(plan.seqs[0].num_tokens);
    samples.push_back(plan.seqs[0].sample);
    Complete(plan);
  }
  EXPECT_EQ(chunks, (std::vector<int>{8, 8, 4}));
  EXPECT_EQ(samples, (std::vector<bool>{false, false, true}));
  StepPlan decode = sched_->Plan();
  ASSERT_EQ(decode.seqs.size(), 1u);
  EXPECT_EQ(decode.seqs[0].num_tokens, 1);
  EXPECT_EQ(decode.seqs[0].start, 20);
}

TEST_F(SchedulerTest, PrefillAndDecodeShareAStep) {
  Init(64, 64, {.max_running_seqs = 4, .max_step_tokens = 10, .max_model_len = 128});
  ASSERT_TRUE(sched_->Add(MakeRequest(1, 5)).ok());
  Complete(sched_->Plan());  // request 1 prefilled, now decoding
  ASSERT_TRUE(sched_->Add(MakeRequest(2, 30)).ok());
  StepPlan plan = sched_->Plan();
  ASSERT_EQ(plan.seqs.size(), 2u);
  EXPECT_EQ(plan.seqs[0].request->spec.id, 1u);  // decode first
  EXPECT_EQ(plan.seqs[0].num_tokens, 1);
  EXPECT_EQ(plan.seqs[1].request->spec.id, 2u);
  EXPECT_EQ(plan.seqs[1].num_tokens, 9);  // the rest of the budget
  EXPECT_EQ(plan.num_tokens, 10);
}

// A prompt ahead in priority order whose chunk would take the whole budget still leaves room for
// every decode (decode-first), and max_prefill_tokens_while_decoding caps the prompt tokens of a
// step that decodes, but not of one that does not.
TEST_F(SchedulerTest, DecodesFirstAndPromptTokensCappedWhileDecoding) {
  for (int32_t cap : {0, 4}) {
    Init(64, 64,
         {.max_running_seqs = 4,
          .max_step_tokens = 10,
          .max_model_len = 128,
          .max_prefill_tokens_while_decoding = cap});
    ASSERT_TRUE(sched_->Add(MakeRequest(1, 5)).ok());
    Complete(sched_->Plan());                                           // 1 prefilled, now decoding
    ASSERT_TRUE(sched_->Add(MakeRequest(2, 40, /*priority=*/9)).ok());  // ahead of 1 in order
    StepPlan plan = sched_->Plan();
    ASSERT_EQ(plan.seqs.size(), 2u) << "cap " << cap;
    EXPECT_EQ(plan.seqs[0].request->spec.id, 1u);
    EXPECT_EQ(plan.seqs[0].num_tokens, 1);
    EXPECT_EQ(plan.seqs[1].request->spec.id, 2u);
    EXPECT_EQ(plan.seqs[1].num_tokens, cap > 0 ? cap : 9) << "cap " << cap;
    Complete(plan);
    // Second step: 2 is a running prefill now, still capped while 1 decodes.
    plan = sched_->Plan();
    ASSERT_EQ(plan.seqs.size(), 2u);
    EXPECT_EQ(plan.seqs[0].request->spec.id, 1u);
    EXPECT_EQ(plan.seqs[1].num_tokens, cap > 0 ? cap : 9);
    Complete(plan);
    // With nothing decoding, a prompt gets the whole budget.
    ASSERT_TRUE(sched_->Cancel(1));
    plan = sched_->Plan();
    ASSERT_EQ(plan.seqs.size(), 1u);
    EXPECT_EQ(plan.seqs[0].num_tokens, 10) << "cap " << cap;
  }
}

TEST_F(SchedulerTest, PriorityThenArrivalAndRunningLimit) {
  Init(64, 64, {.max_running_seqs = 2, .max_step_tokens = 100, .max_model_len = 128});
  ASSERT_TRUE(sched_->Add(MakeRequest(1, 3, 0)).ok());
  ASSERT_TRUE(sched_->Add(MakeRequest(2, 3, 5)).ok());
  ASSERT_TRUE(sched_->Add(MakeRequest(3, 3, 0)).ok());
  StepPlan plan = sched_->Plan();
  ASSERT_EQ(plan.seqs.size(), 2u);
  EXPECT_EQ(plan.seqs[0].request->spec.id, 2u);
  EXPECT_EQ(plan.seqs[1].request->spec.id, 1u);
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerTest, CancelFreesPagesAtOnce) {
  Init(16, 16, {.max_running_seqs = 4, .max_step_tokens = 100, .max_model_len = 128});
  ASSERT_TRUE(sched_->Add(MakeRequest(1, 30)).ok());
  Complete(sched_->Plan());
  EXPECT_GT(kv_->Usage(kv::KvGroup::kFull).owned, 0);
  EXPECT_TRUE(sched_->Cancel(1));
  EXPECT_FALSE(sched_->Cancel(1));
  EXPECT_EQ(kv_->Usage(kv::KvGroup::kFull).owned, 0);
  EXPECT_EQ(kv_->Usage(kv::KvGroup::kSliding).owned, 0);
  auto retired = sched_->TakeRetired();
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0].request->finish, FinishReason::kCancelled);
}

TEST_F(SchedulerTest, PreemptsTheLatestWhenPagesRunOut) {
  // 6 full pages of 4 tokens: two 10-token prompts fit (3 pages each), growth does not.
  Init(6, 16, {.max_running_seqs = 4, .max_step_tokens = 100, .max_model_len = 128});
  ASSERT_TRUE(sched_->Add(MakeRequest(1, 10)).ok());
  ASSERT_TRUE(sched_->Add(MakeRequest(2, 10)).ok());
  StepPlan first = sched_->Plan();
  ASSERT_EQ(first.seqs.size(), 2u);
  Complete(first);
  // Both now need an 11th token -> 3 pages each still; run until page 4 is needed.
  bool preempted = false;
  for (int step = 0; step < 4 && !preempted; ++step) {
    StepPlan plan = sched_->Plan();
    preempted = sched_->num_preemptions() > 0;
    Complete(plan);
  }
  EXPECT_TRUE(preempted);
  EXPECT_EQ(sched_->num_running(), 1);
  EXPECT_TRUE(kv_->CheckInvariants().ok());
}

TEST_F(SchedulerTest, RejectsPromptsThatCanNeverRun) {
  Init(4, 16, {.max_running_seqs = 4, .max_step_tokens = 100, .max_model_len = 128});
  absl::Status too_big = sched_->Add(MakeRequest(1, 20));  // 6 pages > 4
  EXPECT_TRUE(absl::IsResourceExhausted(too_big)) << too_big;
  absl::Status too_long = sched_->Add(MakeRequest(2, 128));
  EXPECT_TRUE(absl::IsInvalidArgument(too_long)) << too_long;
  EXPECT_TRUE(absl::IsInvalidArgument(sched_->Add(MakeRequest(3, 0))));
}

}  // namespace
}  // namespace gannet::sched

namespace gannet::sched {
namespace {

TEST_F(SchedulerTest, PlansBecomeRunnerBatches) {
  Init(64, 64, {.max_running_seqs = 4, .max_step_tokens = 16, .max_model_len = 128});
  auto a = MakeRequest(1, 10);
  a->spec.stop_token_ids = {1, 106};
  a->spec.min_tokens = 3;
  ASSERT_TRUE(sched_->Add(std::move(a)).ok());
  ASSERT_TRUE(sched_->Add(MakeRequest(2, 20)).ok());
  StepPlan plan = sched_->Plan();
  ASSERT_EQ(plan.seqs.size(), 2u);  // 10 tokens, then 6 of the second prompt
  runner::StepBatch b = engine::BuildStepBatch(plan, *kv_);
  ASSERT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(b.seqs[0].tokens.size(), 10u);
  EXPECT_EQ(b.seqs[0].start_pos, 0);
  EXPECT_EQ(b.seqs[0].logits, runner::SeqStep::Logits::kLast);  // the prompt is complete
  EXPECT_EQ(b.seqs[1].tokens.size(), 6u);
  EXPECT_EQ(b.seqs[1].logits, runner::SeqStep::Logits::kNone);  // still prefilling
  EXPECT_EQ(b.seqs[0].page_table[1].size(), 3u);                // 10 tokens, pages of 4
  ASSERT_EQ(b.device_sampling.size(), 1u);                      // one logits row
  EXPECT_EQ(std::vector<int32_t>(b.banned_tokens[0].begin(), b.banned_tokens[0].end()),
            (std::vector<int32_t>{1, 106}));  // short of min_tokens: stops masked on the device
  EXPECT_TRUE(ValidatePlanReads(plan, *kv_).ok());
}

}  // namespace
}  // namespace gannet::sched

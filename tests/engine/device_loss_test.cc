// Errors by type, not by string: only a status marked device-lost (lib/common/status.h) makes
// the engine sticky DEVICE_LOST. Any other backend failure in a step (a registry miss, a
// cuBLASLt refusal, an Internal error whose text even says "device lost") fails that step's
// requests and the engine keeps serving.
#include <atomic>
#include <memory>
#include <set>

#include "gtest/gtest.h"
#include "lib/backend/forwarding_backend.h"
#include "lib/common/status.h"
#include "lib/engine/engine.h"
#include "tests/testing/tiny_models.h"

namespace gannet::engine {
namespace {

// Fails the n-th Attention call (and only it) with `error`.
class FaultyBackend final : public backend::ForwardingBackend {
 public:
  FaultyBackend(std::unique_ptr<backend::Backend> inner, int fail_at, absl::Status error)
      : ForwardingBackend(std::move(inner)), fail_at_(fail_at), error_(std::move(error)) {}
  absl::Status Attention(const backend::AttentionArgs& a) override {
    if (++calls_ == fail_at_) return error_;
    return ForwardingBackend::Attention(a);
  }

 private:
  int calls_ = 0;
  const int fail_at_;
  const absl::Status error_;
};

std::unique_ptr<Engine> MakeEngine(int fail_at, absl::Status error) {
  EngineConfig c;
  c.model_dir = testing::TinyModelDir("e2b");
  c.backend = "cpu";
  c.max_model_len = 128;
  c.wrap_backend = [=](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
    return std::make_unique<FaultyBackend>(std::move(b), fail_at, error);
  };
  auto e = Engine::Create(c);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

RequestInput Greedy(int tokens) {
  RequestInput in;
  in.prompt_tokens = {2, 120, 130, 140};
  in.max_tokens = tokens;
  in.ignore_default_stop_tokens = true;
  return in;
}

// Runs one request to its end; returns its terminal event.
Event RunOne(Engine& e, int tokens, absl::Status* submit = nullptr) {
  auto id = e.Submit(Greedy(tokens));
  if (submit) *submit = id.status();
  if (!id.ok()) return Event{};
  while (true) {
    std::vector<Event> ev;
    EXPECT_TRUE(e.Poll(1000, 64, &ev).ok());
    for (Event& x : ev) {
      if (x.request_id == *id && x.type != EventType::kToken) return x;
    }
  }
}

TEST(DeviceLossTest, AnOrdinaryInternalErrorFailsOnlyThatStep) {
  // Even a message that reads like device loss is not device loss without the mark.
  auto e = MakeEngine(3, absl::InternalError("device lost: no kernel for this shape"));
  ASSERT_NE(e, nullptr);
  const Event failed = RunOne(*e, 4);
  EXPECT_EQ(failed.type, EventType::kError);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(IsDeviceLost(failed.status));
  const Event next = RunOne(*e, 4);  // still serving
  EXPECT_EQ(next.type, EventType::kFinish) << next.status;
  EXPECT_EQ(next.num_generated_tokens, 4);
}

TEST(DeviceLossTest, AMarkedErrorIsStickyDeviceLost) {
  auto e = MakeEngine(3, MarkDeviceLost(absl::InternalError("CUDA error cudaErrorIllegalAddress")));
  ASSERT_NE(e, nullptr);
  const Event failed = RunOne(*e, 4);
  EXPECT_EQ(failed.type, EventType::kError);
  EXPECT_TRUE(IsDeviceLost(failed.status)) << failed.status;
  absl::Status submit;
  RunOne(*e, 4, &submit);
  EXPECT_TRUE(IsDeviceLost(submit)) << submit;  // every later submit fails
}

TEST(DeviceLossTest, TheMarkSurvivesAnnotation) {
  const absl::Status lost = MarkDeviceLost(absl::InternalError("x"));
  EXPECT_TRUE(IsDeviceLost(Annotate(lost, "step")));
  EXPECT_FALSE(IsDeviceLost(absl::InternalError("device lost: x")));
  EXPECT_FALSE(IsDeviceLost(absl::OkStatus()));
  EXPECT_FALSE(IsDeviceLost(MarkDeviceLost(absl::OkStatus())));
}

}  // namespace
}  // namespace gannet::engine

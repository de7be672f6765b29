// The factory's automatic choice on this machine: a build without CUDA, or a machine without an
// NVIDIA driver, runs on the CPU, and the latter says so as "no GPU here" (no_gpu: logged at
// info level, not as a warning on every run), while "cpu" never asks CUDA at all.
#include <filesystem>

#include "gtest/gtest.h"
#include "lib/backend/backend_factory.h"

namespace gannet::backend {
namespace {

TEST(BackendFactoryTest, CpuNeverProbesCuda) {
  BackendOptions o;
  o.kind = "cpu";
  auto c = CreateBackend(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend->name(), std::string_view("cpu"));
  EXPECT_TRUE(c->fallback_reason.empty()) << c->fallback_reason;
  EXPECT_FALSE(c->no_gpu);
}

TEST(BackendFactoryTest, AutomaticChoiceWithoutADriverIsNoGpuNotAWarning) {
  if (std::filesystem::exists("/proc/driver/nvidia/version")) {
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  }
  auto c = CreateBackend(BackendOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend->name(), std::string_view("cpu"));
  if (!CudaBackendCompiled()) {
    EXPECT_TRUE(c->fallback_reason.empty()) << c->fallback_reason;  // nothing to fall back from
    EXPECT_FALSE(c->no_gpu);
    return;
  }
  EXPECT_TRUE(c->no_gpu) << c->fallback_reason;
  EXPECT_NE(c->fallback_reason.find("no NVIDIA driver"), std::string::npos) << c->fallback_reason;
  EXPECT_EQ(c->fallback_reason.find("insufficient"), std::string::npos) << c->fallback_reason;
}

}  // namespace
}  // namespace gannet::backend

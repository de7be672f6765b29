// The CPU backend holds a checkpoint's weights once (issue 56): it reads most matrices in place
// from the bytes the checkpoint read, and the tensors it copies (fused QKV and gate/up) give
// their checkpoint bytes back as soon as the copy exists (LoadDeviceWeights' on_copied, which
// the engine wires to Checkpoint::ReleaseRange). Measured as resident memory: the high-water
// mark (VmHWM) is reset before each load, so what else the process did does not count.
#include <malloc.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/file_util.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/synthetic.h"
#include "lib/model/weights.h"
#include "lib/runner/device_weights.h"
#include "tests/testing/tiny_models.h"
#include "tests/testing/process_memory.h"

namespace gannet::runner {
namespace {

using gannet::testing::ResetPeakRss;
using gannet::testing::StatusBytes;

struct Residency {
  int64_t weight_bytes = 0;  // the checkpoint's
  int64_t peak = 0;          // above the start, while loading
  int64_t kept = 0;          // above the start, once loaded
};

// Reads the checkpoint and loads it on the CPU backend, with or without giving copied tensors'
// bytes back; the backend and weights stay alive until the measurement is taken.
Residency Load(const std::string& dir, bool release) {
  malloc_trim(0);
  EXPECT_TRUE(ResetPeakRss());
  const int64_t start = StatusBytes("VmRSS");
  Residency r;
  auto config = model::LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  auto ckpt = model::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!config.ok() || !ckpt.ok()) return r;
  r.weight_bytes = static_cast<int64_t>((*ckpt)->total_bytes());
  auto weights = model::BindWeights(*config, **ckpt);
  EXPECT_TRUE(weights.ok()) << weights.status();
  backend::CpuBackend be;
  model::Checkpoint* c = ckpt->get();
  WeightCopiedFn on_copied;
  if (release) {
    on_copied = [c](const model::WeightView& v) { c->ReleaseRange(v.data, v.nbytes()); };
  }
  auto loaded = LoadDeviceWeights(*config, *weights, &be, {}, on_copied);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  malloc_trim(0);
  r.peak = StatusBytes("VmHWM") - start;
  r.kept = StatusBytes("VmRSS") - start;
  return r;
}

TEST(WeightResidencyTest, CpuHoldsCheckpointWeightsOnce) {
  // The trained tiny model's shape with wide layers: ~110 MB, most of it in fused matrices
  // (gate/up, and QKV), as in every Gemma-4 checkpoint.
  auto text = ReadFileToString(gannet::testing::TinyModelDir("trained") + "/config.json", 1 << 20,
                               "config.json");
  ASSERT_TRUE(text.ok()) << text.status();
  auto json = Json::Parse(*text);
  ASSERT_TRUE(json.ok());
  json->Set("hidden_size", Json::Int(1024));
  json->Set("intermediate_size", Json::Int(4096));
  char tmpl[] = "/tmp/gannet_residency_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_TRUE(model::WriteSyntheticCheckpoint(*json, dir, model::SyntheticOptions()).ok());

  const Residency copied = Load(dir, /*release=*/false);
  const Residency once = Load(dir, /*release=*/true);
  std::system(("rm -rf " + dir).c_str());
  const double mb = 1e6;
  std::printf(
      "checkpoint %.1f MB: sources kept: peak +%.1f MB, kept +%.1f MB; given back: "
      "peak +%.1f MB, kept +%.1f MB\n",
      once.weight_bytes / mb, copied.peak / mb, copied.kept / mb, once.peak / mb, once.kept / mb);
  // Without giving back, the fused copies come on top of the read bytes (the double residency);
  // with it, the weights are held once, and the peak is that plus the largest fused matrix
  // (gate/up of one layer, 16 MB here) and the f32 norm vectors.
  EXPECT_GT(copied.kept, once.weight_bytes * 3 / 2);
  EXPECT_LT(once.kept, once.weight_bytes * 11 / 10);
  EXPECT_LT(once.peak, once.weight_bytes * 5 / 4);
}

}  // namespace
}  // namespace gannet::runner

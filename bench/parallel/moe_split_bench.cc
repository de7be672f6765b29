// gannet-moe-split-bench: how a tensor-parallel group should split 26B-A4B's experts, measured on
// one GPU. Both splits end the MoE block with the same all-reduce of [T, H] partial sums, so they
// differ only in each rank's expert work and in how evenly it falls: with the intermediate split
// every rank runs every routed pair on I / world rows; with expert parallelism rank r runs only
// the pairs routed to its E / world experts, on all I rows, and the slowest rank sets the pace.
// For each token count T and group size N this runs every rank's MoeExperts of one layer in turn
// (the backend's own kernel choice) and prints the slowest rank's time for each split.
//
// Routing: each token picks top_k distinct experts uniformly at random (fixed seed). Trained
// routers are skewed, which only makes expert parallelism's slowest rank slower, so uniform
// routing is its best case.
//
//   gannet-moe-split-bench [--model dummy:26b-a4b] [--iters 20]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/backend/backend_factory.h"
#include "lib/common/status.h"
#include "lib/model/tp_shard.h"
#include "lib/model/variants.h"

namespace gannet {
namespace {

using backend::Tensor;

struct Device {
  backend::Backend* be;
  backend::Buffer weights;  // one rank's experts under either split (the same bytes)
  backend::Buffer x, out, ids, wts;
};

// Median seconds of one MoeExperts call (after two warm-ups).
absl::StatusOr<double> TimeExperts(backend::Backend& be, const backend::MoeExpertsArgs& a,
                                   int iters) {
  for (int i = 0; i < 2; ++i) GANNET_RETURN_IF_ERROR(be.MoeExperts(a));
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    GANNET_RETURN_IF_ERROR(be.BeginDeviceSpan());
    GANNET_RETURN_IF_ERROR(be.MoeExperts(a));
    GANNET_RETURN_IF_ERROR(be.EndDeviceSpan());
    GANNET_RETURN_IF_ERROR(be.Synchronize());
    GANNET_ASSIGN_OR_RETURN(double t, be.DeviceSpanSeconds());
    s.push_back(t);
  }
  std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
  return s[s.size() / 2];
}

int Run(const std::string& model, int iters) {
  auto config = model::DummyModelConfig(model);
  if (!config.ok() || !config->text.enable_moe_block) {
    std::fprintf(
        stderr, "moe-split-bench: %s\n",
        config.ok() ? "the model has no experts" : std::string(config.status().message()).c_str());
    return 2;
  }
  const model::TextConfig& c = config->text;
  backend::BackendOptions cuda;
  cuda.kind = "cuda";
  auto made = backend::CreateBackend(cuda);
  if (!made.ok()) {
    std::fprintf(stderr, "moe-split-bench: %s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  backend::Backend& be = *made->backend;
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.num_experts,
                K = c.top_k_experts;
  const std::vector<int> tokens = {1, 2, 4, 8, 16, 64, 256, 1024, 4096};
  const int64_t max_t = tokens.back();
  const int64_t expert_bytes = 3 * I * H * 2;  // gate, up, down rows of one expert, bf16
  auto alloc = [&](size_t bytes) -> backend::Buffer {
    auto b = be.Allocate(bytes);
    if (!b.ok()) {
      std::fprintf(stderr, "moe-split-bench: %s\n", std::string(b.status().message()).c_str());
      std::exit(1);
    }
    return std::move(*b);
  };
  // Half of the experts' bytes is the most any rank of N >= 2 holds.
  backend::Buffer weights = alloc(static_cast<size_t>(E / 2 * expert_bytes));
  backend::Buffer x = alloc(max_t * H * 2), out = alloc(max_t * H * 2);
  backend::Buffer ids = alloc(max_t * K * 4), wts = alloc(max_t * K * 4);
  // Small finite values everywhere (the kernels' speed does not depend on them).
  (void)be.Fill(weights.View(DType::kBF16, {static_cast<int64_t>(weights.bytes() / 2)}), 0.01f);
  (void)be.Fill(x.View(DType::kBF16, {max_t, H}), 0.5f);
  (void)be.Fill(wts.View(DType::kF32, {max_t, K}), 1.0f / K);
  std::mt19937 rng(7);
  std::vector<int32_t> host_ids(max_t * K);
  for (int64_t t = 0; t < max_t; ++t) {
    std::vector<int32_t> all(E);
    for (int64_t e = 0; e < E; ++e) all[e] = static_cast<int32_t>(e);
    std::shuffle(all.begin(), all.end(), rng);
    std::copy(all.begin(), all.begin() + K, host_ids.begin() + t * K);
  }
  if (!be.CopyToDevice(ids.data(), host_ids.data(), host_ids.size() * 4).ok()) return 1;

  std::printf(
      "moe-split-bench: %s on %s, one layer's experts (E %lld, top-%lld, I %lld, H %lld), "
      "uniform random routing, median of %d\n",
      model.c_str(), be.DeviceName().c_str(), static_cast<long long>(E), static_cast<long long>(K),
      static_cast<long long>(I), static_cast<long long>(H), iters);
  std::printf("  %4s %6s %16s %16s %10s %8s\n", "N", "T", "intermediate us", "experts us",
              "exp/int", "default");
  for (int world : {2, 4, 8}) {
    if (!model::CheckTpShardable(*config, world, model::MoeSplit::kExperts).ok() ||
        !model::CheckTpShardable(*config, world, model::MoeSplit::kIntermediate).ok()) {
      continue;
    }
    for (int t : tokens) {
      backend::MoeExpertsArgs a;
      a.x = x.View(DType::kBF16, {t, H});
      a.topk_ids = ids.View(DType::kI32, {t, K});
      a.topk_weights = wts.View(DType::kF32, {t, K});
      a.out = out.View(DType::kBF16, {t, H});
      // Intermediate split: every rank alike (same pairs, same shapes).
      const int64_t Il = I / world;
      backend::MoeExpertsArgs in = a;
      in.gate_up = Tensor::Make(weights.data(), DType::kBF16, {E, 2 * Il, H});
      in.down = Tensor::Make(static_cast<char*>(weights.data()) + E * 2 * Il * H * 2, DType::kBF16,
                             {E, H, Il});
      auto t_in = TimeExperts(be, in, iters);
      // Expert parallelism: each rank's own pairs; the slowest rank counts.
      const int64_t El = E / world;
      double t_ep = 0;
      absl::Status st = t_in.status();
      for (int r = 0; r < world && st.ok(); ++r) {
        backend::MoeExpertsArgs ep = a;
        ep.gate_up = Tensor::Make(weights.data(), DType::kBF16, {El, 2 * I, H});
        ep.down = Tensor::Make(static_cast<char*>(weights.data()) + El * 2 * I * H * 2,
                               DType::kBF16, {El, H, I});
        ep.expert_begin = static_cast<int>(r * El);
        ep.total_experts = static_cast<int>(E);
        auto tr = TimeExperts(be, ep, iters);
        st = tr.status();
        if (tr.ok()) t_ep = std::max(t_ep, *tr);
      }
      if (!st.ok()) {
        std::fprintf(stderr, "moe-split-bench: %s\n", std::string(st.message()).c_str());
        return 1;
      }
      std::printf("  %4d %6d %16.1f %16.1f %10.2f %8s\n", world, t, *t_in * 1e6, t_ep * 1e6,
                  t_ep / *t_in,
                  std::string(model::MoeSplitName(model::DefaultMoeSplit(*config, world))).c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace gannet

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even when a timeout kills the run
  std::string model = "dummy:26b-a4b";
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gannet-moe-split-bench [--model dummy:26b-a4b] [--iters 20]\n");
      return 2;
    }
  }
  return gannet::Run(model, iters);
}

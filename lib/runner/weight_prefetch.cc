#include "lib/runner/weight_prefetch.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "lib/common/logging.h"

namespace gannet::runner {

WeightPrefetch::WeightPrefetch(const DeviceWeights& w, const model::TextConfig& c, int64_t ahead)
    : ahead_(std::max<int64_t>(ahead, 0)) {
  auto push = [&](const backend::Tensor& t) {
    if (!t.valid() || !t.contiguous()) return;
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.elem_bytes());
    if (bytes <= 0) return;
    if (starts_.empty()) starts_.push_back(0);
    pieces_.push_back({static_cast<const char*>(t.data), bytes});
    starts_.push_back(starts_.back() + bytes);
  };
  const int layers = static_cast<int>(w.layers.size());
  qkv_index_.resize(layers);
  after_ffn_index_.resize(layers);
  for (int l = 0; l < layers; ++l) {
    const DeviceLayer& L = w.layers[l];
    qkv_index_[l] = pieces_.size();
    push(L.qkv);
    push(L.o_proj);
    if (c.enable_moe_block) push(L.router_proj);
    push(L.gate_up);
    push(L.down);
    after_ffn_index_[l] = pieces_.size();
    if (c.has_ple()) {
      push(L.ple_gate);
      push(L.ple_proj);
    }
  }
  push(w.lm_head);
  // Without PLE, what follows a layer's MLP is the next layer's QKV (the LM head after the last),
  // which is where after_ffn_index_ already points.
}

size_t WeightPrefetch::NextIndex(Point point, int layer) const {
  switch (point) {
    case Point::kStepStart: return 0;
    case Point::kAfterQkvPrep: return qkv_index_[layer] + 1;
    case Point::kAfterFfn: return after_ffn_index_[layer];
  }
  return 0;
}

void WeightPrefetch::BeginStep(int tokens) {
  cursor_ = 0;
  active_ = ahead_ > 0 && !pieces_.empty() && tokens <= kPrefetchMaxTokens;
}

std::vector<backend::DeviceRange> WeightPrefetch::RangesOf(int64_t from, int64_t to) const {
  std::vector<backend::DeviceRange> out;
  const auto first = std::upper_bound(starts_.begin(), starts_.end(), from);
  for (size_t p = first == starts_.begin() ? 0 : static_cast<size_t>(first - starts_.begin()) - 1;
       p < pieces_.size() && starts_[p] < to; ++p) {
    const int64_t a = std::max(from, starts_[p]) - starts_[p];
    const int64_t b = std::min(to, starts_[p + 1]) - starts_[p];
    // Round inward to 16 bytes (the prefetch's granule); a partial granule is left to the kernel.
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(pieces_[p].data) + a + 15) & ~uintptr_t{15};
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(pieces_[p].data) + b) & ~uintptr_t{15};
    if (hi > lo) out.push_back({reinterpret_cast<const void*>(lo), static_cast<int64_t>(hi - lo)});
  }
  return out;
}

absl::Status WeightPrefetch::Ahead(backend::Backend* be, Point point, int layer) {
  if (!active_) return absl::OkStatus();
  const size_t next = NextIndex(point, layer);
  if (next >= pieces_.size()) return absl::OkStatus();
  const int64_t start = starts_[next];
  const int64_t to = std::min(start + ahead_, starts_.back());
  const int64_t from = std::max(cursor_, start);
  if (from >= to) return absl::OkStatus();
  cursor_ = to;
  const std::vector<backend::DeviceRange> ranges = RangesOf(from, to);
  if (ranges.empty()) return absl::OkStatus();
  return be->PrefetchWeights(ranges);
}

int64_t DefaultPrefetchAhead(const backend::Backend& be) {
  const int64_t cache = be.WeightCacheBytes();
  if (cache <= 0) return 0;
  if (const char* env = std::getenv("GANNET_PREFETCH_MB")) {
    char* end = nullptr;
    const double mb = std::strtod(env, &end);
    if (end != env && *end == '\0' && mb >= 0) return static_cast<int64_t>(mb * (1 << 20));
    GANNET_LOG_WARNING("GANNET_PREFETCH_MB='{}' is not a non-negative number; ignored", env);
  }
  return cache / 2;
}

}  // namespace gannet::runner

// Which weight the next linear layer will read, learned from the order earlier steps read them, so
// that a GEMV can start pulling its successor's weights into L2 as its own CTAs finish (gemv.h,
// GemvParams::next_w). Between two projections of a batch-1 step run kernels that read little
// (QKV prep, attention, norms: a quarter of an E2B step), and a short projection's weights of a
// few MB are mostly ramp-up and tail when each is read only once its kernel starts. Host only,
// apart from the CUDA calls, so that it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace gannet::backend {

class NextWeightHints {
 public:
  struct Region {
    const void* data = nullptr;
    size_t bytes = 0;  // 0 = no hint
  };

  // cap_bytes: the most of a successor a hint names (its first bytes); 0 disables every hint.
  explicit NextWeightHints(size_t cap_bytes) : cap_(cap_bytes) {}

  // Records that a linear layer reads `w` (`bytes` long) now, after the one last observed, and
  // returns the weight that followed `w` the last time it was read (its first min(bytes, cap)
  // bytes), or no hint. A step's projections run in the same order every step, so from the
  // second step on each one names the next; a wrong guess (a different model's layer between
  // them, a changed order) costs bandwidth, never a result, and is corrected by the next call.
  // `frees`: how many device buffers the backend has freed so far; when it changed since the last
  // call, everything learned is forgotten first, so that no hint names freed memory.
  Region Observe(const void* w, size_t bytes, uint64_t frees);

  size_t cap_bytes() const { return cap_; }

 private:
  size_t cap_;
  uint64_t frees_ = 0;
  const void* last_ = nullptr;
  std::unordered_map<const void*, Region> next_;
};

}  // namespace gannet::backend

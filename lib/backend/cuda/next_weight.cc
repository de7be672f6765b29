#include "lib/backend/cuda/next_weight.h"

#include <algorithm>

namespace gannet::backend {

NextWeightHints::Region NextWeightHints::Observe(const void* w, size_t bytes, uint64_t frees) {
  if (frees != frees_) {
    frees_ = frees;
    last_ = nullptr;
    next_.clear();
  }
  if (cap_ == 0 || w == nullptr) return {};
  // A layer read twice in a row (a test's or a benchmark's loop) is not its own successor: its
  // rows are already being read.
  if (last_ != nullptr && last_ != w) next_[last_] = Region{w, std::min(bytes, cap_)};
  last_ = w;
  const auto it = next_.find(w);
  return it == next_.end() ? Region{} : it->second;
}

}  // namespace gannet::backend

// A KvLayout for tests of the KV manager and the scheduler, which only look at the page size,
// the window and the pool sizes: one small layer per group with pages.
#pragma once

#include <vector>

#include "lib/kv/kv_layout.h"

namespace gannet::kv {

inline KvLayout TestKvLayout(int32_t page_size, int32_t window, int32_t sliding_pages,
                             int32_t full_pages) {
  std::vector<KvLayerGeometry> layers;
  if (sliding_pages > 0) layers.push_back({KvGroup::kSliding, 1, 8});
  if (full_pages > 0) layers.push_back({KvGroup::kFull, 1, 8});
  auto layout = MakeKvLayout(layers, page_size, window, 2, {sliding_pages, full_pages});
  return layout.ok() ? *std::move(layout) : KvLayout{};
}

}  // namespace gannet::kv

#include "lib/backend/cuda/linear_tuning.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gannet::backend {

bool TimesCublasLtVariants(int m, int gemv_max_m) {
  return m > gemv_max_m && m <= kLinearDecodeBucketRows;
}

int LinearPlanRows(int m) {
  if (m <= 16) return m;
  if (m <= 64) return (m + 7) / 8 * 8;
  if (m <= kLinearDecodeBucketRows) return (m + 15) / 16 * 16;
  int b = 256;
  while (b < m) b *= 2;
  return b;
}

std::vector<int> LinearPlanKeys(int max_rows) {
  std::vector<int> keys;
  for (int m = 1; m <= max_rows;) {
    const int key = LinearPlanRows(m);
    keys.push_back(std::min(key, max_rows));
    m = key + 1;
  }
  return keys;
}

float MedianMs(std::vector<float> runs) {
  if (runs.empty()) return std::numeric_limits<float>::infinity();
  const auto mid = runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2);
  std::nth_element(runs.begin(), mid, runs.end());
  return *mid;
}

int PickAlgo(const std::vector<float>& ms, float margin) {
  int pick = -1;
  for (int i = 0; i < static_cast<int>(ms.size()); ++i) {
    if (!std::isfinite(ms[i])) continue;
    if (pick < 0 || ms[i] < ms[pick] * (1.f - margin)) pick = i;
  }
  return pick;
}

GemvTileRange GemvTilesToTime(int m, int forced, int tiles) {
  if (m != 1 || tiles <= 1) return {0, 1};
  if (forced >= 0) return {std::min(forced, tiles - 1), 1};
  return {0, tiles};
}

}  // namespace gannet::backend

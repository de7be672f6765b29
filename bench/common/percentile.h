// The p-quantile (0..1) of a sample, interpolating between neighbours: what the serving benches
// report as p50 / p99.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gannet::bench {

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

}  // namespace gannet::bench

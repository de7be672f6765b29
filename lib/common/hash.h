// Small, well-known integer and string hashes, used where gannet needs results that are
// reproducible across runs, machines and devices (synthetic weights, counter-based sampling).
// kernels/common/synthetic.cu carries device copies of SplitMix64; keep them identical.
#pragma once

#include <cstdint>
#include <string_view>

namespace gannet {

// SplitMix64's output function (Steele, Lea, Flood 2014).
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a.
inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace gannet

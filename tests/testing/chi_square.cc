#include "tests/testing/chi_square.h"

#include <cmath>

namespace gannet::testing {

// Regularized upper incomplete gamma Q(a, x) (Numerical Recipes: series for x < a + 1, Lentz's
// continued fraction otherwise, where Q itself is computed so tiny p-values keep their digits).
double GammaQ(double a, double x) {
  if (x <= 0) return 1.0;
  const double front = std::exp(-x + a * std::log(x) - std::lgamma(a));
  if (x < a + 1) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int n = 0; n < 100000 && std::fabs(del) > std::fabs(sum) * 1e-16; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
    }
    return 1.0 - sum * front;
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    if (std::fabs(d * c - 1) < 1e-16) break;
  }
  return front * h;
}

double ChiSquareSurvival(double stat, double df) { return GammaQ(df / 2, stat / 2); }

// Goodness of fit of counts to probabilities; cells expecting < 5 are pooled (in index order).
double GoodnessOfFitP(const std::vector<int64_t>& obs, const std::vector<double>& prob) {
  int64_t n = 0;
  for (int64_t o : obs) n += o;
  double stat = 0, pool_e = 0, pool_o = 0;
  int cells = 0;
  for (size_t i = 0; i < obs.size(); ++i) {
    const double e = prob[i] * n;
    if (e == 0) {
      if (obs[i] != 0) return 0;  // an impossible cell was hit
      continue;
    }
    pool_e += e;
    pool_o += obs[i];
    if (pool_e >= 5) {
      stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
      ++cells;
      pool_e = pool_o = 0;
    }
  }
  if (pool_e > 0) {
    stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
    ++cells;
  }
  return cells < 2 ? 1.0 : ChiSquareSurvival(stat, cells - 1);
}

// Two samples of equal size, same distribution? Cells with fewer than 20 draws between them are
// pooled (in index order) until each pooled cell has 20: the pooling looks only at a + b, the
// sufficient statistic under the null, so the test stays valid.
double TwoSampleP(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double stat = 0, pa = 0, pb = 0;
  int cells = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    pa += a[i];
    pb += b[i];
    if (pa + pb >= 20) {
      stat += (pa - pb) * (pa - pb) / (pa + pb);
      ++cells;
      pa = pb = 0;
    }
  }
  if (pa + pb > 0) {
    stat += (pa - pb) * (pa - pb) / (pa + pb);
    ++cells;
  }
  return cells < 2 ? 1.0 : ChiSquareSurvival(stat, cells - 1);
}

}  // namespace gannet::testing

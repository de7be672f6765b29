// Chi-square tests for the sampling tests: the survival function, goodness of fit to known
// probabilities and the two-sample test of equal distributions (cells in index order).
#pragma once

#include <cstdint>
#include <vector>

namespace gannet::testing {

// Regularized upper incomplete gamma Q(a, x).
double GammaQ(double a, double x);
// P(chi-square with df degrees of freedom > stat).
double ChiSquareSurvival(double stat, double df);
// Goodness of fit of counts to probabilities; cells expecting < 5 are pooled (in index order);
// 0 if a cell of probability 0 was hit.
double GoodnessOfFitP(const std::vector<int64_t>& obs, const std::vector<double>& prob);
// Two equal-size samples from one distribution? Cells with fewer than 20 draws between them are
// pooled in index order (the pooling looks only at a + b, the sufficient statistic under the
// null, so the test stays valid).
double TwoSampleP(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace gannet::testing

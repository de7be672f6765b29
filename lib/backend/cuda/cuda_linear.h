// Linear layers of the CUDA backend: out[M, N] = x[M, K] w[N, K]^T with bf16 weights (f16 on the
// fp16 compute path), x and out of the weight's type or f32 (f32 x is converted to the weight's
// type for cuBLASLt), fp32 accumulation.
//
// Candidates per shape: the registry's small-M GEMV (M <= 8; at M = 1 each of its tiles,
// kernels::GemvTile), cuBLASLt's heuristic top algos and, at 9-128 rows, their unsplit, clustered
// variants (cublaslt_candidates.h).
// The first uncaptured call of a shape times every candidate (on the call's own buffers, seven
// interleaved rounds, each candidate's median) and caches the pick: cuBLASLt's first algo unless a
// later one is 3% faster, and the GEMV where it measurably beats that (linear_tuning.h); among the
// GEMV's tiles the same rule keeps the four-row tile unless another is 3% faster. M is keyed
// exactly up to 16, by the runner's decode batch buckets to 128 and by power of two above; how many
// heuristic algos are timed: GANNET_LINEAR_ALGOS (default 8). cuBLASLt runs with a fixed
// pre-allocated workspace, so every call is graph-capturable. GANNET_LINEAR_TUNE=0 skips timing
// (first heuristic algo; the GEMV for M <= 8). GANNET_LINEAR_PATH=cublaslt|gemv pins a path as
// Force() does, GANNET_GEMV_TILE=t the GEMV's tile at M = 1 (diagnostics: what the timed choice is
// worth).
#pragma once

#include <cublasLt.h>

#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gemm/gemv.h"
#include "kernels/registry/registry.h"
#include "lib/backend/tensor.h"

namespace gannet::backend {

class CudaBackend;

class CudaLinear {
 public:
  static absl::StatusOr<std::unique_ptr<CudaLinear>> Create(CudaBackend* backend);
  ~CudaLinear();

  // kInt4Kernel / kInt4Dense: an int4 weight through the int4 kernels, or dequantized into
  // scratch and multiplied by cuBLASLt (cuda_int4.cc says when each).
  enum class Path { kCublasLt, kGemv, kInt4Kernel, kInt4Dense };
  // The path a shape runs on, and its tuned time (0 when untimed).
  struct Choice {
    Path path = Path::kCublasLt;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
    float time_ms = 0;
    int algo_rank = 0;   // the algo's place among the candidates (0 = the heuristic's first pick)
    int candidates = 0;  // how many cuBLASLt algos were timed: the heuristic's, then variants
    int variants = 0;    // how many of them are variants (the last ones)
    kernels::GemvTile gemv_tile = kernels::GemvTile::k4Rows;  // the GEMV's, timed at M = 1
  };
  // Runs the layer (tuning the shape first if needed) and reports the path it took.
  // An int4 weight (LoadWeight's device form) goes to RunInt4.
  absl::StatusOr<Choice> Run(const Tensor& x, const Tensor& w, const Tensor& out);
  // The fused GeluTanhMul(gate, up, act) then Run(act, w, out) (Backend::GeluMulLinear): the GEMV
  // computing the product as it loads its input, the same bits. Taken only where Run would take
  // the GEMV for act's shape (its plan tuned on an earlier call), M <= kGemvGatedMaxM, and the
  // operands are of the weight's type and aligned; returns false, having run nothing, otherwise.
  absl::StatusOr<bool> RunGeluMul(const Tensor& gate, const Tensor& up, const Tensor& w,
                                  const Tensor& act, const Tensor& out);
  // Run(x, w, gu) then GeluTanhMul of gu's halves into act (Backend::LinearGeluMul) as one GEMV
  // whose epilogue evaluates the product (kernels::GemvParams::glu), the same bits, gu unwritten.
  // Taken only where Run would take the GEMV for gu's shape (its plan tuned on an earlier call),
  // with x, gu and act of the weight's type and aligned for the GEMV; returns false, having run
  // nothing, otherwise.
  absl::StatusOr<bool> RunLinearGeluMul(const Tensor& x, const Tensor& w, const Tensor& gu,
                                        const Tensor& act);
  // Tests and benchmarks pin a path (nullopt = the timed choice among all candidates; kCublasLt =
  // the timed choice among cuBLASLt's algorithms only; kGemv = the GEMV where it applies).
  // Forgets every tuned shape.
  void Force(std::optional<Path> path);
  // Tests pin one cuBLASLt candidate by its place (Choice::algo_rank) instead of timing them; a
  // place past the last is OutOfRange. Forgets every tuned shape.
  void PinCandidate(std::optional<int> rank);

 private:
  explicit CudaLinear(CudaBackend* backend);
  struct Key;
  struct Plan;
  using KeyTuple = std::tuple<int, int, int, int, int, int64_t, int64_t, int>;
  absl::StatusOr<Plan*> GetPlan(const KeyTuple& key, int m, int n, int k, bool w_f16, bool out_f32,
                                int64_t ldx, int64_t ldo);
  absl::Status RunCublas(Plan& plan, const cublasLtMatmulAlgo_t* algo, const void* x, int64_t ldx,
                         const void* w, void* out, int m);
  // x (f32) converted to `type` (the weight's) at dst, row stride ld: cuBLASLt's input.
  absl::Status ConvertInput(const Tensor& x, void* dst, int64_t ld, DType type);
  absl::StatusOr<Choice> RunInt4(const Tensor& x, const Tensor& w, const Tensor& out);
  // The registry's int4 entry for a problem, selected once per key.
  absl::StatusOr<const kernels::KernelEntry*> Int4Entry(const kernels::ProblemKey& pk);
  static KeyTuple KeyOf(const void* xb, int64_t ldxb, bool x_f32, const Tensor& w,
                        const Tensor& out);
  // up: the gated GEMV's second input (x is then the gate).
  // glu: GemvParams::glu (out is then act).
  absl::Status RunGemv(const Tensor& x, const Tensor& w, const Tensor& out, kernels::GemvTile tile,
                       const Tensor* up = nullptr, int glu = 0);
  // The tuned plan of a shape where Run takes the GEMV for it; null otherwise.
  Plan* TunedGemvPlan(const void* x, int64_t ldx, const Tensor& w, const Tensor& out);
  absl::Status Tune(Plan& plan, const Tensor& x, const Tensor& w, const Tensor& out, const void* xb,
                    int64_t ldxb, bool gemv_ok, bool allow_timing);

  CudaBackend* be_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* flush_ = nullptr;  // written before each timed run to evict the L2 (2 x its size)
  size_t flush_bytes_ = 0;
  std::map<KeyTuple, std::unique_ptr<Plan>> plans_;
  std::optional<Path> forced_;
  std::optional<int> pinned_;
  // By x f32 (+1) and weight f16 (+2).
  const kernels::KernelEntry* gemv_entry_[4] = {nullptr, nullptr, nullptr, nullptr};
  std::map<std::tuple<int, int, int, int, int, int, int, int, uint32_t>,
           const kernels::KernelEntry*>
      int4_entries_;
};

}  // namespace gannet::backend

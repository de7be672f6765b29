#include "lib/backend/cuda/cuda_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/activation/elementwise.h"
#include "kernels/gemm/gemm_entries.h"
#include "kernels/gemm/gemv.h"
#include "lib/backend/cuda/cublaslt_candidates.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"
#include "lib/backend/cuda/linear_tuning.h"
#include "lib/common/logging.h"

namespace gannet::backend {
namespace {

constexpr size_t kCublasWorkspaceBytes = 32u << 20;  // cuBLASLt's recommendation for Hopper
// cuBLASLt's heuristic candidates timed per shape (GANNET_LINEAR_ALGOS overrides,
// 1..kMaxCublasLtCandidates).
constexpr int kHeuristicAlgos = 8;
constexpr int kTimedRounds = 7;
// How much faster than cuBLASLt's earlier-ranked pick a later algo must time to replace it
// (linear_tuning.h, PickAlgo).
constexpr float kSwitchMargin = 0.03f;
// What the GEMV is worth over its eager time, against cuBLASLt, in a batch-1 step's graph.
// cuBLASLt's kernels take no part in programmatic dependent launch: the kernel after one cannot
// launch before it ends, and it cannot start before its predecessor has ended, where the GEMV
// launches early and streams its weights into L2 before its wait (gemv.cu). Eager timing, one
// kernel at a time, sees none of it. On an H100 every batch-1 projection on the GEMV made an E4B
// step 4.46-4.50 -> 4.35-4.36 ms (the 42 down projections, which the eager timing gave cuBLASLt
// by 0.6 us, and the GeLU-mul kernel the gated GEMV absorbs: ~3 us a layer). At M > 1 it does
// not hold: the same credit there moved E4B batch 4 from 5.17 to 5.31 ms (the wider buckets'
// registers leave fewer of their CTAs room to launch beside the kernel before them).
constexpr float kGemvPdlCreditMs = 3e-3f;

int HeuristicAlgos() {
  const char* env = std::getenv("GANNET_LINEAR_ALGOS");
  if (env == nullptr) return kHeuristicAlgos;
  return std::clamp(std::atoi(env), 1, kMaxCublasLtCandidates);
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// What the GEMV needs of an input operand (x, or the gated GEMV's gate and up): 16-byte rows.
bool GemvInputOk(const Tensor& x) { return x.stride0() % 8 == 0 && Aligned16(x.data); }

// GANNET_GEMV_PREFETCH_KB=n (a diagnostic, for measuring): each GEMV CTA prefetches at most n KB
// of its weight rows into L2 before its PDL wait (default: kernels::kGemvPrefetchBytes).
uint32_t GemvPrefetchCap() {
  static const uint32_t cap = [] {
    const char* env = std::getenv("GANNET_GEMV_PREFETCH_KB");
    if (env == nullptr || *env == '\0') return kernels::kGemvPrefetchBytes;
    return static_cast<uint32_t>(std::clamp(std::atoi(env), 0, 1 << 20)) * 1024u;
  }();
  return cap;
}

// GANNET_GEMV_TILE=t (a diagnostic, as GANNET_LINEAR_PATH is): the GEMV times only tile t at M = 1
// (GemvTilesToTime); -1 where unset.
int ForcedGemvTile() {
  const char* env = std::getenv("GANNET_GEMV_TILE");
  if (env == nullptr || *env == '\0') return -1;
  return std::max(std::atoi(env), 0);
}

// GANNET_GEMV_GATED=0 (a diagnostic, for measuring): neither GeLU-mul fusion runs (RunGeluMul,
// RunLinearGeluMul), so a gated MLP runs its projections and GeluTanhMul as separate kernels.
bool GatedGemvEnabled() {
  static const bool on = [] {
    const char* env = std::getenv("GANNET_GEMV_GATED");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

bool TuningEnabled() {
  const char* env = std::getenv("GANNET_LINEAR_TUNE");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

}  // namespace

struct CudaLinear::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Choice choice;
  bool tuned = false;
  int n = 0, k = 0;
  ~Plan() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<CudaLinear>> CudaLinear::Create(CudaBackend* backend) {
  std::unique_ptr<CudaLinear> l(new CudaLinear(backend));
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&l->handle_));
  GANNET_CUDA_RETURN_IF_ERROR(cudaMalloc(&l->workspace_, kCublasWorkspaceBytes));
  l->workspace_bytes_ = kCublasWorkspaceBytes;
  int l2 = 0;
  GANNET_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, backend->device_info().device));
  l->flush_bytes_ = static_cast<size_t>(l2) * 2;
  if (l->flush_bytes_ > 0) GANNET_CUDA_RETURN_IF_ERROR(cudaMalloc(&l->flush_, l->flush_bytes_));
  if (const char* path = std::getenv("GANNET_LINEAR_PATH")) {
    if (std::strcmp(path, "cublaslt") == 0) {
      l->forced_ = Path::kCublasLt;
    } else if (std::strcmp(path, "gemv") == 0) {
      l->forced_ = Path::kGemv;
    } else if (std::strcmp(path, "auto") != 0) {
      return InvalidArgumentError("GANNET_LINEAR_PATH='{}' is not one of auto, cublaslt, gemv",
                                  path);
    }
  }
  return l;
}

CudaLinear::~CudaLinear() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (flush_ != nullptr) cudaFree(flush_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

CudaLinear::CudaLinear(CudaBackend* backend) : be_(backend) {}

void CudaLinear::Force(std::optional<Path> path) {
  forced_ = path;
  plans_.clear();
}

void CudaLinear::PinCandidate(std::optional<int> rank) {
  pinned_ = rank;
  plans_.clear();
}

absl::StatusOr<CudaLinear::Plan*> CudaLinear::GetPlan(const KeyTuple& key, int m, int n, int k,
                                                      bool w_f16, bool out_f32, int64_t ldx,
                                                      int64_t ldo) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  plan->n = n;
  plan->k = k;
  GANNET_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  // Column-major view of the row-major problem: out^T [N, M] = w [N, K] (stored as K x N,
  // transposed) times x^T [K, M].
  // The 16-bit operands: bf16, or f16 on the fp16 compute path; f32 accumulation either way.
  const cudaDataType_t ab = w_f16 ? CUDA_R_16F : CUDA_R_16BF;
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->a, ab, k, n, k));
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->b, ab, k, m, ldx));
  GANNET_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->c, out_f32 ? CUDA_R_32F : ab, n, m, ldo));
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&plan->pref));
  GANNET_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes_, sizeof(workspace_bytes_)));
  Plan* raw = plan.get();
  plans_[key] = std::move(plan);
  return raw;
}

absl::Status CudaLinear::RunCublas(Plan& plan, const cublasLtMatmulAlgo_t* algo, const void* x,
                                   int64_t ldx, const void* w, void* out, int m) {
  const uint64_t rows_m = static_cast<uint64_t>(m);
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      plan.b, CUBLASLT_MATRIX_LAYOUT_COLS, &rows_m, sizeof(rows_m)));
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      plan.c, CUBLASLT_MATRIX_LAYOUT_COLS, &rows_m, sizeof(rows_m)));
  const float alpha = 1.0f, beta = 0.0f;
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b,
                                               &beta, out, plan.c, out, plan.c, algo, workspace_,
                                               workspace_bytes_, be_->stream()));
  return absl::OkStatus();
}

absl::Status CudaLinear::RunGemv(const Tensor& x, const Tensor& w, const Tensor& out,
                                 kernels::GemvTile tile, const Tensor* up, int glu) {
  kernels::GemvParams p;
  p.prefetch_cap = GemvPrefetchCap();
  p.tile = tile;
  p.glu = glu;
  if (up != nullptr) {
    p.up = up->data;
    p.ldu = up->stride0();
  }
  p.x = x.data;
  p.w = w.data;
  p.out = out.data;
  p.m = static_cast<int>(x.rows());
  p.n = static_cast<int>(w.dim(0));
  p.k = static_cast<int>(w.row_elems());
  p.ldx = x.stride0();
  p.ldo = out.stride0();
  GANNET_RETURN_IF_ERROR(RequireMatType(x.dtype, "Linear x"));
  GANNET_RETURN_IF_ERROR(RequireMatType(w.dtype, "Linear weight"));
  GANNET_RETURN_IF_ERROR(RequireMatType(out.dtype, "Linear out"));
  p.x_type = x.dtype;
  p.w_type = w.dtype;
  p.out_type = out.dtype;
  const kernels::ProblemKey pk = kernels::GemvProblem(p);
  // The GEMV entries differ only by x's and the weight's types: select once per pair, not per call.
  const kernels::KernelEntry*& entry =
      gemv_entry_[(x.dtype == DType::kF32 ? 1 : 0) + (w.dtype == DType::kF16 ? 2 : 0)];
  if (entry == nullptr) {
    const kernels::Selection sel = kernels::Select(pk, be_->device_info());
    if (sel.entry == nullptr) return InternalError("Linear: {}", sel.error);
    entry = sel.entry;
  }
  GANNET_CUDA_RETURN_IF_ERROR(entry->launch(&p, pk, be_->device_info(), nullptr, be_->stream()));
  return absl::OkStatus();
}

absl::Status CudaLinear::Tune(Plan& plan, const Tensor& x, const Tensor& w, const Tensor& out,
                              const void* xb, int64_t ldxb, bool gemv_ok, bool allow_timing) {
  const int m = static_cast<int>(x.rows());
  const uint64_t rows_m = static_cast<uint64_t>(m);
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      plan.b, CUBLASLT_MATRIX_LAYOUT_COLS, &rows_m, sizeof(rows_m)));
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      plan.c, CUBLASLT_MATRIX_LAYOUT_COLS, &rows_m, sizeof(rows_m)));
  int variants = 0;
  GANNET_ASSIGN_OR_RETURN(
      const std::vector<cublasLtMatmulAlgo_t> algos,
      CublasLtCandidates(handle_, {plan.desc, plan.a, plan.b, plan.c, plan.pref}, HeuristicAlgos(),
                         workspace_bytes_, TimesCublasLtVariants(m, kernels::kGemvMaxM),
                         &variants));
  const int count = static_cast<int>(algos.size());
  plan.choice = Choice();
  if (pinned_.has_value()) {
    if (*pinned_ < 0 || *pinned_ >= count) {
      return absl::OutOfRangeError(fmt::format("Linear: candidate {} pinned, M={} N={} K={} has {}",
                                               *pinned_, m, plan.n, plan.k, count));
    }
    plan.choice.algo = algos[*pinned_];
    plan.choice.has_algo = true;
    plan.choice.algo_rank = *pinned_;
    plan.choice.candidates = count;
    plan.choice.variants = variants;
    plan.tuned = true;
    return absl::OkStatus();
  }
  const bool try_gemv = gemv_ok && forced_ != Path::kCublasLt;
  const int cublas_algos = forced_ == Path::kGemv && gemv_ok ? 0 : count;
  if (!try_gemv && cublas_algos == 0) {
    return InternalError("Linear: cuBLASLt has no algorithm for M={} N={} K={}", m, plan.n, plan.k);
  }
  if (count > 0) {
    plan.choice.algo = algos[0];
    plan.choice.has_algo = true;
  }
  plan.choice.variants = variants;
  plan.choice.path = try_gemv ? Path::kGemv : Path::kCublasLt;
  const GemvTileRange tile_range = GemvTilesToTime(m, ForcedGemvTile(), kernels::kGemvTiles);
  const int first_tile = tile_range.first;
  const int gemv_tiles = try_gemv ? tile_range.count : 0;
  plan.choice.gemv_tile = static_cast<kernels::GemvTile>(first_tile);
  if (!allow_timing || !TuningEnabled() || cublas_algos + gemv_tiles <= 1) {
    plan.tuned = true;
    return absl::OkStatus();
  }
  // Candidates: cuBLASLt's algos in its heuristic order, then the GEMV's tiles (at M = 1 every
  // one: which fills the memory pipes best depends on the shape and the GPU). An f32 x costs
  // cuBLASLt a conversion the GEMV does not need: it is timed with the algo.
  const bool convert = x.dtype == DType::kF32;
  std::vector<std::function<absl::Status()>> launch;
  for (int i = 0; i < cublas_algos; ++i) {
    launch.push_back([&, i] {
      if (convert) GANNET_RETURN_IF_ERROR(ConvertInput(x, const_cast<void*>(xb), ldxb, w.dtype));
      return RunCublas(plan, &algos[i], xb, ldxb, w.data, out.data, m);
    });
  }
  for (int t = first_tile; t < first_tile + gemv_tiles; ++t) {
    launch.push_back([&, t] { return RunGemv(x, w, out, static_cast<kernels::GemvTile>(t)); });
  }
  const int n = static_cast<int>(launch.size());
  // An algo the heuristic offered that fails to launch is skipped; a failing GEMV is an error.
  std::vector<bool> ok(n, true);
  auto run = [&](int c) -> absl::Status {
    absl::Status st = launch[c]();
    if (st.ok()) return st;
    cudaGetLastError();
    ok[c] = false;
    return c >= cublas_algos ? st : absl::OkStatus();
  };
  absl::Status status;
  for (int c = 0; c < n && status.ok(); ++c) status = run(c);  // warm-up
  GANNET_RETURN_IF_ERROR(status);
  // Each timed run starts from a flushed L2, as a decode step finds it: the small-M shapes' weights
  // (44-88 MB) would otherwise sit in the 50 MB L2 and favour whichever candidate keeps them there.
  // The rounds interleave the candidates and each takes its median round, so a transient (the
  // other tensor-parallel ranks tuning at the same moment, a clock change) neither lands on one
  // candidate nor decides a pick. With the mean of five runs one after the other, 11 of the 14
  // (shape, rank) picks of 31B's TP=2 step at 80 rows varied over 14 processes of one build, and
  // 5 of 17 ran that step at 24.6-24.8 ms against 23.3-23.5 (docs/results-log/multigpu.md,
  // session 25).
  cudaEvent_t start, stop;
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<std::vector<float>> runs(n);
  auto time_run = [&](int c, int r) -> absl::Status {
    if (flush_ != nullptr) {
      GANNET_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flush_, r, flush_bytes_, be_->stream()));
    }
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, be_->stream()));
    GANNET_RETURN_IF_ERROR(run(c));
    if (!ok[c]) return absl::OkStatus();
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, be_->stream()));
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0;
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
    runs[c].push_back(ms);
    return absl::OkStatus();
  };
  for (int r = 0; r < kTimedRounds && status.ok(); ++r) {
    for (int c = 0; c < n && status.ok(); ++c) {
      if (ok[c]) status = time_run(c, r);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  GANNET_RETURN_IF_ERROR(status);
  std::vector<float> med(n);
  for (int c = 0; c < n; ++c) {
    med[c] = ok[c] ? MedianMs(runs[c]) : std::numeric_limits<float>::infinity();
  }
  std::string times;  // every candidate's time, for the debug line
  for (int i = 0; i < cublas_algos; ++i) {
    times += std::isfinite(med[i]) ? fmt::format(" {:.1f}", med[i] * 1e3) : std::string(" -");
  }
  const int pick =
      PickAlgo(std::vector<float>(med.begin(), med.begin() + cublas_algos), kSwitchMargin);
  float best = std::numeric_limits<float>::infinity();
  if (pick >= 0) {
    best = med[pick];
    plan.choice.path = Path::kCublasLt;
    plan.choice.algo = algos[pick];
    plan.choice.time_ms = best;
    plan.choice.algo_rank = pick;
  }
  const float cublas_ms = best;
  plan.choice.candidates = cublas_algos;
  float gemv_ms = 0.f;
  const float credit_ms = m == 1 && kernels::GemvLaunchesWithPdl() ? kGemvPdlCreditMs : 0.f;
  std::string gemv_times;
  if (try_gemv) {
    const std::vector<float> tile_ms(med.begin() + cublas_algos, med.end());
    for (const float t : tile_ms) gemv_times += fmt::format(" {:.1f}", t * 1e3);
    const int tile = std::max(0, PickAlgo(tile_ms, kSwitchMargin));  // all ran (else returned)
    plan.choice.gemv_tile = static_cast<kernels::GemvTile>(first_tile + tile);
    gemv_ms = tile_ms[tile];
    if (gemv_ms - credit_ms < best) {
      plan.choice.path = Path::kGemv;
      plan.choice.time_ms = gemv_ms;
    }
  }
  plan.tuned = true;
  GANNET_LOG_DEBUG(
      "linear M={} N={} K={} device {}: {} (cublasLt {:.1f} us, algo {} of {} ({} variants):{}; "
      "gemv {:.1f} us, tile {} of{}; gemv credit {:.1f} us)",
      m, plan.n, plan.k, be_->device_info().device,
      plan.choice.path == Path::kGemv ? "gemv" : "cublasLt", cublas_ms * 1e3, plan.choice.algo_rank,
      cublas_algos, variants, times, gemv_ms * 1e3, static_cast<int>(plan.choice.gemv_tile),
      gemv_times, credit_ms * 1e3);
  return absl::OkStatus();
}

absl::Status CudaLinear::ConvertInput(const Tensor& x, void* dst, int64_t ld, DType type) {
  GANNET_ASSIGN_OR_RETURN(kernels::Mat src, MatOf(x, "Linear input"));
  const kernels::Mat d{dst, type, ld};
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(
      src, d, static_cast<int>(x.rows()), static_cast<int>(x.row_elems()), be_->stream()));
  return absl::OkStatus();
}

CudaLinear::KeyTuple CudaLinear::KeyOf(const void* xb, int64_t ldxb, bool x_f32, const Tensor& w,
                                       const Tensor& out) {
  const int align = Aligned16(xb) | (Aligned16(w.data) << 1) | (Aligned16(out.data) << 2);
  return KeyTuple{LinearPlanRows(static_cast<int>(out.rows())),
                  static_cast<int>(w.dim(0)),
                  static_cast<int>(w.row_elems()),
                  static_cast<int>(x_f32) | (static_cast<int>(w.dtype == DType::kF16) << 1),
                  static_cast<int>(out.dtype == DType::kF32),
                  ldxb,
                  out.stride0(),
                  align};
}

absl::StatusOr<bool> CudaLinear::RunGeluMul(const Tensor& gate, const Tensor& up, const Tensor& w,
                                            const Tensor& act, const Tensor& out) {
  const int64_t m = gate.rows(), k = gate.row_elems();
  if (m < 1 || m > kernels::kGemvGatedMaxM || forced_ == Path::kCublasLt || !GatedGemvEnabled())
    return false;
  if (gate.dtype != w.dtype || up.dtype != w.dtype || act.dtype != w.dtype ||
      (out.dtype != w.dtype && out.dtype != DType::kF32)) {
    return false;
  }
  if (up.rows() != m || up.row_elems() != k || act.rows() != m || act.row_elems() != k ||
      w.rank != 2 || w.row_elems() != k || out.rows() != m || out.row_elems() != w.dim(0)) {
    return false;  // the unfused ops name the mismatch
  }
  if (k % 8 != 0 || !GemvInputOk(gate) || !GemvInputOk(up) || !Aligned16(w.data)) return false;
  // Only where Run would take the GEMV for act's shape (a plan tuned on an earlier call).
  const Plan* plan = TunedGemvPlan(act.data, act.stride0(), w, out);
  if (plan == nullptr) return false;
  GANNET_RETURN_IF_ERROR(RunGemv(gate, w, out, plan->choice.gemv_tile, &up));
  return true;
}

CudaLinear::Plan* CudaLinear::TunedGemvPlan(const void* x, int64_t ldx, const Tensor& w,
                                            const Tensor& out) {
  const auto it = plans_.find(KeyOf(x, ldx, false, w, out));
  if (it == plans_.end() || !it->second->tuned || it->second->choice.path != Path::kGemv)
    return nullptr;
  return it->second.get();
}

absl::StatusOr<bool> CudaLinear::RunLinearGeluMul(const Tensor& x, const Tensor& w,
                                                  const Tensor& gu, const Tensor& act) {
  const int64_t m = x.rows(), k = x.row_elems(), i = act.row_elems();
  if (m < 1 || m > kernels::kGemvMaxM || forced_ == Path::kCublasLt || !GatedGemvEnabled())
    return false;
  if (x.dtype != w.dtype || gu.dtype != w.dtype || act.dtype != w.dtype) return false;
  if (w.rank != 2 || w.row_elems() != k || w.dim(0) != 2 * i || gu.rows() != m ||
      gu.row_elems() != 2 * i || act.rows() != m) {
    return false;  // the unfused ops name the mismatch
  }
  if (k % 8 != 0 || !GemvInputOk(x) || !Aligned16(w.data)) return false;
  GANNET_RETURN_IF_ERROR(CheckInt32("LinearGeluMul", {{"intermediate size", i}}));
  // Only where Run would take the GEMV for gu's shape (a plan tuned on an earlier call). Every
  // tile gives the same bits; the one-row tile has no partner row, so two rows stand in for it.
  const Plan* plan = TunedGemvPlan(x.data, x.stride0(), w, gu);
  if (plan == nullptr) return false;
  kernels::GemvTile tile = plan->choice.gemv_tile;
  if (tile == kernels::GemvTile::k1RowDeep) tile = kernels::GemvTile::k2RowsDeep;
  GANNET_RETURN_IF_ERROR(RunGemv(x, w, act, tile, nullptr, static_cast<int>(i)));
  return true;
}

absl::StatusOr<CudaLinear::Choice> CudaLinear::Run(const Tensor& x, const Tensor& w,
                                                   const Tensor& out) {
  if (w.quantized()) return RunInt4(x, w, out);
  const int64_t m = x.rows(), k = x.row_elems(), n = w.dim(0);
  // The weight is bf16, or f16 on the fp16 compute path; x and out are the weight's type or f32.
  if (w.dtype != DType::kBF16 && w.dtype != DType::kF16) {
    return InvalidArgumentError("Linear: weight must be bf16 or f16, got {}", DTypeName(w.dtype));
  }
  for (const auto& [t, what] : {std::pair{&x, "x"}, std::pair{&out, "out"}}) {
    if (t->dtype != w.dtype && t->dtype != DType::kF32) {
      return InvalidArgumentError("Linear: {} must be {} (the weight's type) or f32, got {}", what,
                                  DTypeName(w.dtype), DTypeName(t->dtype));
    }
  }
  if (w.row_elems() != k || out.rows() != m || out.row_elems() != n || w.rank != 2) {
    return InvalidArgumentError("Linear: x [{}, {}] @ w^T [{}, {}] -> out [{}, {}] mismatch", m, k,
                                w.dim(0), w.row_elems(), out.rows(), out.row_elems());
  }
  // cuBLASLt takes 64-bit leading dimensions; only each dimension must fit an int.
  GANNET_RETURN_IF_ERROR(CheckInt32("Linear", {{"x rows M", m}, {"weight rows N", n}, {"K", k}}));
  if (m == 0) return Choice();
  const bool x_f32 = x.dtype == DType::kF32, out_f32 = out.dtype == DType::kF32;
  const bool w_f16 = w.dtype == DType::kF16;
  // cuBLASLt reads x in the weight's type: an f32 x (the residual stream feeding PLE) goes through
  // scratch, converted only when cuBLASLt runs (the GEMV reads f32 itself).
  const void* xb = x.data;
  int64_t ldxb = x.stride0();
  if (x_f32) {
    ldxb = (k + 7) / 8 * 8;
    GANNET_ASSIGN_OR_RETURN(void* ws, be_->Workspace(CudaBackend::WorkspaceId::kLinearInput,
                                                     static_cast<size_t>(m * ldxb) * 2));
    xb = ws;
  }
  const bool gemv_ok = m <= kernels::kGemvMaxM && k % 8 == 0 && GemvInputOk(x) && Aligned16(w.data);
  const KeyTuple key = KeyOf(xb, ldxb, x_f32, w, out);
  GANNET_ASSIGN_OR_RETURN(
      Plan * plan, GetPlan(key, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                           w_f16, out_f32, ldxb, out.stride0()));
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(be_->stream(), &cap));
  const bool capturing = cap != cudaStreamCaptureStatusNone;
  if (!plan->tuned) {
    // No timing inside a capture: take the first pick now and tune on a later uncaptured call.
    GANNET_RETURN_IF_ERROR(Tune(*plan, x, w, out, xb, ldxb, gemv_ok, !capturing));
    if (capturing) plan->tuned = false;
  }
  if (plan->choice.path == Path::kGemv && gemv_ok) {
    GANNET_RETURN_IF_ERROR(RunGemv(x, w, out, plan->choice.gemv_tile));
    return plan->choice;
  }
  if (x_f32) GANNET_RETURN_IF_ERROR(ConvertInput(x, const_cast<void*>(xb), ldxb, w.dtype));
  // The cached algorithm came from the bucket's first M; check it fits this M.
  const cublasLtMatmulAlgo_t* algo = plan->choice.has_algo ? &plan->choice.algo : nullptr;
  if (algo != nullptr && LinearPlanRows(static_cast<int>(m)) != static_cast<int>(m)) {
    const uint64_t rows_m = static_cast<uint64_t>(m);
    GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        plan->b, CUBLASLT_MATRIX_LAYOUT_COLS, &rows_m, sizeof(rows_m)));
    GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        plan->c, CUBLASLT_MATRIX_LAYOUT_COLS, &rows_m, sizeof(rows_m)));
    cublasLtMatmulHeuristicResult_t check;
    if (cublasLtMatmulAlgoCheck(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, algo,
                                &check) != CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > workspace_bytes_) {
      algo = nullptr;  // let cuBLASLt pick for this M
    }
  }
  GANNET_RETURN_IF_ERROR(RunCublas(*plan, algo, xb, ldxb, w.data, out.data, static_cast<int>(m)));
  Choice used = plan->choice;
  used.path = Path::kCublasLt;
  return used;
}

std::vector<int> CudaBackend::LinearTuningRows(int max_rows) const {
  return LinearPlanKeys(max_rows);
}

absl::Status CudaBackend::Linear(Tensor x, Tensor w, Tensor out) {
  return linear_->Run(x, w, out).status();
}

absl::Status CudaBackend::LinearGeluMul(Tensor x, Tensor w, Tensor gu, Tensor act) {
  GANNET_ASSIGN_OR_RETURN(const bool fused, linear_->RunLinearGeluMul(x, w, gu, act));
  if (fused) return absl::OkStatus();
  return Backend::LinearGeluMul(x, w, gu, act);  // the unfused pair
}

absl::Status CudaBackend::GeluMulLinear(Tensor gate, Tensor up, Tensor w, Tensor act, Tensor out) {
  GANNET_ASSIGN_OR_RETURN(const bool fused, linear_->RunGeluMul(gate, up, w, act, out));
  if (fused) return absl::OkStatus();
  return Backend::GeluMulLinear(gate, up, w, act, out);  // the unfused pair
}

}  // namespace gannet::backend

// The CUDA backend: every op of backend.h on one GPU and one stream, through the kernels of
// kernels/ (selected by the kernel registry) and cuBLASLt.
//
// Numerics: activations bf16 (what the GEMMs consume), the residual stream f32 (it accumulates
// 60 layers of small updates, where bf16's 8-bit mantissa would lose them, and it costs only
// hidden x 4 bytes per token), KV cache bf16, matrices bf16, vectors (norm weights, scales) f32.
// The fp16 compute path (GPUs without bf16 tensor cores: the default on sm_70, chosen with
// compute_dtype f16 anywhere): matrices are converted to fp16 at load and activations are fp16,
// but every value that can leave fp16's range stays f32 -- the residual stream, the projections
// that feed a norm (qkv, o_proj, the MLP and MoE outputs, the PLE projections: norm_input_dtype),
// the router's input, the logits and the softcap. The KV cache stays bf16 (or FP8).
//
// Memory: device buffers from cudaMalloc (the runner allocates once). Ops never allocate while a
// stream is being captured, never synchronize and never copy from pageable host memory, so a
// step can be captured into a CUDA graph. Workspaces (split-KV partials, MoE scratch, cuBLASLt)
// grow on the first uncaptured step that needs them; a capture that would need a larger one fails
// with FailedPrecondition instead of allocating. Linear's algorithm choice is timed on the first
// uncaptured call of each shape and cached.
//
// Thread safety: one caller at a time, like every Backend.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/registry/registry.h"
#include "lib/backend/backend.h"

namespace gannet::backend {

class CudaLinear;

class CudaBackend final : public Backend {
 public:
  // compute: the activation and matrix type, bf16 or f16; nullopt = f16 on GPUs older than sm_75
  // (no bf16 tensor cores, and the m8n8k4 attention computes in fp16 anyway), else bf16.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      int device, std::optional<DType> compute = std::nullopt);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  std::string DeviceName() const override;
  int device_id() const override { return device_id_; }
  absl::Status BindThread() override;
  int64_t TotalMemoryBytes() const override;
  DType activation_dtype() const override { return act_; }
  DType norm_input_dtype() const override { return act_ == DType::kF16 ? DType::kF32 : act_; }
  DType residual_dtype() const override { return DType::kF32; }
  DType kv_dtype() const override { return DType::kBF16; }

  absl::StatusOr<Buffer> Allocate(size_t bytes) override;
  // cudaMemset: the generic Fill-based zeroing takes int32 sizes, and a KV array can pass them.
  absl::StatusOr<Buffer> AllocateZeroed(size_t bytes) override;
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status Fill(Tensor t, float value) override;
  absl::Status Synchronize() override;
  int64_t FreeMemoryBytes() const override;
  absl::StatusOr<OwnedTensor> LoadWeight(std::span<const model::WeightView* const> parts) override;

  absl::Status Embed(Tensor ids, Tensor table, float scale, Tensor out) override;
  absl::Status RmsNorm(Tensor x, Tensor weight, float eps, Tensor out) override;
  absl::Status PostNormResidual(Tensor x, Tensor post_weight, Tensor residual, Tensor scalar,
                                Tensor next_weight, Tensor next_out, float eps) override;
  absl::Status Linear(Tensor x, Tensor w, Tensor out) override;
  absl::Status GeluTanhMul(Tensor gate, Tensor up, Tensor out) override;
  absl::Status GeluMulLinear(Tensor gate, Tensor up, Tensor w, Tensor act, Tensor out) override;
  absl::Status LinearGeluMul(Tensor x, Tensor w, Tensor gu, Tensor act) override;
  absl::Status NormAddPostNormResidual(Tensor a, Tensor a_weight, Tensor b, Tensor b_weight,
                                       Tensor post_weight, Tensor residual, Tensor scalar,
                                       Tensor next_weight, Tensor next_out, float eps) override;
  absl::Status Add(Tensor a, Tensor b, Tensor out) override;
  absl::Status QkvPrep(const QkvPrepArgs& args) override;
  absl::Status Attention(const AttentionArgs& args) override;
  absl::Status PleCombine(Tensor proj, Tensor token_part, Tensor norm_w, float proj_scale,
                          float combine_scale, float eps, Tensor out) override;
  absl::Status MoeRoute(const MoeRouteArgs& args) override;
  absl::Status MoeExperts(const MoeExpertsArgs& args) override;
  absl::Status GatherRows(Tensor x, Tensor rows, Tensor out) override;
  absl::Status Softcap(Tensor x, float cap) override;
  absl::Status CentroidLogits(Tensor h, Tensor table, Tensor cluster_logits, Tensor ordering,
                              Tensor selected, Tensor logits) override;
  absl::Status Sample(Tensor logits, Tensor params, Tensor banned, Tensor out_ids) override;
  absl::Status ShardArgmax(Tensor logits, Tensor banned, int64_t id_offset, Tensor out) override;

  std::vector<int> LinearTuningRows(int max_rows) const override;

  // CUDA graphs over the backend's stream (thread-local capture mode: other threads' CUDA calls
  // are unaffected). Graphs live until the backend is destroyed.
  bool SupportsGraphs() const override { return true; }
  absl::Status BeginGraphCapture() override;
  absl::StatusOr<int> EndGraphCapture() override;
  absl::Status LaunchGraph(int handle) override;
  void ReleaseGraph(int handle) override;
  void ReleaseGraphs() override;
  uint64_t GraphEpoch() const override { return graph_epoch_; }
  absl::Status RunConcurrently(const std::function<absl::Status()>& side,
                               const std::function<absl::Status()>& main) override;
  absl::Status BeginDeviceSpan() override;
  absl::Status EndDeviceSpan() override;
  absl::StatusOr<double> DeviceSpanSeconds() override;

  cudaStream_t stream() const { return stream_; }
  CudaLinear& linear() { return *linear_; }
  const kernels::DeviceInfo& device_info() const { return device_; }

  // Runs an attention entry chosen by the caller (tests and benchmarks force each registry entry
  // through here); Attention() selects through the registry and launches the same way.
  absl::Status RunAttentionEntry(const kernels::KernelEntry& entry, const AttentionArgs& args,
                                 int num_splits = 0);
  // The registry entry Attention() would use for these arguments taken as one problem (a mixed
  // step's leading decode rows go to a decode entry besides it).
  absl::StatusOr<const kernels::KernelEntry*> SelectAttention(const AttentionArgs& args);
  // The kernels' parameter block for these arguments (checked).
  absl::StatusOr<kernels::PagedAttentionParams> AttentionParams(const AttentionArgs& args);

  // A grow-only device workspace (kernel scratch). `id` keeps users whose kernels rely on zeroed
  // counters apart from users that overwrite their space.
  // kInt4Split: the int4 GEMV's split-K partials; kInt4Dense: int4 weights dequantized for
  // prefill-sized products (cuda_int4.cc).
  enum class WorkspaceId {
    kAttention,
    kMoeRoute,
    kMoeExperts,
    kLinearInput,
    kInt4Split,
    kInt4Dense,
    kCount
  };
  absl::StatusOr<void*> Workspace(WorkspaceId id, size_t bytes);

 private:
  cudaEvent_t span_begin_ = nullptr, span_end_ = nullptr;
  CudaBackend() = default;
  absl::Status Init(int device, std::optional<DType> compute);
  bool Capturing() const;
  // Workspace(id, bytes) without the geometric growth: a size known at load time, allocated
  // exactly (outside steps).
  absl::Status ReserveWorkspace(WorkspaceId id, size_t bytes);
  // LoadWeight of int4 weights (cuda_int4.cc).
  absl::StatusOr<OwnedTensor> LoadInt4Weight(std::span<const model::WeightView* const> parts);
  absl::StatusOr<OwnedTensor> LoadSyntheticInt4(const model::WeightView& first, int64_t n,
                                                int64_t k);
  absl::StatusOr<const kernels::KernelEntry*> SelectAttentionFor(
      const kernels::PagedAttentionParams& p);
  absl::Status LaunchAttention(const kernels::KernelEntry& entry,
                               const kernels::PagedAttentionParams& p);
  // inv_freq of a rotation over head_dim / 2 pairs (cached).
  const std::vector<float>& InvFreq(const RopeSpec& rope, int head_dim);

  int device_id_ = 0;
  DType act_ = DType::kBF16;
  std::string device_name_;
  kernels::DeviceInfo device_;
  // The stream ops are issued on: main_stream_, or side_stream_ while RunConcurrently issues
  // its side branch (so every op follows it without taking a stream argument).
  cudaStream_t stream_ = nullptr;
  cudaStream_t main_stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;  // created at the first concurrent capture
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  std::unique_ptr<CudaLinear> linear_;
  struct Space {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  Space spaces_[static_cast<int>(WorkspaceId::kCount)];
  // Registry choices per problem class, so steps don't re-run selection for every layer.
  std::map<std::tuple<int, int, int, int, int, int, int, int, int, int>,
           const kernels::KernelEntry*>
      chosen_;
  // inv_freq per (rope spec, head_dim), computed once on the host.
  std::map<std::tuple<double, int, double, int>, std::vector<float>> inv_freq_;
  std::vector<cudaGraphExec_t> graphs_;  // released slots are nullptr
  uint64_t graph_epoch_ = 0;             // bumped when a workspace is reallocated
};

// The factory's entry point (lib/backend/backend_factory.cc).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device,
                                                           std::optional<DType> compute);

}  // namespace gannet::backend

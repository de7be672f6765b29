// The op interface every compute backend implements: the CPU reference (backend/cpu) and CUDA
// (backend/cuda). The model runner expresses the whole Gemma-4 forward pass in these ops and never
// touches memory itself, so a new backend slots in by implementing this class.
//
// Conventions:
// - Tensors live in the backend's memory (host memory for the CPU backend, device memory for
//   CUDA). Shapes are in comments: [num_tokens, hidden] etc.
// - Ops may run asynchronously (CUDA: on the backend's stream); CopyToHost and Synchronize wait.
// - Ops return a Status for argument errors and device failures; they never abort.
// - A backend object is used by one thread at a time (the engine thread or a TP worker).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/tensor.h"
#include "lib/sampling/draw.h"
#include "lib/model/weights.h"

namespace gannet::backend {

// Rotary embedding of one layer type, in HF's "rotate half" (NeoX) form over the whole head:
// for j < head_dim / 2, inv_freq[j] = 1 / (theta^(2j / head_dim)) / factor when j < rotated_pairs,
// and 0 otherwise (proportional RoPE leaves the other pairs unrotated). Pairs are (j, j + d/2).
struct RopeSpec {
  double theta = 10000.0;
  int rotated_pairs = 0;
  double factor = 1.0;
};

// One KV group (sliding or full layers) as seen by one step.
struct KvGroupView {
  int page_size = 0;                      // tokens per page
  int num_pages = 0;                      // pool capacity
  int max_pages_per_seq = 0;              // columns of page_table
  const int32_t* page_table = nullptr;    // [num_seqs, max_pages_per_seq]; -1 = no page
  const int32_t* slot_mapping = nullptr;  // [num_tokens] page * page_size + offset; -1 = skip
  // Host mirrors of the two arrays above (always valid; used for planning and validation).
  const int32_t* host_page_table = nullptr;
  const int32_t* host_slot_mapping = nullptr;
};

inline constexpr int kSlidingGroup = 0;
inline constexpr int kFullGroup = 1;

// The sequences of one step. Each sequence contributes `query_len` new tokens at the end of its
// context: sequence s's tokens are [query_start[s], query_start[s+1]) and occupy positions
// seq_len[s] - query_len .. seq_len[s] - 1.
struct StepMetadata {
  int num_seqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  const int32_t* query_start = nullptr;  // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;     // [num_seqs]
  const int32_t* positions = nullptr;    // [num_tokens]
  const int32_t* token_seq = nullptr;    // [num_tokens] sequence index of each token
  const int32_t* host_query_start = nullptr;
  const int32_t* host_seq_lens = nullptr;
  const int32_t* host_positions = nullptr;
  // Image blocks (docs/vision.md): [num_tokens] the image block id of each token (-1 text, k the
  // k-th image of its sequence), every block's tokens in this step. Null (both) when no token of
  // the step is an image token or the model does not attend bidirectionally within images.
  const int32_t* image_block = nullptr;
  const int32_t* host_image_block = nullptr;
  KvGroupView groups[2];
};

// A weight in backend memory; `buffer` is empty when the tensor aliases host memory that outlives
// it (the CPU backend reads bf16 checkpoints in place, from the Checkpoint's memory).
struct OwnedTensor {
  Buffer buffer;
  Tensor tensor;
};

// KV cache storage. K and V are [num_pages, n_kv, page_size, d] arrays of the backend's
// kv_dtype() (bf16 on CUDA, f32 on the CPU), or of F8E4M3 (kv::KvQuant::kFp8E4M3): then every
// (token, head) row r has an f32 scale s in k_scale / v_scale, QkvPrep stores
// FP8(x * 448 / amax(row)) with s = amax(row) / 448 (0 for an all-zero row), and Attention reads
// x = FP8 * s (lib/common/dtype.h: QuantizeFp8E4M3Row). Both backends implement the same storage,
// so the CPU is the FP8 kernels' reference.
// Single-store K=V (k_from_v; lib/kv/kv_layout.h): the layer has no K array (k and k_scale
// invalid); QkvPrep stores V = v_norm(k_raw) alone, and Attention uses for key j at position p
// K_j = RoPE_p(k_norm * V_j), with V_j as stored (dequantised under FP8), computed in f32 with the
// angle and cos/sin of QkvPrep's rotation, then (CUDA) rounded to the kernel's MMA type.

// One layer's KV cache, as its storage holds it (runner::KvStorage::Layer), QkvPrep writes it,
// Attention reads it and a drafter attends into the target's: the one description of it, passed
// by value (a few tensors) and checked in one place (kv_cache.h: CheckKvCache).
struct LayerKvView {
  Tensor k;        // [num_pages, n_kv, page_size, d]; invalid with k_from_v
  Tensor v;        // [num_pages, n_kv, page_size, d]
  Tensor k_scale;  // [num_pages, n_kv, page_size] f32 when the cache is F8E4M3, else invalid
  Tensor v_scale;
  int group = kSlidingGroup;  // the StepMetadata group whose pages and slots address it
  // Single-store K=V: K derived from V with this [d] f32 weight and rotation (the owning layer's
  // k_norm and RoPE, bound by the runner once its weights are loaded: KvStorage::BindKDerivation).
  bool k_from_v = false;
  Tensor k_norm;
  RopeSpec rope;
};

struct QkvPrepArgs {
  Tensor qkv;  // [T, (n_q + n_kv * (k_eq_v ? 1 : 2)) * d] (n_kv terms absent if !has_kv)
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool has_kv = true;   // false on KV-shared layers: only q is computed
  bool k_eq_v = false;  // V is the raw K projection (full layers of 31B / 26B-A4B)
  float eps = 1e-6f;
  Tensor q_norm;  // [d]
  Tensor k_norm;  // [d]
  RopeSpec rope;
  Tensor q_out;  // [T, n_q, d]
  // Where K and V go (with has_kv; kv.k_from_v with k_eq_v: V alone), and kv.group: the
  // metadata group of the slots and positions (read without has_kv too).
  LayerKvView kv;
  const StepMetadata* meta = nullptr;
};

struct AttentionArgs {
  Tensor q;        // [T, n_q, d] (normed, roped)
  LayerKvView kv;  // the keys and values attended (kv.group: their metadata group)
  Tensor out;      // [T, n_q, d]
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int window = 0;      // sliding window W: keys pos - W + 1 .. pos; 0 = full causal
  float scale = 1.0f;  // Gemma-4 uses 1.0 (q/k norms replace 1/sqrt(d))
  // Image-block mask (needs meta->image_block): a query of image block k also sees the keys of
  // block k after its own position, so the mask is (causal AND window) OR (same block AND
  // window), the window bounding only keys before the query (HF Gemma-4: sliding layers only).
  bool image_block_mask = false;
  const StepMetadata* meta = nullptr;
};

struct MoeRouteArgs {
  Tensor x;                 // [T, H] the post-attention residual
  Tensor router_scale;      // [H]
  Tensor router_proj;       // [E, H]
  Tensor per_expert_scale;  // [E]
  int top_k = 0;
  float eps = 1e-6f;
  Tensor topk_ids;      // [T, k] int32
  Tensor topk_weights;  // [T, k] f32
};

// Token ids per row that Backend::Sample masks to -inf before drawing (sampling::kBanSlots).
inline constexpr int kSampleBanSlots = sampling::kBanSlots;

struct MoeExpertsArgs {
  Tensor x;             // [T, H] expert input (pre_feedforward_layernorm_2 output)
  Tensor topk_ids;      // [T, k] int32
  Tensor topk_weights;  // [T, k] f32
  Tensor gate_up;       // [E, 2 * I, H]
  Tensor down;          // [E, H, I]
  Tensor out;           // [T, H] sum over the k experts of weight * expert(x)
  // Expert parallelism: gate_up and down hold the model's experts [expert_begin, expert_begin +
  // E) of total_experts (0: E, all of them); topk_ids are the model's ids, and a pair whose
  // expert is held by another rank adds nothing to out.
  int expert_begin = 0;
  int total_experts = 0;
};

// The checks every MoeExperts applies to the expert range and the ids' bound (the ids themselves
// live in backend memory): expert_begin >= 0 and expert_begin + E <= total.
absl::Status CheckMoeExpertRange(const MoeExpertsArgs& a);
// The number of experts ids may name: total_experts, or E when it is 0.
int64_t MoeTotalExperts(const MoeExpertsArgs& a);
// The shape checks every backend's MoeRoute and MoeExperts apply first, so that each rejects the
// same operands with the same message: MoeRoute's router tensors against x's hidden size and
// the expert count, top_k in [1, E], the outputs [T, top_k]; MoeExperts' weights [E, 2I, H] and
// [E, H, I], ids and weights of one shape with x's rows, out [T, H], and the expert range.
absl::Status CheckMoeRouteShapes(const MoeRouteArgs& a);
absl::Status CheckMoeExpertsShapes(const MoeExpertsArgs& a);

// Non-causal attention within segments (the vision tower: each image is one segment; padding is
// never part of one). Rows [seg_start[s], seg_start[s + 1]) attend to every row of their segment
// and to nothing else. Softmax in f32; scores scaled by `scale` (the tower uses 1.0: its q/k norms
// replace 1/sqrt(d)). GQA: query head h reads KV head h / (num_q_heads / num_kv_heads).
struct SegmentAttentionArgs {
  Tensor q;    // [T, n_q, d] f32
  Tensor k;    // [T, n_kv, d] f32
  Tensor v;    // [T, n_kv, d] f32
  Tensor out;  // [T, n_q, d] f32
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  Tensor seg_start;                         // [num_segments + 1] int32 on the device
  const int32_t* host_seg_start = nullptr;  // the same values on the host
  int num_segments = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "cpu", "cuda"
  // What the backend runs on, for logs, stats and errors: "NVIDIA H100 80GB HBM3 (sm_90)",
  // "16 threads".
  virtual std::string DeviceName() const = 0;
  virtual int device_id() const { return -1; }  // CUDA ordinal; -1 on the host
  // Makes the calling thread able to issue this backend's work (CUDA: selects its device). A
  // thread other than the creating one calls it before its first op (tensor-parallel workers).
  virtual absl::Status BindThread() { return absl::OkStatus(); }
  // Memory the backend allocates from: the device's, or the host's for the CPU (0 = unknown).
  virtual int64_t TotalMemoryBytes() const { return 0; }
  // Element types the runner should allocate activations, the residual stream and KV in.
  virtual DType activation_dtype() const = 0;
  // The type of the projections whose output feeds a norm (qkv, o_proj, the MLP and MoE outputs,
  // the PLE projections): the activation type, or f32 where that type's range could overflow
  // there (fp16).
  virtual DType norm_input_dtype() const { return activation_dtype(); }
  virtual DType residual_dtype() const = 0;
  virtual DType kv_dtype() const = 0;

  // ---- memory ----
  virtual absl::StatusOr<Buffer> Allocate(size_t bytes) = 0;
  // Zero-filled memory (KV pools: a slot never written must read as finite). The default fills
  // after allocating; backends with cheaper zeroing (lazily zeroed host pages) override it.
  virtual absl::StatusOr<Buffer> AllocateZeroed(size_t bytes);
  virtual absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Fill(Tensor t, float value) = 0;
  virtual absl::Status Synchronize() = 0;
  // Memory still free for allocations: device memory, or the host's available memory for the
  // CPU (0 = unknown).
  virtual int64_t FreeMemoryBytes() const { return 0; }
  // A device span: BeginDeviceSpan and EndDeviceSpan mark points in the device's work queue;
  // DeviceSpanSeconds, once the device has passed the end (after any synchronising copy), is the
  // device time between them. A step's wall time less its span is host work the device waited
  // for. A backend that computes on the host has no device: 0.
  virtual absl::Status BeginDeviceSpan() { return absl::OkStatus(); }
  virtual absl::Status EndDeviceSpan() { return absl::OkStatus(); }
  virtual absl::StatusOr<double> DeviceSpanSeconds() { return 0.0; }

  // Loads checkpoint weights in the backend's weight format. Several parts are concatenated
  // along dim 0 (fused QKV and gate/up projections); all parts must agree on the trailing dims.
  virtual absl::StatusOr<OwnedTensor> LoadWeight(
      std::span<const model::WeightView* const> parts) = 0;

  // ---- ops ----
  // out[t] = table[ids[t]] * scale; a zero row where ids[t] is -1 (a token of another
  // tensor-parallel rank's vocabulary shard).  ids [T] int32, table [V, W], out [T, W]
  virtual absl::Status Embed(Tensor ids, Tensor table, float scale, Tensor out) = 0;
  // out = x / sqrt(mean(x^2) + eps) * weight, over the last dim of x viewed as [rows, n].
  // weight may be invalid (no scale). x and out may alias.
  virtual absl::Status RmsNorm(Tensor x, Tensor weight, float eps, Tensor out) = 0;
  // residual = (residual + RmsNorm(x, post_weight)) * scalar (if given);
  // then, if next_out is valid, next_out = RmsNorm(residual, next_weight).
  // x [T, H], residual [T, H], scalar [1] or invalid.
  virtual absl::Status PostNormResidual(Tensor x, Tensor post_weight, Tensor residual,
                                        Tensor scalar, Tensor next_weight, Tensor next_out,
                                        float eps) = 0;
  // out = x @ w^T.  x [M, K] (may be a column view), w [N, K], out [M, N] (f32 or activation)
  virtual absl::Status Linear(Tensor x, Tensor w, Tensor out) = 0;
  // out = gelu_tanh(gate) * up.  gate, up [T, I] (may be column views), out [T, I]
  virtual absl::Status GeluTanhMul(Tensor gate, Tensor up, Tensor out) = 0;
  // out = (gelu_tanh(gate) * up) @ w^T: a gated MLP's (and PLE's) down projection, with `act`
  // [T, I] (of gate's type) for the product. The result is GeluTanhMul(gate, up, act) then
  // Linear(act, w, out), which is what this default does; a backend may fuse the two (CUDA: into
  // its small-M GEMV, bit for bit) and then leaves `act` unwritten.
  virtual absl::Status GeluMulLinear(Tensor gate, Tensor up, Tensor w, Tensor act, Tensor out) {
    absl::Status st = GeluTanhMul(gate, up, act);
    return st.ok() ? Linear(act, w, out) : st;
  }
  // act = gelu_tanh(gate) * up for [gate | up] = x @ w^T: a gated MLP's gate/up projection (w
  // [2I, K], gate rows over up rows) and its product, with `gu` [T, 2I] (of act's type) for the
  // projection. The result is Linear(x, w, gu) then GeluTanhMul of its halves into act [T, I],
  // which is what this default does; a backend may fuse the two (CUDA: its small-M GEMV
  // evaluates the product in its epilogue, bit for bit) and then leaves `gu` unwritten.
  virtual absl::Status LinearGeluMul(Tensor x, Tensor w, Tensor gu, Tensor act) {
    const int64_t i = act.row_elems();
    if (gu.rank != 2 || gu.row_elems() != 2 * i) {
      return absl::InvalidArgumentError("LinearGeluMul: gu must be [T, 2 x act's columns]");
    }
    absl::Status st = Linear(x, w, gu);
    return st.ok() ? GeluTanhMul(gu.Cols(0, i), gu.Cols(i, i), act) : st;
  }
  // out = a + b, elementwise over [T, H].
  virtual absl::Status Add(Tensor a, Tensor b, Tensor out) = 0;
  // A MoE layer's two branches joined and put through the post-feed-forward update:
  // PostNormResidual(RmsNorm(a, a_weight) + RmsNorm(b, b_weight), post_weight, residual, scalar,
  // next_weight, next_out), each step rounded to a's type as the separate ops round it. a and b
  // [T, H] hold unspecified values afterwards. This default is those four ops (the norms in
  // place); a backend may fuse them (CUDA: one kernel for decode rows, bit for bit the four).
  virtual absl::Status NormAddPostNormResidual(Tensor a, Tensor a_weight, Tensor b, Tensor b_weight,
                                               Tensor post_weight, Tensor residual, Tensor scalar,
                                               Tensor next_weight, Tensor next_out, float eps) {
    absl::Status st = RmsNorm(a, a_weight, eps, a);
    if (st.ok()) st = RmsNorm(b, b_weight, eps, b);
    if (st.ok()) st = Add(a, b, a);
    if (!st.ok()) return st;
    return PostNormResidual(a, post_weight, residual, scalar, next_weight, next_out, eps);
  }
  // q/k norms + RoPE for q and k, v norm, and the KV write into pages.
  virtual absl::Status QkvPrep(const QkvPrepArgs& args) = 0;
  virtual absl::Status Attention(const AttentionArgs& args) = 0;
  // PLE combine: out = (RmsNorm(proj * proj_scale, norm_w) + token_part) * combine_scale,
  // normalising each group of P = norm_w.numel() columns. proj, token_part, out [T, N * P].
  virtual absl::Status PleCombine(Tensor proj, Tensor token_part, Tensor norm_w, float proj_scale,
                                  float combine_scale, float eps, Tensor out) = 0;
  virtual absl::Status MoeRoute(const MoeRouteArgs& args) = 0;
  virtual absl::Status MoeExperts(const MoeExpertsArgs& args) = 0;
  // out[i] = x[rows[i]].  rows [n] int32
  virtual absl::Status GatherRows(Tensor x, Tensor rows, Tensor out) = 0;
  // x = cap * tanh(x / cap), in place, f32.
  virtual absl::Status Softcap(Tensor x, float cap) = 0;
  // The ordered-embedding ("centroid") head of the E2B/E4B MTP drafters (docs/gemma4-model.md
  // §3.5): per row r, the top_k = selected.row_elems() clusters by cluster_logits[r] (ties to the
  // lower index) are written to selected[r] in ascending order; logits[r] is -inf except at the
  // tokens of those clusters (ordering[c] lists cluster c's ids), where it is h[r] . table[id].
  // Reads only those table rows. h [rows, D] activations; table [V, D] (a weight); cluster_logits
  // [rows, C] f32; ordering [C, V / C] int32; selected [rows, top_k] int32; logits [rows, V] f32.
  virtual absl::Status CentroidLogits(Tensor h, Tensor table, Tensor cluster_logits,
                                      Tensor ordering, Tensor selected, Tensor logits) = 0;

  // ---- Vision tower ops (lib/vision, docs/vision.md "Vision tower"). A backend that has not
  // implemented them answers Unimplemented. All in place or into f32 activations. ----
  // out = min(max(x, lo), hi) (out may be x): the clipped linears of the E2B/E4B tower.
  virtual absl::Status Clamp(Tensor x, float lo, float hi, Tensor out);
  // The tower's axial 2-D RoPE, in place on x [T, n, d] (d a multiple of 4) with positions [T, 2]
  // int32 (px, py): dims [0, d/2) rotate by px, [d/2, d) by py; within each half, dims i and
  // i + d/4 form a pair rotated by angle pos * theta^(-4i/d), i < d/4 (HF's rotate-half order).
  virtual absl::Status VisionRope(Tensor x, Tensor positions, float theta);
  virtual absl::Status SegmentAttention(const SegmentAttentionArgs& args);
  // out = 0, then out[dest[t]] += scale * x[t] for every row t with dest[t] >= 0. x [T, H],
  // dest [T] int32, out [R, H] (the tower's average pooling by position, folding sqrt(H) in).
  virtual absl::Status ScatterSumRows(Tensor x, Tensor dest, float scale, Tensor out);
  // x[r][i] = (x[r][i] - bias[i]) * scale[i], in place; bias and scale [H] f32.
  virtual absl::Status Standardize(Tensor x, Tensor bias, Tensor scale);

  // The row counts M <= max_rows at which Linear keys what it tunes (a first call at a new key
  // times candidate kernels): one M of each key, ascending. Empty when nothing is tuned (the CPU).
  // A warm-up that runs a step at each of them leaves no tuning for the steps that serve
  // (runner/warmup.h).
  virtual std::vector<int> LinearTuningRows(int max_rows) const { return {}; }

  // ---- graphs (optional): record a sequence of ops once, replay it with one launch ----
  // Between BeginGraphCapture and EndGraphCapture ops are recorded, not run; they must not
  // allocate or synchronise (an op that would fails, and the capture is abandoned). The returned
  // handle replays the recording over the same buffers.
  virtual bool SupportsGraphs() const { return false; }
  virtual absl::Status BeginGraphCapture() {
    return absl::UnimplementedError("this backend has no graphs");
  }
  virtual absl::StatusOr<int> EndGraphCapture() {
    return absl::UnimplementedError("this backend has no graphs");
  }
  virtual absl::Status LaunchGraph(int handle) {
    return absl::UnimplementedError("this backend has no graphs");
  }
  virtual void ReleaseGraph(int handle) {}
  // Releases every recording (a later Run of a GraphCache records again: GraphEpoch moves). Called
  // before the collectives a recording captured are destroyed: ncclCommDestroy waits until no
  // graph holding its operations exists, so a live recording hangs the teardown.
  virtual void ReleaseGraphs() {}
  // Changes whenever memory a recorded graph may point into is replaced (a workspace grows):
  // graphs recorded under another epoch must be released and recorded again.
  virtual uint64_t GraphEpoch() const { return 0; }
  // Two independent parts of a step, each a sequence of this backend's ops, that the device may
  // run at the same time: `side` and `main` must not write anything the other reads or writes,
  // and neither may call collectives or synchronise. Both have been issued when it returns; ops
  // issued afterwards see both results. The default (and the CPU) runs side, then main. The CUDA
  // backend overlaps them while a graph is captured (decode steps of small models are chains of
  // short, latency-bound kernels, and a MoE layer's router + experts and its dense MLP read only
  // the residual) and runs them in that order otherwise: eager steps tune GEMMs by timing them
  // and may grow workspaces, which another stream's kernels would disturb.
  virtual absl::Status RunConcurrently(const std::function<absl::Status()>& side,
                                       const std::function<absl::Status()>& main) {
    absl::Status s = side();
    if (!s.ok()) return s;
    return main();
  }
  // One token id per logits row. logits [rows, V] f32; params [rows, 24] u8 viewing
  // sampling::DrawParams; out_ids [rows] int32. Definition (every backend gives the same ids up to
  // float rounding of exp): greedy = arg-max, ties to the lowest id. Otherwise w = exp((x - max x)
  // / temperature), in fixed point q = floor(w * 2^32); keep logits >= the top_k-th largest; then
  // keep logits >= the largest threshold whose kept q-mass reaches top_p x the top-k q-mass; then
  // keep w >= min_p; the token is the first, in id order, at which the running kept q-mass exceeds
  // floor(u x total kept q-mass). Deterministic given the seed.
  // banned: empty, or int32 [rows, kSampleBanSlots] token ids (-1: unused slot) whose logits are
  // set to -inf in place first, so they are never drawn (and read -inf if copied out afterwards).
  virtual absl::Status Sample(Tensor logits, Tensor params, Tensor banned, Tensor out_ids) = 0;
  // The greedy pick of one vocabulary shard (tensor parallelism: each rank arg-maxes its columns
  // and the ranks compare the winners instead of gathering every logit). Per row: the largest
  // logit and its id + id_offset, ties to the lowest id (the first column when every logit is
  // -inf, as Sample's arg-max); banned ids (global, [rows, kSampleBanSlots], -1 unused; or an
  // invalid tensor) that fall in [id_offset, id_offset + columns) count as -inf (written so, in
  // place). logits [rows, columns] f32; out [rows, 2] f32 = (value, the id's int32 bits).
  virtual absl::Status ShardArgmax(Tensor logits, Tensor banned, int64_t id_offset, Tensor out) = 0;
};

// The argument checks every Backend::Sample applies (sizes of params, banned and out_ids).
absl::Status CheckSampleArgs(int64_t rows, Tensor params, Tensor banned, Tensor out_ids);
// The argument checks every Backend::ShardArgmax applies (out [rows, 2] f32, banned's shape).
absl::Status CheckShardArgmaxArgs(const Tensor& logits, const Tensor& banned, const Tensor& out);
// The argument checks every Backend::CentroidLogits applies (shapes, dtypes of the index tensors).
absl::Status CheckCentroidLogitsArgs(const Tensor& h, const Tensor& table,
                                     const Tensor& cluster_logits, const Tensor& ordering,
                                     const Tensor& selected, const Tensor& logits);

// The shape checks every backend's PostNormResidual (x viewed as [rows, n]: the residual and next
// output [rows, n], the f32 weights [n], the scalar [1]), PleCombine (proj viewed as [rows,
// width]: groups of norm_w's length, token part and out [rows, width]) and GatherRows (out of x's
// type and width, with a row for each index) apply.
absl::Status CheckPostNormResidualArgs(int64_t rows, int64_t n, const Tensor& post_weight,
                                       const Tensor& residual, const Tensor& scalar,
                                       const Tensor& next_weight, const Tensor& next_out);
absl::Status CheckPleCombineArgs(int64_t rows, int64_t width, const Tensor& token_part,
                                 const Tensor& norm_w, const Tensor& out);
absl::Status CheckGatherRowsArgs(const Tensor& x, const Tensor& rows, const Tensor& out);

// The argument checks every backend's vision ops apply (shapes, dtypes, segment bounds).
absl::Status CheckClampArgs(const Tensor& x, float lo, float hi, const Tensor& out);
absl::Status CheckVisionRopeArgs(const Tensor& x, const Tensor& positions);
absl::Status CheckSegmentAttentionArgs(const SegmentAttentionArgs& a);
absl::Status CheckScatterSumRowsArgs(const Tensor& x, const Tensor& dest, const Tensor& out);
absl::Status CheckStandardizeArgs(const Tensor& x, const Tensor& bias, const Tensor& scale);

// inv_freq as HF computes it (fp32), for a layer's head dim.
void ComputeInvFreq(const RopeSpec& rope, int head_dim, float* inv_freq /* [head_dim / 2] */);

}  // namespace gannet::backend

#include "lib/runner/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/model/variants.h"
#include "lib/runner/device_weights.h"
#include "lib/runner/graph_cache.h"
#include "lib/runner/layer_blocks.h"
#include "lib/runner/step_metadata.h"

namespace gannet::runner {

using backend::Tensor;

int64_t StepBatch::num_tokens() const {
  int64_t n = 0;
  for (const SeqStep& s : seqs) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

bool StepBatch::decode_only() const { return uniform_query_len() == 1; }

int StepBatch::uniform_query_len() const {
  if (seqs.empty()) return 0;
  const size_t q = seqs[0].tokens.size();
  if (q < 1 || q > static_cast<size_t>(kMaxUniformQueryLen)) return 0;
  const SeqStep::Logits want = q == 1 ? SeqStep::Logits::kLast : SeqStep::Logits::kAll;
  for (const SeqStep& s : seqs) {
    if (s.tokens.size() != q ||
        (s.logits != want && !(q == 1 && s.logits == SeqStep::Logits::kAll))) {
      return 0;
    }
  }
  return static_cast<int>(q);
}

class ModelRunner::Impl {
 public:
  model::ModelConfig config;
  RunnerOptions options;
  backend::Backend* be = nullptr;
  DeviceWeights w;
  std::unique_ptr<KvStorage> kv;
  StepMetadataBuilder meta;
  std::vector<backend::Buffer> buffers;

  // Activations, sized for options.max_tokens rows.
  Tensor x, h, qkv, q, attn, o, gate_up, mlp, mlp_out;
  Tensor ple_tok, ple_proj, ple_in, ple_gate, ple_gated;
  Tensor moe_ids, moe_weights, moe_z, moe_y2;
  Tensor last_h, logits;
  Tensor logits_shard;  // tensor parallel: [world, rows, V / world], every rank's vocabulary shard
  Tensor pick_blocks, picks;  // tensor parallel greedy: [world, rows, 2] and [rows, 2 * world]
  backend::RopeSpec rope[2];
  TpHooks* tp = nullptr;  // options.tp

  // The sum over the group's ranks of a row-parallel output (no-op on one device).
  absl::Status AllReduce(Tensor t) { return tp != nullptr ? tp->SumPartials(t) : absl::OkStatus(); }
  // PostNormResidual of that sum: on a group, one collective the group may fuse with the update.
  absl::Status AllReducePostNormResidual(Tensor y, Tensor post_weight, Tensor residual,
                                         Tensor scalar, Tensor next_weight, Tensor next_out,
                                         float eps) {
    if (tp == nullptr) {
      return be->PostNormResidual(y, post_weight, residual, scalar, next_weight, next_out, eps);
    }
    return tp->SumPostNormResidual(*be, y, post_weight, residual, scalar, next_weight, next_out,
                                   eps);
  }

  absl::Status Alloc(Tensor* t, DType dt, std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    GANNET_ASSIGN_OR_RETURN(backend::Buffer b,
                            be->Allocate(static_cast<size_t>(n) * (DTypeBits(dt) / 8)));
    *t = b.View(dt, dims);
    buffers.push_back(std::move(b));
    return absl::OkStatus();
  }

  // Graph recording per (padded batch size, context-length bucket, device sampling).
  GraphCache graph_cache;
  std::vector<int32_t> pad_table[2];  // the scratch page of each pool, for padding rows

  absl::Status AllocateActivations();
  absl::Status RunLayer(int l, int num_tokens, const backend::StepMetadata& md);
  // greedy_picks: every row is greedy and stays on the device (tensor parallel: the ranks compare
  // their shards' arg-maxes instead of gathering the logits).
  absl::Status Execute(int n, int rows, bool sample, bool greedy_picks,
                       const backend::StepMetadata& md);
  StepBatch Pad(const StepBatch& batch, int bucket, int q);
  absl::Status Forward(const StepBatch& batch, StepResult* result);
};

namespace {

// One activation buffer of the runner: where it goes, its element type and shape.
struct ActivationSpec {
  Tensor* target;
  DType dtype;
  int64_t rows, cols;
};

// Every activation buffer a runner with these options allocates (targets into `impl`, which may
// be null when only the sizes are wanted).
std::vector<ActivationSpec> ActivationSpecs(const model::ModelConfig& config,
                                            const RunnerOptions& options,
                                            const ActivationTypes& types, ModelRunner::Impl* impl);

}  // namespace

absl::Status ModelRunner::Impl::AllocateActivations() {
  for (const ActivationSpec& a : ActivationSpecs(config, options, ActivationTypes::Of(*be), this)) {
    GANNET_RETURN_IF_ERROR(Alloc(a.target, a.dtype, {a.rows, a.cols}));
  }
  return absl::OkStatus();
}

namespace {

std::vector<ActivationSpec> ActivationSpecs(const model::ModelConfig& config,
                                            const RunnerOptions& options,
                                            const ActivationTypes& types, ModelRunner::Impl* impl) {
  // `wide`: the projections that feed a norm (f32 on the fp16 path, where they could overflow).
  const DType act = types.act, wide = types.norm_input, residual = types.residual;
  static Tensor sink;  // the target of every spec when only sizes are wanted
  auto at = [&](Tensor ModelRunner::Impl::*member) { return impl ? &(impl->*member) : &sink; };
  const model::TextConfig& c = config.text;
  const int64_t T = options.max_tokens;
  const int64_t H = c.hidden_size;
  int64_t max_qkv = 0, max_q = 0, max_inter = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t d = c.LayerHeadDim(l);
    const int64_t kv = c.IsKvShared(l) ? 0 : c.LayerNumKvHeads(l) * d * (c.LayerKEqV(l) ? 1 : 2);
    max_qkv = std::max<int64_t>(max_qkv, c.num_attention_heads * d + kv);
    max_q = std::max<int64_t>(max_q, c.num_attention_heads * d);
    max_inter = std::max<int64_t>(max_inter, c.LayerIntermediateSize(l));
  }
  using I = ModelRunner::Impl;
  std::vector<ActivationSpec> v = {
      {at(&I::x), residual, T, H},
      {at(&I::h), act, T, H},
      {at(&I::qkv), wide, T, max_qkv},
      {at(&I::q), act, T, max_q},
      {at(&I::attn), act, T, max_q},
      {at(&I::o), wide, T, H},
      {at(&I::gate_up), act, T, 2 * max_inter},
      {at(&I::mlp), act, T, max_inter},
      {at(&I::mlp_out), wide, T, H},
  };
  if (c.has_ple()) {
    const int64_t NP = static_cast<int64_t>(c.num_hidden_layers) * c.hidden_size_per_layer_input;
    const int64_t P = c.hidden_size_per_layer_input;
    v.insert(v.end(), {{at(&I::ple_tok), act, T, NP},
                       {at(&I::ple_proj), wide, T, NP},
                       {at(&I::ple_in), act, T, NP},
                       {at(&I::ple_gate), act, T, P},
                       {at(&I::ple_gated), act, T, P}});
  }
  if (c.enable_moe_block) {
    v.insert(v.end(), {{at(&I::moe_ids), DType::kI32, T, c.top_k_experts},
                       {at(&I::moe_weights), DType::kF32, T, c.top_k_experts},
                       {at(&I::moe_z), act, T, H},
                       {at(&I::moe_y2), wide, T, H}});
  }
  const int64_t rows = options.max_logit_rows > 0 ? options.max_logit_rows : options.max_seqs;
  v.insert(v.end(),
           {{at(&I::last_h), act, rows, H}, {at(&I::logits), DType::kF32, rows, c.vocab_size}});
  if (options.tp != nullptr) {
    const int64_t world = options.tp->world_size();
    v.push_back({at(&I::logits_shard), DType::kF32, rows, c.vocab_size});  // [world, rows, V/world]
    v.push_back({at(&I::pick_blocks), DType::kF32, world * rows, 2});
    v.push_back({at(&I::picks), DType::kF32, rows, 2 * world});
  }
  return v;
}

}  // namespace

int64_t ActivationBytes(const model::ModelConfig& config, const RunnerOptions& options,
                        const ActivationTypes& types) {
  int64_t bytes = 0;
  for (const ActivationSpec& a : ActivationSpecs(config, options, types, nullptr)) {
    bytes += a.rows * a.cols * (DTypeBits(a.dtype) / 8);
  }
  // Step metadata: ids, PLE ids, positions, token -> sequence, two slot maps per token; query
  // starts, lengths, logits rows, sampled ids and sampling rows; two page tables.
  const int64_t T = options.max_tokens, S = options.max_seqs;
  const int64_t rows = options.max_logit_rows > 0 ? options.max_logit_rows : S;
  const int64_t pages = options.max_pages_per_seq > 0
                            ? options.max_pages_per_seq
                            : (config.text.max_position_embeddings + options.page_size - 1) /
                                  std::max(1, options.page_size);
  bytes +=
      4 * (6 * T + 2 * S + 1 + 2 * rows + 2 * S * pages) +
      rows * (static_cast<int64_t>(sizeof(sampling::DrawParams)) + 4 * backend::kSampleBanSlots);
  return bytes;
}

absl::Status ModelRunner::Impl::RunLayer(int l, int n, const backend::StepMetadata& md) {
  const model::TextConfig& c = config.text;
  const DeviceLayer& L = w.layers[l];
  const bool sliding = c.is_sliding(l);
  const int d = c.LayerHeadDim(l);
  const int nq = c.num_attention_heads;
  const int nkv = c.LayerNumKvHeads(l);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const backend::LayerKvView& kv_layer = kv->Layer(l);
  const int group = sliding ? backend::kSlidingGroup : backend::kFullGroup;

  // Attention block: h already holds input_layernorm(x).
  Tensor qkv_t = qkv.Rows(0, n).Reshape({n, qkv.dim(1)}).Cols(0, L.qkv_cols);
  GANNET_RETURN_IF_ERROR(be->Linear(h.Rows(0, n), L.qkv, qkv_t));
  backend::QkvPrepArgs prep;
  prep.qkv = qkv_t;
  prep.num_q_heads = nq;
  prep.num_kv_heads = nkv;
  prep.head_dim = d;
  prep.has_kv = !c.IsKvShared(l);
  prep.k_eq_v = c.LayerKEqV(l);
  prep.eps = eps;
  prep.q_norm = L.q_norm;
  prep.k_norm = L.k_norm;
  prep.rope = rope[group];
  prep.q_out = Tensor::Make(q.data, q.dtype, {n, nq, d});
  prep.kv = kv_layer;
  prep.meta = &md;
  GANNET_RETURN_IF_ERROR(be->QkvPrep(prep));

  Tensor o_t = o.Rows(0, n);
  GANNET_RETURN_IF_ERROR(AttendAndProject(be, c, l, prep.q_out, kv_layer, md, attn, L.o_proj, o_t));
  Tensor x_t = x.Rows(0, n);
  Tensor h_t = h.Rows(0, n);
  GANNET_RETURN_IF_ERROR(
      AllReducePostNormResidual(o_t, L.post_attn_norm, x_t, Tensor(), L.pre_ff_norm, h_t, eps));

  // Feed-forward block: dense gated MLP (plus the MoE branch on 26B-A4B).
  Tensor y = mlp_out.Rows(0, n);
  backend::MoeExpertsArgs ex;  // the MoE branch's (26B-A4B)
  if (!c.enable_moe_block) {
    GANNET_RETURN_IF_ERROR(GatedMlp(be, L, h_t, gate_up, mlp, y));
  } else {
    auto dense = [&]() -> absl::Status {
      GANNET_RETURN_IF_ERROR(GatedMlp(be, L, h_t, gate_up, mlp, y));
      return AllReduce(y);
    };
    ex.out = moe_y2.Rows(0, n);
    auto experts = [&]() -> absl::Status {
      backend::MoeRouteArgs route;
      route.x = x_t;  // the router reads the post-attention residual itself
      route.router_scale = L.router_scale;
      route.router_proj = L.router_proj;
      route.per_expert_scale = L.per_expert_scale;
      route.top_k = c.top_k_experts;
      route.eps = eps;
      route.topk_ids = moe_ids.Rows(0, n);
      route.topk_weights = moe_weights.Rows(0, n);
      GANNET_RETURN_IF_ERROR(be->MoeRoute(route));
      Tensor z = moe_z.Rows(0, n);
      GANNET_RETURN_IF_ERROR(be->RmsNorm(x_t, L.pre_ff_norm_2, eps, z));
      ex.x = z;
      ex.topk_ids = route.topk_ids;
      ex.topk_weights = route.topk_weights;
      ex.gate_up = L.experts_gate_up;
      ex.down = L.experts_down;
      if (c.local_experts > 0) {  // expert parallelism: this rank holds a block of whole experts
        ex.expert_begin = (tp != nullptr ? tp->rank() : 0) * c.local_experts;
        ex.total_experts = c.num_experts;
      }
      GANNET_RETURN_IF_ERROR(be->MoeExperts(ex));
      // Every rank ran its slice of every expert, or its experts' pairs: the sum is the whole.
      return AllReduce(ex.out);
    };
    // The two branches read only the residual (x_t, and h_t = pre_ff_norm(x_t)) and write their
    // own buffers, so the device may overlap them (Backend::RunConcurrently); not with a
    // tensor-parallel group, whose all-reduces must keep one order on every rank.
    if (tp == nullptr) {
      // The experts' branch (router, norm, experts) is the longer one: it stays on the capture
      // stream, where its router launches early behind the update (PDL); the dense MLP, which
      // has slack, forks to the side stream.
      GANNET_RETURN_IF_ERROR(be->RunConcurrently(dense, experts));
    } else {
      GANNET_RETURN_IF_ERROR(dense());
      GANNET_RETURN_IF_ERROR(experts());
    }
  }

  // The next norm: the following layer's input norm, or the final norm after the last layer.
  const bool last = l + 1 == c.num_hidden_layers;
  Tensor next_norm = last ? w.final_norm : w.layers[l + 1].input_norm;
  // The update after the feed-forward block: of the dense MLP's output, summed over a group with
  // the update; or of a MoE layer's two branches, each post-normed (one op: the norms, their sum
  // and the update).
  auto post_ff = [&](Tensor scalar, Tensor next_weight, Tensor next_out) {
    return c.enable_moe_block ? be->NormAddPostNormResidual(y, L.post_ff_norm_1, ex.out,
                                                            L.post_ff_norm_2, L.post_ff_norm, x_t,
                                                            scalar, next_weight, next_out, eps)
                              : AllReducePostNormResidual(y, L.post_ff_norm, x_t, scalar,
                                                          next_weight, next_out, eps);
  };
  if (!c.has_ple()) return post_ff(L.layer_scalar, next_norm, h_t);
  GANNET_RETURN_IF_ERROR(post_ff(Tensor(), Tensor(), Tensor()));
  // Per-layer embedding block (E2B/E4B): x += norm(W_proj (gelu(W_gate x) * ple_input[l])).
  const int64_t P = c.hidden_size_per_layer_input;
  Tensor g = ple_gate.Rows(0, n);
  GANNET_RETURN_IF_ERROR(be->Linear(x_t, L.ple_gate, g));
  Tensor gated = ple_gated.Rows(0, n);
  GANNET_RETURN_IF_ERROR(
      be->GeluMulLinear(g, ple_in.Rows(0, n).Cols(l * P, P), L.ple_proj, gated, o_t));
  return be->PostNormResidual(o_t, L.ple_post_norm, x_t, L.layer_scalar, next_norm, h_t, eps);
}

absl::Status ModelRunner::Impl::Execute(int n, int rows, bool sample, bool greedy_picks,
                                        const backend::StepMetadata& md) {
  const model::TextConfig& c = config.text;
  const int H = static_cast<int>(c.hidden_size);
  Tensor x_t = x.Rows(0, n);
  GANNET_RETURN_IF_ERROR(be->Embed(meta.token_ids(n), w.embed, w.embed_scale, x_t));
  GANNET_RETURN_IF_ERROR(AllReduce(x_t));  // vocabulary-parallel: one rank holds each row
  // Image soft tokens: the vision tower's features replace the text embedding, unscaled, before
  // anything reads x (the PLE projection below reads them too, as HF's does).
  for (const StepMetadataBuilder::EmbedRun& r : meta.embed_runs()) {
    if (x_t.dtype != DType::kF32) {
      return UnimplementedError("runner: image embeddings need an f32 residual stream");
    }
    GANNET_RETURN_IF_ERROR(
        be->CopyToDevice(static_cast<float*>(x_t.data) + int64_t{r.first_token} * H, r.rows,
                         static_cast<size_t>(r.count) * H * sizeof(float)));
  }
  if (c.has_ple()) {
    Tensor tok = ple_tok.Rows(0, n);
    GANNET_RETURN_IF_ERROR(be->Embed(meta.ple_token_ids(n), w.ple_table, w.ple_token_scale, tok));
    Tensor proj = ple_proj.Rows(0, n);
    GANNET_RETURN_IF_ERROR(be->Linear(x_t, w.ple_model_proj, proj));
    GANNET_RETURN_IF_ERROR(be->PleCombine(
        proj, tok, w.ple_proj_norm, static_cast<float>(1.0 / std::sqrt(static_cast<double>(H))),
        static_cast<float>(1.0 / std::sqrt(2.0)), static_cast<float>(c.rms_norm_eps),
        ple_in.Rows(0, n)));
  }
  GANNET_RETURN_IF_ERROR(
      be->RmsNorm(x_t, w.layers[0].input_norm, static_cast<float>(c.rms_norm_eps), h.Rows(0, n)));
  for (int l = 0; l < c.num_hidden_layers; ++l) GANNET_RETURN_IF_ERROR(RunLayer(l, n, md));
  if (rows == 0) return absl::OkStatus();
  // h now holds final_norm(x); project only the rows whose logits were asked for.
  Tensor lh = last_h.Rows(0, rows);
  GANNET_RETURN_IF_ERROR(be->GatherRows(h.Rows(0, n), meta.logit_rows(rows), lh));
  Tensor lg = logits.Rows(0, rows);
  // Tensor parallel: each rank projects onto its vocabulary shard and soft-caps it; then the
  // ranks either compare their shards' arg-maxes (all-greedy steps) or gather the shards side by
  // side into full rows (the sampling draw needs every logit of a row).
  Tensor head_out = lg, blocks;
  const int64_t world = tp != nullptr ? tp->world_size() : 1, cols = c.vocab_size / world;
  if (tp != nullptr) {
    blocks = Tensor::Make(logits_shard.data, DType::kF32, {world, rows, cols});
    head_out = Tensor::Make(static_cast<float*>(logits_shard.data) + tp->rank() * rows * cols,
                            DType::kF32, {rows, cols});
  }
  GANNET_RETURN_IF_ERROR(be->Linear(lh, w.lm_head, head_out));
  if (c.final_logit_softcapping) {
    GANNET_RETURN_IF_ERROR(be->Softcap(head_out, static_cast<float>(*c.final_logit_softcapping)));
  }
  if (tp != nullptr && greedy_picks) {
    // The ranks' winners (value, id) only; Forward picks the best on the host.
    return tp->ExchangeBestPicks(*be, head_out, meta.banned_ids(rows), tp->rank() * cols,
                                 pick_blocks, picks.Rows(0, rows));
  }
  if (tp != nullptr) GANNET_RETURN_IF_ERROR(tp->GatherVocabShards(blocks, lg));
  if (sample && (tp == nullptr || tp->rank() == 0)) {
    GANNET_RETURN_IF_ERROR(
        be->Sample(lg, meta.sampling_params(rows), meta.banned_ids(rows), meta.sampled_ids(rows)));
  }
  return absl::OkStatus();
}

StepBatch ModelRunner::Impl::Pad(const StepBatch& batch, int bucket, int q) {
  StepBatch padded = batch;
  static const int32_t kPadTokens[kMaxUniformQueryLen] = {};
  for (int s = static_cast<int>(batch.seqs.size()); s < bucket; ++s) {
    // q tokens at positions 0 .. q - 1, all in the padding page of each pool.
    SeqStep pad;
    pad.tokens = std::span<const int32_t>(kPadTokens, q);
    pad.start_pos = 0;
    for (int g = 0; g < 2; ++g) pad.page_table[g] = pad_table[g];
    pad.logits = q == 1 ? SeqStep::Logits::kLast : SeqStep::Logits::kAll;
    padded.seqs.push_back(pad);
    for (int r = 0; r < q && !padded.device_sampling.empty(); ++r) {
      padded.device_sampling.push_back(sampling::DrawParams::Greedy());
      padded.host_logits.push_back(0);
      if (!padded.banned_tokens.empty()) padded.banned_tokens.emplace_back();
    }
  }
  return padded;
}

absl::Status ModelRunner::Impl::Forward(const StepBatch& in, StepResult* result) {
  const model::TextConfig& c = config.text;
  if (kv == nullptr) return FailedPreconditionError("runner: Forward before AttachKv");
  const bool graphs = options.enable_graphs && be->SupportsGraphs();
  // Uniform steps (decode, verify chunks of one length) are padded up to a batch bucket (a no-op
  // when already at one) when the bucket's tokens and rows fit the activations.
  const int q = in.uniform_query_len();
  const int real_seqs = static_cast<int>(in.seqs.size());
  const int bucket = q > 0 ? BatchBucket(real_seqs, options.max_seqs) : 0;
  const int max_rows = options.max_logit_rows > 0 ? options.max_logit_rows : options.max_seqs;
  const bool pad = (graphs || options.pad_decode_batches) && q > 0 && bucket >= real_seqs &&
                   bucket * q <= options.max_tokens && bucket * q <= max_rows;
  StepBatch padded;
  const StepBatch& batch = pad ? (padded = Pad(in, bucket, q)) : in;
  GANNET_ASSIGN_OR_RETURN(backend::StepMetadata * md, meta.Build(batch));
  const int n = md->num_tokens;
  const int rows = meta.num_logit_rows();
  const bool sample = !batch.device_sampling.empty();
  bool greedy_picks = tp != nullptr && sample;
  for (size_t r = 0; greedy_picks && r < batch.device_sampling.size(); ++r) {
    const sampling::DrawParams& p = batch.device_sampling[r];
    greedy_picks = p.greedy() && batch.host_logits[r] == 0;
  }
  if (sample) {
    if (static_cast<int>(batch.device_sampling.size()) != rows ||
        batch.host_logits.size() != batch.device_sampling.size()) {
      return InvalidArgumentError("step: {} device sampling rows for {} logits rows",
                                  batch.device_sampling.size(), rows);
    }
    GANNET_RETURN_IF_ERROR(meta.UploadSampling(batch.device_sampling, batch.banned_tokens));
  }

  // Padded steps are graph-shaped: kernels size their split-KV grids from the host-side
  // max_seq_len, so it is rounded up to a power of two (>= 256) and one graph per (batch bucket,
  // context-length bucket) serves every step whose contexts fit. Eager padded steps (tests) use
  // the same shapes, so they compute exactly what a replay does.
  const int len_bucket = pad ? LengthBucket(md->max_seq_len) : 0;
  if (pad) md->max_seq_len = len_bucket;
  // The step's device span (for the engine's host-time measure): from here, when the host-side
  // batch and metadata are built, to the last op before the results are read.
  GANNET_RETURN_IF_ERROR(be->BeginDeviceSpan());
  if (graphs && pad) {
    GANNET_RETURN_IF_ERROR(graph_cache.Run(
        be,
        {static_cast<int>(batch.seqs.size()), len_bucket, sample ? (greedy_picks ? 2 : 1) : 0, q,
         0},
        [&] { return Execute(n, rows, sample, greedy_picks, *md); },
        "runner: step (sequences, length, sample, q)"));
  } else {
    GANNET_RETURN_IF_ERROR(Execute(n, rows, sample, greedy_picks, *md));
  }
  GANNET_RETURN_IF_ERROR(be->EndDeviceSpan());
  if (result == nullptr) {
    if (tp == nullptr || tp->rank() == 0)
      return InvalidArgumentError("runner: Forward without a result");
    return be->Synchronize();  // a non-zero rank: its part of the step is done
  }

  // Results of the real rows only (padding rows come after them).
  int real_rows = rows;
  if (pad) {
    real_rows = static_cast<int>(in.device_sampling.empty() ? in.seqs.size() * q
                                                            : in.device_sampling.size());
  }
  result->vocab_size = static_cast<int>(c.vocab_size);
  result->row_seq.assign(meta.logit_row_seq().begin(), meta.logit_row_seq().begin() + real_rows);
  result->row_pos.assign(meta.logit_row_pos().begin(), meta.logit_row_pos().begin() + real_rows);
  result->sampled.clear();
  if (sample && greedy_picks) {
    result->sampled.resize(real_rows);
    GANNET_RETURN_IF_ERROR(tp->ReadBestPicks(*be, picks, result->sampled));
  } else if (sample) {
    result->sampled.resize(real_rows);
    GANNET_RETURN_IF_ERROR(be->CopyToHost(result->sampled.data(), meta.sampled_ids(rows).data,
                                          real_rows * sizeof(int32_t)));
  }
  result->host_row.assign(real_rows, -1);
  int host_rows = 0;
  for (int r = 0; r < real_rows; ++r) {
    if (!sample || batch.host_logits[r]) result->host_row[r] = host_rows++;
  }
  result->logits.resize(static_cast<size_t>(host_rows) * c.vocab_size);
  const size_t row_bytes = static_cast<size_t>(c.vocab_size) * sizeof(float);
  if (host_rows == real_rows && real_rows > 0) {
    return be->CopyToHost(result->logits.data(), logits.data, real_rows * row_bytes);
  }
  for (int r = 0; r < real_rows; ++r) {
    if (result->host_row[r] < 0) continue;
    GANNET_RETURN_IF_ERROR(
        be->CopyToHost(result->logits.data() + result->host_row[r] * c.vocab_size,
                       logits.Rows(r, 1).data, row_bytes));
  }
  return absl::OkStatus();
}

backend::RopeSpec RopeSpecOf(const model::TextConfig& c, bool sliding) {
  const model::RopeParams& r = sliding ? c.rope_sliding : c.rope_full;
  const int d = sliding ? c.head_dim : c.global_head_dim;
  backend::RopeSpec s{r.theta, static_cast<int>(r.partial_rotary_factor * d / 2), r.factor};
  if (r.type == model::RopeType::kDefault) s.factor = 1.0;
  return s;
}

ModelRunner::ModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelRunner::~ModelRunner() = default;

absl::StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const model::ModelConfig& config,
                                                                 const model::ModelWeights& weights,
                                                                 backend::Backend* backend,
                                                                 const RunnerOptions& options_in) {
  if (config.kind != model::ModelKind::kTarget) {
    return InvalidArgumentError("ModelRunner runs target models; '{}' is an assistant",
                                config.model_type);
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = options_in;
  RunnerOptions& o = impl->options;
  const model::TextConfig& c = config.text;
  if (o.max_tokens <= 0 || o.max_seqs <= 0) {
    return InvalidArgumentError("runner: max_tokens and max_seqs must be > 0");
  }
  if (o.max_logit_rows <= 0) o.max_logit_rows = o.max_seqs;
  if (o.page_size <= 0 || o.page_size > kv::kMaxPageSize) {
    return InvalidArgumentError("runner: page_size {} is outside [1, {}]", o.page_size,
                                kv::kMaxPageSize);
  }
  if (o.max_pages_per_seq <= 0) {
    o.max_pages_per_seq =
        static_cast<int>((c.max_position_embeddings + o.page_size - 1) / o.page_size);
  }
  impl->be = backend;
  impl->tp = o.tp;
  GANNET_ASSIGN_OR_RETURN(impl->w, LoadDeviceWeights(config, weights, backend, o.on_weight_progress,
                                                     o.on_weight_copied));
  if (impl->tp != nullptr) {
    const int world = impl->tp->world_size();
    if (world < 1 || c.vocab_size % world != 0 || impl->w.lm_head.dim(0) != c.vocab_size / world) {
      return InvalidArgumentError(
          "runner: rank {} of {}: the LM head has {} rows, not the vocabulary shard of {} / {}",
          impl->tp->rank(), world, impl->w.lm_head.dim(0), c.vocab_size, world);
    }
  }
  impl->rope[0] = RopeSpecOf(c, /*sliding=*/true);
  impl->rope[1] = RopeSpecOf(c, /*sliding=*/false);
  GANNET_RETURN_IF_ERROR(impl->meta.Init(backend, config, o));
  GANNET_RETURN_IF_ERROR(impl->AllocateActivations());
  GANNET_LOG_INFO("runner: {} on {}: weights {}, activations for {} tokens and {} sequences",
                  model::ModelLabel(config), backend->name(),
                  FormatBytes(static_cast<int64_t>(impl->w.bytes)), o.max_tokens, o.max_seqs);
  return std::unique_ptr<ModelRunner>(new ModelRunner(std::move(impl)));
}

absl::Status ModelRunner::AttachKv(const kv::KvLayout& layout) {
  Impl& m = *impl_;
  if (m.kv != nullptr) return FailedPreconditionError("runner: the KV storage is already attached");
  if (layout.page_size != m.options.page_size) {
    return InvalidArgumentError("runner: the KV layout's page size {} is not the runner's {}",
                                layout.page_size, m.options.page_size);
  }
  GANNET_ASSIGN_OR_RETURN(m.kv, KvStorage::Create(m.config.text, layout, m.be));
  for (int l = 0; l < m.config.text.num_hidden_layers; ++l) {
    const kv::KvLayerGeometry& g = layout.layers[l];
    if (g.owns_kv() && g.k_from_v) {
      GANNET_RETURN_IF_ERROR(
          m.kv->BindKDerivation(l, m.w.layers[l].k_norm, m.rope[kv::GroupIndex(g.group)]));
    }
  }
  for (kv::KvGroup g : kv::kAllKvGroups) {
    m.pad_table[kv::GroupIndex(g)].clear();
    // Enough entries for the positions 0 .. kMaxUniformQueryLen - 1 of a padding sequence.
    if (layout.has_group(g)) {
      m.pad_table[kv::GroupIndex(g)].assign(
          (kMaxUniformQueryLen + layout.page_size - 1) / layout.page_size, layout.padding_page(g));
    }
  }
  m.meta.SetKvLayout(layout);
  GANNET_LOG_INFO("runner: KV {} ({} sliding + {} full pages of {} tokens, + 1 padding page each)",
                  FormatBytes(static_cast<int64_t>(m.kv->bytes())), layout.num_pages[0],
                  layout.num_pages[1], layout.page_size);
  return absl::OkStatus();
}

absl::Status ModelRunner::Forward(const StepBatch& batch, StepResult* result) {
  return impl_->Forward(batch, result);
}
const model::ModelConfig& ModelRunner::config() const { return impl_->config; }
const RunnerOptions& ModelRunner::options() const { return impl_->options; }
const KvStorage* ModelRunner::kv() const { return impl_->kv.get(); }
backend::Tensor ModelRunner::embed_table() const { return impl_->w.embed; }
float ModelRunner::embed_scale() const { return impl_->w.embed_scale; }
backend::Tensor ModelRunner::last_hidden(int rows) const { return impl_->last_h.Rows(0, rows); }
uint64_t ModelRunner::weight_bytes() const { return impl_->w.bytes; }
absl::StatusOr<double> ModelRunner::LastStepDeviceSeconds() {
  return impl_->be->DeviceSpanSeconds();
}
int ModelRunner::num_graphs() const { return impl_->graph_cache.num_graphs(); }

}  // namespace gannet::runner

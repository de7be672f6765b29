#include "lib/spec/drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/model/synthetic.h"
#include "lib/runner/device_weights.h"
#include "lib/runner/graph_cache.h"
#include "lib/runner/layer_blocks.h"

namespace gannet::spec {

using backend::Tensor;

int DrafterKvSource(const model::TextConfig& target, model::LayerType type) {
  for (int l = target.FirstKvSharedLayer() - 1; l >= 0; --l) {
    if (target.layer_type(l) == type) return l;
  }
  return -1;
}

absl::Status CheckDrafterPair(const model::ModelConfig& d, const model::ModelConfig& t) {
  if (d.kind != model::ModelKind::kAssistant) {
    return InvalidArgumentError("drafter: model_type '{}' is not gemma4_assistant", d.model_type);
  }
  if (t.kind != model::ModelKind::kTarget) {
    return InvalidArgumentError("drafter: the target '{}' is an assistant", t.model_type);
  }
  const model::TextConfig& dc = d.text;
  const model::TextConfig& tc = t.text;
  if (d.backbone_hidden_size != tc.hidden_size) {
    return InvalidArgumentError(
        "drafter: it was trained for a {}-wide target (backbone_hidden_size) but the target's "
        "hidden_size is {}",
        d.backbone_hidden_size, tc.hidden_size);
  }
  if (dc.vocab_size != tc.vocab_size) {
    return InvalidArgumentError("drafter: vocabulary {} differs from the target's {}",
                                dc.vocab_size, tc.vocab_size);
  }
  if (dc.sliding_window != tc.sliding_window) {
    return InvalidArgumentError("drafter: sliding_window {} differs from the target's {}",
                                dc.sliding_window, tc.sliding_window);
  }
  for (int l = 0; l < dc.num_hidden_layers; ++l) {
    if (!dc.IsKvShared(l)) {
      return InvalidArgumentError(
          "drafter: layer {} has its own KV; every drafter layer reads "
          "the target's",
          l);
    }
    const int src = DrafterKvSource(tc, dc.layer_type(l));
    if (src < 0) {
      return InvalidArgumentError(
          "drafter: layer {} is {} but the target has no such layer "
          "owning KV",
          l, model::LayerTypeName(dc.layer_type(l)));
    }
    if (dc.LayerHeadDim(l) != tc.LayerHeadDim(src) ||
        dc.LayerNumKvHeads(l) != tc.LayerNumKvHeads(src) ||
        dc.num_attention_heads % tc.LayerNumKvHeads(src) != 0) {
      return InvalidArgumentError(
          "drafter: layer {} ({} heads, {} KV heads of dim {}) does not fit the target layer {} "
          "it reads ({} KV heads of dim {})",
          l, dc.num_attention_heads, dc.LayerNumKvHeads(l), dc.LayerHeadDim(l), src,
          tc.LayerNumKvHeads(src), tc.LayerHeadDim(src));
    }
  }
  if (d.use_ordered_embeddings &&
      (d.num_centroids <= 0 || dc.vocab_size % d.num_centroids != 0 ||
       d.centroid_intermediate_top_k < 1 || d.centroid_intermediate_top_k > d.num_centroids)) {
    return InvalidArgumentError("drafter: {} centroids (top {}) do not divide the vocabulary of {}",
                                d.num_centroids, d.centroid_intermediate_top_k, dc.vocab_size);
  }
  return absl::OkStatus();
}

namespace {

// token_ordering viewed as [C, V / C] lists each cluster's token ids; returns it as int32.
// DataLoss when it is not a permutation of the vocabulary.
absl::StatusOr<std::vector<int32_t>> TokenOrdering(const model::WeightView& ordering,
                                                   int64_t vocab) {
  std::vector<int64_t> ids;
  if (ordering.synthetic) {
    ids = model::SyntheticPermutation(ordering.seed, ordering.name, vocab);
  } else {
    if (ordering.numel() != vocab ||
        (ordering.dtype != DType::kI64 && ordering.dtype != DType::kI32)) {
      return DataLossError("drafter: {} must hold {} integers", ordering.name, vocab);
    }
    ids.resize(vocab);
    for (int64_t i = 0; i < vocab; ++i) {
      ids[i] = ordering.dtype == DType::kI64 ? LoadUnaligned<int64_t>(ordering.data, i)
                                             : LoadUnaligned<int32_t>(ordering.data, i);
    }
  }
  std::vector<uint8_t> seen(vocab, 0);
  std::vector<int32_t> out(vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab || seen[ids[i]]) {
      return DataLossError("drafter: {} is not a permutation of the vocabulary (entry {} = {})",
                           ordering.name, i, ids[i]);
    }
    seen[ids[i]] = 1;
    out[i] = static_cast<int32_t>(ids[i]);
  }
  return out;
}

}  // namespace

class Drafter::Impl {
 public:
  model::ModelConfig config, target;
  DrafterOptions options;
  backend::Backend* be = nullptr;
  runner::ModelRunner* target_runner = nullptr;
  runner::DeviceWeights w;
  backend::OwnedTensor pre, post, centroids;
  std::vector<backend::Buffer> buffers;
  Tensor ordering;  // [C, V / C] int32: each cluster's token ids
  runner::StepMetadataBuilder meta;
  std::vector<int> kv_source;  // per drafter layer: the target layer whose KV it reads
  backend::RopeSpec rope[2];
  // Scratch, sized for options.max_seqs rows.
  Tensor concat, x, h, q, qn, attn, o, gate_up, mlp, y, hid[2], logits, clusters, selected;
  Tensor rows, identity, rope_positions;
  Tensor ids_all;                     // [max_steps, S] int32: every step's draws
  std::vector<Tensor> ids, params;    // per step: views of ids_all; DrawParams [S]
  runner::GraphCache graphs;          // greedy rounds replay from graphs
  std::vector<int32_t> pad_table[2];  // the padding page of each pool (padding rows)
  int hidden_rows = 0;                // rows of the target's last_hidden buffer
  std::vector<int32_t> h_rope_positions;
  bool kv_attached = false;
  // Tensor parallelism (the target runner's group; null on one device).
  runner::TpHooks* tp = nullptr;
  int64_t head_cols = 0;      // vocabulary columns of this rank's LM head
  int64_t vocab_begin = 0;    // the first token id of the rank's embedding shard
  Tensor emb;                 // [S, Hb]: the input tokens' embedding rows before their sum
  Tensor local_ids;           // [S, 1] int32: step k > 0's input ids as rows of the rank's shard
  Tensor logits_shard;        // [world, S, V / world] f32: every rank's head block (dense head)
  Tensor pick_blocks, picks;  // [world * S, 2] and [S, 2 * world]: the ranks' arg-maxes

  // The block of the rank's LM head output for n rows, and all ranks' blocks.
  Tensor HeadBlock(int n) const {
    return Tensor::Make(static_cast<float*>(logits_shard.data) + tp->rank() * n * head_cols,
                        DType::kF32, {n, head_cols});
  }
  Tensor HeadBlocks(int n) const {
    return Tensor::Make(logits_shard.data, DType::kF32, {tp->world_size(), n, head_cols});
  }
  // PostNormResidual of the sum over the group's ranks (of y itself on one device).
  absl::Status SumPostNormResidual(Tensor y, Tensor post_w, Tensor residual, Tensor scalar,
                                   Tensor next_w, Tensor next_out, float eps) {
    if (tp == nullptr) {
      return be->PostNormResidual(y, post_w, residual, scalar, next_w, next_out, eps);
    }
    return tp->SumPostNormResidual(*be, y, post_w, residual, scalar, next_w, next_out, eps);
  }

  absl::Status Alloc(Tensor* t, DType dt, int64_t rows_n, int64_t cols) {
    GANNET_ASSIGN_OR_RETURN(backend::Buffer b,
                            be->Allocate(static_cast<size_t>(rows_n * cols) * (DTypeBits(dt) / 8)));
    *t = b.View(dt, {rows_n, cols});
    buffers.push_back(std::move(b));
    return absl::OkStatus();
  }
  absl::Status Init();
  absl::Status Prepare(std::span<const DraftSeq> seqs, backend::StepMetadata* attn_md,
                       backend::StepMetadata* rope_md);
  absl::Status Step(int n, int k, const backend::StepMetadata& attn_md,
                    const backend::StepMetadata& rope_md);
  absl::Status UploadDraws(std::span<const DraftSeq> seqs, int rows, int k);
  // One round of `steps` steps: greedy rows only, from a recorded graph where possible.
  absl::Status RoundFromGraph(std::span<const DraftSeq> seqs, int steps);
  // One round with the draws of want_logits rows made on the host (eager).
  absl::Status RoundWithHostDraws(std::span<const DraftSeq> seqs, int steps, DraftResult* result);
  // One round of a tensor-parallel rank (eager): every rank ends with the same tokens.
  absl::Status RoundOfRank(std::span<const DraftSeq> seqs, int steps, DraftResult* result);
  // Step k's tokens of a rank from its full logits rows: the device draw, then want_logits rows
  // drawn on the host (as RoundWithHostDraws does); `tokens` gets them.
  absl::Status DrawFullRows(std::span<const DraftSeq> seqs, int k, DraftResult* result,
                            std::vector<int32_t>* tokens);
};

absl::Status Drafter::Impl::Init() {
  const model::TextConfig& c = config.text;
  const int64_t S = options.max_seqs, Hb = config.backbone_hidden_size, Hd = c.hidden_size;
  // `wide`: the projections that feed a norm (f32 on the fp16 compute path).
  const DType act = be->activation_dtype(), wide = be->norm_input_dtype();
  int64_t max_q = 0, max_inter = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    max_q =
        std::max<int64_t>(max_q, static_cast<int64_t>(c.num_attention_heads) * c.LayerHeadDim(l));
    max_inter = std::max(max_inter, c.LayerIntermediateSize(l));
    kv_source.push_back(DrafterKvSource(target.text, c.layer_type(l)));
  }
  rope[0] = runner::RopeSpecOf(c, true);
  rope[1] = runner::RopeSpecOf(c, false);
  GANNET_RETURN_IF_ERROR(Alloc(&concat, act, S, 2 * Hb));
  GANNET_RETURN_IF_ERROR(Alloc(&x, be->residual_dtype(), S, Hd));
  GANNET_RETURN_IF_ERROR(Alloc(&h, act, S, Hd));
  GANNET_RETURN_IF_ERROR(Alloc(&q, wide, S, max_q));
  GANNET_RETURN_IF_ERROR(Alloc(&qn, act, S, max_q));
  GANNET_RETURN_IF_ERROR(Alloc(&attn, act, S, max_q));
  GANNET_RETURN_IF_ERROR(Alloc(&o, wide, S, Hd));
  GANNET_RETURN_IF_ERROR(Alloc(&gate_up, act, S, 2 * max_inter));
  GANNET_RETURN_IF_ERROR(Alloc(&mlp, act, S, max_inter));
  GANNET_RETURN_IF_ERROR(Alloc(&y, wide, S, Hd));
  for (Tensor& t : hid) GANNET_RETURN_IF_ERROR(Alloc(&t, act, S, Hb));
  GANNET_RETURN_IF_ERROR(Alloc(&logits, DType::kF32, S, c.vocab_size));
  if (config.use_ordered_embeddings) {
    GANNET_RETURN_IF_ERROR(Alloc(&clusters, DType::kF32, S, config.num_centroids));
    GANNET_RETURN_IF_ERROR(Alloc(&selected, DType::kI32, S, config.centroid_intermediate_top_k));
  }
  GANNET_RETURN_IF_ERROR(Alloc(&rows, DType::kI32, S, 1));
  GANNET_RETURN_IF_ERROR(Alloc(&identity, DType::kI32, S, 1));
  GANNET_RETURN_IF_ERROR(Alloc(&rope_positions, DType::kI32, S, 1));
  if (tp != nullptr) {
    const int64_t world = tp->world_size();
    GANNET_RETURN_IF_ERROR(Alloc(&emb, act, S, Hb));
    GANNET_RETURN_IF_ERROR(Alloc(&local_ids, DType::kI32, S, 1));
    if (!config.use_ordered_embeddings) {
      GANNET_RETURN_IF_ERROR(Alloc(&logits_shard, DType::kF32, S, c.vocab_size));
      GANNET_RETURN_IF_ERROR(Alloc(&pick_blocks, DType::kF32, world * S, 2));
      GANNET_RETURN_IF_ERROR(Alloc(&picks, DType::kF32, S, 2 * world));
    }
  }
  params.resize(options.max_steps);
  for (Tensor& t : params) {
    GANNET_RETURN_IF_ERROR(Alloc(&t, DType::kU8, S, sizeof(sampling::DrawParams)));
  }
  GANNET_RETURN_IF_ERROR(Alloc(&ids_all, DType::kI32, options.max_steps, S));
  for (int k = 0; k < options.max_steps; ++k) ids.push_back(ids_all.Rows(k, 1).Reshape({S}));
  std::vector<int32_t> iota(S);
  for (int64_t i = 0; i < S; ++i) iota[i] = static_cast<int32_t>(i);
  return be->CopyToDevice(identity.data, iota.data(), iota.size() * sizeof(int32_t));
}

absl::Status Drafter::Impl::Prepare(std::span<const DraftSeq> seqs, backend::StepMetadata* attn_md,
                                    backend::StepMetadata* rope_md) {
  const int n = static_cast<int>(seqs.size());
  if (!kv_attached) {
    // The drafter is created before the KV cache is sized (its memory counts first).
    if (target_runner->kv() == nullptr) {
      return FailedPreconditionError("drafter: the target runner has no KV storage yet");
    }
    const kv::KvLayout& layout = target_runner->kv()->layout();
    meta.SetKvLayout(layout);
    for (kv::KvGroup g : kv::kAllKvGroups) {
      if (layout.has_group(g)) pad_table[kv::GroupIndex(g)] = {layout.padding_page(g)};
    }
    kv_attached = true;
  }
  // Attention: one query per sequence at position L - 1 over the context 0 .. L - 1, so the
  // window rule picks keys L - W .. L - 1 and the causal rule stops at the last committed one.
  runner::StepBatch batch;
  std::vector<int32_t> h_rows(n);
  h_rope_positions.resize(n);
  for (int i = 0; i < n; ++i) {
    const DraftSeq& s = seqs[i];
    if (s.committed < 1) return InvalidArgumentError("drafter: sequence {} has no committed KV", i);
    if (s.hidden_row < 0 || s.hidden_row >= hidden_rows) {
      return InvalidArgumentError("drafter: sequence {} names hidden row {} of {}", i, s.hidden_row,
                                  hidden_rows);
    }
    runner::SeqStep step;
    step.tokens = std::span<const int32_t>(&s.token, 1);
    step.start_pos = static_cast<int32_t>(s.committed - 1);
    step.page_table[0] = s.page_table[0];
    step.page_table[1] = s.page_table[1];
    step.logits = runner::SeqStep::Logits::kNone;
    batch.seqs.push_back(step);
    h_rows[i] = s.hidden_row;
    h_rope_positions[i] = static_cast<int32_t>(s.committed);  // the bonus token's position
  }
  GANNET_ASSIGN_OR_RETURN(backend::StepMetadata * md, meta.Build(batch));
  *attn_md = *md;
  *rope_md = *md;
  GANNET_RETURN_IF_ERROR(
      be->CopyToDevice(rope_positions.data, h_rope_positions.data(), n * sizeof(int32_t)));
  rope_md->positions = rope_positions.as<int32_t>();
  rope_md->host_positions = h_rope_positions.data();
  return be->CopyToDevice(rows.data, h_rows.data(), n * sizeof(int32_t));
}

absl::Status Drafter::Impl::Step(int n, int k, const backend::StepMetadata& attn_md,
                                 const backend::StepMetadata& rope_md) {
  const model::TextConfig& c = config.text;
  const int64_t Hb = config.backbone_hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // Input: [E_target[t] * scale, h].
  const Tensor in_ids = k == 0 ? meta.token_ids(n) : ids[k - 1].Rows(0, n);
  Tensor cat = concat.Rows(0, n);
  if (tp == nullptr) {
    GANNET_RETURN_IF_ERROR(be->Embed(in_ids, target_runner->embed_table(),
                                     target_runner->embed_scale(), cat.Cols(0, Hb)));
  } else {
    // The target's table is vocabulary-parallel: each rank embeds the ids of its shard (others
    // are -1, zero rows) and the sum puts every row together on every rank.
    const Tensor local =
        k == 0 ? meta.token_ids(n) : local_ids.Reshape({local_ids.numel()}).Rows(0, n);
    Tensor e = emb.Rows(0, n);
    GANNET_RETURN_IF_ERROR(
        be->Embed(local, target_runner->embed_table(), target_runner->embed_scale(), e));
    GANNET_RETURN_IF_ERROR(tp->SumPartials(e));
    GANNET_RETURN_IF_ERROR(
        be->GatherRows(e, identity.Reshape({identity.numel()}).Rows(0, n), cat.Cols(0, Hb)));
  }
  // The whole buffer as the source: a recorded round stays valid whatever rows it gathers.
  const Tensor src = k == 0 ? target_runner->last_hidden(hidden_rows) : hid[(k - 1) % 2].Rows(0, n);
  const Tensor idx = (k == 0 ? rows : identity).Reshape({rows.numel()}).Rows(0, n);
  GANNET_RETURN_IF_ERROR(be->GatherRows(src, idx, cat.Cols(Hb, Hb)));
  Tensor x_t = x.Rows(0, n), h_t = h.Rows(0, n);
  GANNET_RETURN_IF_ERROR(be->Linear(cat, pre.tensor, x_t));
  GANNET_RETURN_IF_ERROR(be->RmsNorm(x_t, w.layers[0].input_norm, eps, h_t));
  const runner::KvStorage& kv = *target_runner->kv();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const runner::DeviceLayer& L = w.layers[l];
    const bool sliding = c.is_sliding(l);
    const int d = c.LayerHeadDim(l), nq = c.num_attention_heads, nkv = c.LayerNumKvHeads(l);
    const int group = sliding ? backend::kSlidingGroup : backend::kFullGroup;
    const backend::LayerKvView& tkv = kv.Layer(kv_source[l]);
    Tensor q_t = q.Rows(0, n).Reshape({n, q.dim(1)}).Cols(0, static_cast<int64_t>(nq) * d);
    GANNET_RETURN_IF_ERROR(be->Linear(h_t, L.qkv, q_t));
    backend::QkvPrepArgs prep;
    prep.qkv = q_t;
    prep.num_q_heads = nq;
    prep.num_kv_heads = nkv;
    prep.head_dim = d;
    prep.has_kv = false;  // the drafter never writes the target's KV
    prep.eps = eps;
    prep.q_norm = L.q_norm;
    prep.rope = rope[group];
    prep.q_out = Tensor::Make(qn.data, qn.dtype, {n, nq, d});
    prep.kv = tkv;  // read for its group only: has_kv is false
    prep.meta = &rope_md;
    GANNET_RETURN_IF_ERROR(be->QkvPrep(prep));
    Tensor o_t = o.Rows(0, n);
    GANNET_RETURN_IF_ERROR(
        runner::AttendAndProject(be, c, l, prep.q_out, tkv, attn_md, attn, L.o_proj, o_t));
    GANNET_RETURN_IF_ERROR(
        SumPostNormResidual(o_t, L.post_attn_norm, x_t, Tensor(), L.pre_ff_norm, h_t, eps));
    Tensor y_t = y.Rows(0, n);
    GANNET_RETURN_IF_ERROR(runner::GatedMlp(be, L, h_t, gate_up, mlp, y_t));
    const bool last = l + 1 == c.num_hidden_layers;
    GANNET_RETURN_IF_ERROR(SumPostNormResidual(y_t, L.post_ff_norm, x_t, L.layer_scalar,
                                               last ? w.final_norm : w.layers[l + 1].input_norm,
                                               h_t, eps));
  }
  // h_t = RMS_norm(x): the next hidden state and the logits.
  GANNET_RETURN_IF_ERROR(be->Linear(h_t, post.tensor, hid[k % 2].Rows(0, n)));
  Tensor lg = logits.Rows(0, n);
  if (config.use_ordered_embeddings) {
    // E2B/E4B: only the tokens of the top clusters get logits (the rest -inf).
    Tensor cl = clusters.Rows(0, n);
    GANNET_RETURN_IF_ERROR(be->Linear(h_t, centroids.tensor, cl));
    GANNET_RETURN_IF_ERROR(
        be->CentroidLogits(h_t, w.lm_head, cl, ordering, selected.Rows(0, n), lg));
  } else {
    // A rank projects onto its vocabulary shard; its round exchanges or gathers the blocks.
    GANNET_RETURN_IF_ERROR(be->Linear(h_t, w.lm_head, tp != nullptr ? HeadBlock(n) : lg));
  }
  // No soft-cap: HF's assistant applies none (the released drafters set none either).
  return absl::OkStatus();
}

Drafter::Drafter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Drafter::~Drafter() = default;
const model::ModelConfig& Drafter::config() const { return impl_->config; }
uint64_t Drafter::weight_bytes() const { return impl_->w.bytes; }

absl::StatusOr<std::unique_ptr<Drafter>> Drafter::Create(const model::ModelConfig& drafter,
                                                         const model::ModelWeights& weights,
                                                         const model::ModelConfig& target,
                                                         runner::ModelRunner* target_runner,
                                                         backend::Backend* backend,
                                                         const DrafterOptions& options) {
  GANNET_RETURN_IF_ERROR(CheckDrafterPair(drafter, target));
  if (target_runner == nullptr) return InvalidArgumentError("drafter: no target runner");
  if (options.max_seqs < 1 || options.max_steps < 1 || options.max_steps > 16) {
    return InvalidArgumentError("drafter: {} sequences and {} steps per round (1 to 16 steps)",
                                options.max_seqs, options.max_steps);
  }
  auto impl = std::make_unique<Impl>();
  impl->config = drafter;
  impl->target = target;
  impl->options = options;
  impl->be = backend;
  impl->target_runner = target_runner;
  impl->tp = target_runner->options().tp;
  GANNET_ASSIGN_OR_RETURN(impl->w, runner::LoadDeviceWeights(drafter, weights, backend));
  if (impl->tp != nullptr) {
    // The shard of model/tp_shard.h: the dense head's vocabulary rows, or the whole centroid head.
    const int world = impl->tp->world_size();
    const int64_t vocab = drafter.text.vocab_size;
    impl->head_cols = drafter.use_ordered_embeddings ? vocab : vocab / world;
    impl->vocab_begin = vocab / world * impl->tp->rank();
    if (vocab % world != 0 || impl->w.lm_head.dim(0) != impl->head_cols) {
      return InvalidArgumentError(
          "drafter: rank {} of {}: the LM head has {} rows, not the {} of its shard of {}",
          impl->tp->rank(), world, impl->w.lm_head.dim(0), impl->head_cols, vocab);
    }
  }
  auto load = [&](const model::WeightView& v, backend::OwnedTensor* out) -> absl::Status {
    // The centroid table is read by row (CentroidLogits), which no backend does in int4.
    if (&v == &weights.centroids && v.quantized()) {
      return UnimplementedError(
          "'{}' is quantized; the drafter reads its centroids in "
          "bf16/f16/f32 only",
          v.name);
    }
    const model::WeightView* parts[] = {&v};
    GANNET_ASSIGN_OR_RETURN(*out, backend->LoadWeight(parts));
    impl->w.bytes += v.nbytes() + v.scale_bytes();
    return absl::OkStatus();
  };
  GANNET_RETURN_IF_ERROR(load(weights.pre_projection, &impl->pre));
  GANNET_RETURN_IF_ERROR(load(weights.post_projection, &impl->post));
  if (drafter.use_ordered_embeddings) {
    GANNET_RETURN_IF_ERROR(load(weights.centroids, &impl->centroids));
    GANNET_ASSIGN_OR_RETURN(std::vector<int32_t> ordering,
                            TokenOrdering(weights.token_ordering, drafter.text.vocab_size));
    const int64_t per = drafter.text.vocab_size / drafter.num_centroids;
    GANNET_RETURN_IF_ERROR(impl->Alloc(&impl->ordering, DType::kI32, drafter.num_centroids, per));
    GANNET_RETURN_IF_ERROR(backend->CopyToDevice(impl->ordering.data, ordering.data(),
                                                 ordering.size() * sizeof(int32_t)));
  }
  runner::RunnerOptions ro;
  ro.max_tokens = options.max_seqs;
  ro.max_seqs = options.max_seqs;
  ro.max_logit_rows = options.max_seqs;
  ro.page_size = target_runner->options().page_size;
  ro.max_pages_per_seq = target_runner->options().max_pages_per_seq;
  ro.tp = impl->tp;  // token ids become rows of the rank's embedding shard
  GANNET_RETURN_IF_ERROR(impl->meta.Init(backend, target, ro));
  const runner::RunnerOptions& tro = target_runner->options();
  impl->hidden_rows = tro.max_logit_rows > 0 ? tro.max_logit_rows : tro.max_seqs;
  GANNET_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Drafter>(new Drafter(std::move(impl)));
}

absl::Status Drafter::Draft(std::span<const DraftSeq> seqs, int steps, DraftResult* result) {
  Impl& m = *impl_;
  const int n = static_cast<int>(seqs.size());
  if (n == 0) return absl::OkStatus();
  if (n > m.options.max_seqs || steps < 1 || steps > m.options.max_steps) {
    return InvalidArgumentError("drafter: {} sequences x {} steps exceed the limits {} x {}", n,
                                steps, m.options.max_seqs, m.options.max_steps);
  }
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(seqs[i].draws.size()) < steps) {
      return InvalidArgumentError("drafter: sequence {} has {} draws for {} steps", i,
                                  seqs[i].draws.size(), steps);
    }
  }
  bool any_host = false;
  for (int i = 0; i < n; ++i) any_host = any_host || seqs[i].want_logits;
  result->tokens.assign(n, std::vector<int32_t>(steps));
  result->logits.assign(n, {});
  if (m.tp != nullptr) return m.RoundOfRank(seqs, steps, result);
  const bool graph = m.options.enable_graphs && m.be->SupportsGraphs() && !any_host;
  if (graph) {
    GANNET_RETURN_IF_ERROR(m.RoundFromGraph(seqs, steps));
  } else {
    GANNET_RETURN_IF_ERROR(m.RoundWithHostDraws(seqs, steps, result));
  }
  std::vector<int32_t> host(static_cast<size_t>(steps) * m.options.max_seqs);
  GANNET_RETURN_IF_ERROR(
      m.be->CopyToHost(host.data(), m.ids_all.data, host.size() * sizeof(int32_t)));
  for (int k = 0; k < steps; ++k) {
    for (int i = 0; i < n; ++i) result->tokens[i][k] = host[k * m.options.max_seqs + i];
  }
  return absl::OkStatus();
}

absl::Status Drafter::Impl::UploadDraws(std::span<const DraftSeq> seqs, int rows, int k) {
  std::vector<sampling::DrawParams> draws(rows, sampling::DrawParams::Greedy());
  for (size_t i = 0; i < seqs.size(); ++i) draws[i] = seqs[i].draws[k];
  return be->CopyToDevice(params[k].data, draws.data(), rows * sizeof(sampling::DrawParams));
}

absl::Status Drafter::Impl::RoundFromGraph(std::span<const DraftSeq> seqs, int steps) {
  // Padded to a batch bucket (padding rows read and never write the padding page), the context
  // bound rounded up (the split-KV grids depend on it): one recording per (bucket, steps, length).
  const int n = static_cast<int>(seqs.size());
  const int bucket = runner::BatchBucket(n, options.max_seqs);
  std::vector<DraftSeq> padded(seqs.begin(), seqs.end());
  for (int i = n; i < bucket; ++i) {
    DraftSeq pad;
    pad.committed = 1;
    for (int g = 0; g < 2; ++g) pad.page_table[g] = pad_table[g];
    padded.push_back(pad);
  }
  backend::StepMetadata attn_md, rope_md;
  GANNET_RETURN_IF_ERROR(Prepare(padded, &attn_md, &rope_md));
  attn_md.max_seq_len = rope_md.max_seq_len = runner::LengthBucket(attn_md.max_seq_len);
  for (int k = 0; k < steps; ++k) GANNET_RETURN_IF_ERROR(UploadDraws(seqs, bucket, k));
  return graphs.Run(
      be, {bucket, steps, attn_md.max_seq_len, 0, 0},
      [&]() -> absl::Status {
        for (int k = 0; k < steps; ++k) {
          GANNET_RETURN_IF_ERROR(Step(bucket, k, attn_md, rope_md));
          GANNET_RETURN_IF_ERROR(be->Sample(logits.Rows(0, bucket), params[k].Rows(0, bucket),
                                            Tensor(), ids[k].Rows(0, bucket)));
        }
        return absl::OkStatus();
      },
      "drafter: round (sequences, steps, length)");
}

absl::Status Drafter::Impl::RoundWithHostDraws(std::span<const DraftSeq> seqs, int steps,
                                               DraftResult* result) {
  const int n = static_cast<int>(seqs.size());
  const int64_t vocab = config.text.vocab_size;
  backend::StepMetadata attn_md, rope_md;
  GANNET_RETURN_IF_ERROR(Prepare(seqs, &attn_md, &rope_md));
  for (int k = 0; k < steps; ++k) {
    GANNET_RETURN_IF_ERROR(Step(n, k, attn_md, rope_md));
    GANNET_RETURN_IF_ERROR(UploadDraws(seqs, n, k));
    const Tensor ids_k = ids[k].Rows(0, n);
    GANNET_RETURN_IF_ERROR(be->Sample(logits.Rows(0, n), params[k].Rows(0, n), Tensor(), ids_k));
    // Rows whose drafts are verified by rejection sampling are drawn on the host, from exactly
    // the logits the verifier will see (the device draw could differ in the last bit of an
    // exp() at a filter boundary, and q(d) must be the distribution d came from).
    for (int i = 0; i < n; ++i) {
      if (!seqs[i].want_logits) continue;
      std::vector<float>& dst = result->logits[i];
      dst.resize(static_cast<size_t>(steps) * vocab);
      float* row = dst.data() + k * vocab;
      GANNET_RETURN_IF_ERROR(be->CopyToHost(row, logits.Rows(i, 1).data, vocab * sizeof(float)));
      const int32_t token = sampling::DrawToken(row, vocab, seqs[i].draws[k]);
      GANNET_RETURN_IF_ERROR(
          be->CopyToDevice(static_cast<int32_t*>(ids_k.data) + i, &token, sizeof(token)));
    }
  }
  return absl::OkStatus();
}

absl::Status Drafter::Impl::DrawFullRows(std::span<const DraftSeq> seqs, int k, DraftResult* result,
                                         std::vector<int32_t>* tokens) {
  const int n = static_cast<int>(seqs.size());
  const int64_t vocab = config.text.vocab_size;
  GANNET_RETURN_IF_ERROR(UploadDraws(seqs, n, k));
  const Tensor ids_k = ids[k].Rows(0, n);
  GANNET_RETURN_IF_ERROR(be->Sample(logits.Rows(0, n), params[k].Rows(0, n), Tensor(), ids_k));
  GANNET_RETURN_IF_ERROR(be->CopyToHost(tokens->data(), ids_k.data, n * sizeof(int32_t)));
  for (int i = 0; i < n; ++i) {
    if (!seqs[i].want_logits) continue;
    std::vector<float>& dst = result->logits[i];
    dst.resize(static_cast<size_t>(result->tokens[i].size()) * vocab);
    float* row = dst.data() + k * vocab;
    GANNET_RETURN_IF_ERROR(be->CopyToHost(row, logits.Rows(i, 1).data, vocab * sizeof(float)));
    (*tokens)[i] = sampling::DrawToken(row, vocab, seqs[i].draws[k]);
  }
  return absl::OkStatus();
}

absl::Status Drafter::Impl::RoundOfRank(std::span<const DraftSeq> seqs, int steps,
                                        DraftResult* result) {
  const int n = static_cast<int>(seqs.size());
  const int world = tp->world_size();
  const bool dense = !config.use_ordered_embeddings;
  // Rows that all take the arg-max need only the ranks' winners (8 bytes a row per rank), as the
  // target's greedy steps; other rounds gather the dense head's shards into full rows.
  bool picks_only = dense;
  for (int i = 0; i < n && picks_only; ++i) {
    picks_only = !seqs[i].want_logits;
    for (int k = 0; k < steps && picks_only; ++k) picks_only = seqs[i].draws[k].greedy();
  }
  backend::StepMetadata attn_md, rope_md;
  GANNET_RETURN_IF_ERROR(Prepare(seqs, &attn_md, &rope_md));
  std::vector<int32_t> tokens(n), local(n);
  for (int k = 0; k < steps; ++k) {
    GANNET_RETURN_IF_ERROR(Step(n, k, attn_md, rope_md));
    if (picks_only) {
      // The target's best-pick exchange (runner::TpHooks): each row's full arg-max.
      GANNET_RETURN_IF_ERROR(tp->ExchangeBestPicks(*be, HeadBlock(n), Tensor(), vocab_begin,
                                                   pick_blocks, picks.Rows(0, n)));
      GANNET_RETURN_IF_ERROR(tp->ReadBestPicks(*be, picks, tokens));
    } else {
      if (dense) GANNET_RETURN_IF_ERROR(tp->GatherVocabShards(HeadBlocks(n), logits.Rows(0, n)));
      GANNET_RETURN_IF_ERROR(DrawFullRows(seqs, k, result, &tokens));
    }
    const int64_t shard = target.text.vocab_size / world;
    for (int i = 0; i < n; ++i) {
      result->tokens[i][k] = tokens[i];
      local[i] = tokens[i] >= vocab_begin && tokens[i] < vocab_begin + shard
                     ? tokens[i] - static_cast<int32_t>(vocab_begin)
                     : -1;
    }
    if (k + 1 < steps) {
      GANNET_RETURN_IF_ERROR(be->CopyToDevice(local_ids.data, local.data(), n * sizeof(int32_t)));
    }
  }
  return absl::OkStatus();
}

absl::Status Drafter::FirstStep(std::span<const DraftSeq> seqs, std::vector<float>* logits,
                                std::vector<float>* next_hidden) {
  Impl& m = *impl_;
  const int n = static_cast<int>(seqs.size());
  if (n == 0 || n > m.options.max_seqs) return InvalidArgumentError("drafter: {} sequences", n);
  backend::StepMetadata attn_md, rope_md;
  GANNET_RETURN_IF_ERROR(m.Prepare(seqs, &attn_md, &rope_md));
  GANNET_RETURN_IF_ERROR(m.Step(n, 0, attn_md, rope_md));
  if (m.tp != nullptr && !m.config.use_ordered_embeddings) {
    GANNET_RETURN_IF_ERROR(m.tp->GatherVocabShards(m.HeadBlocks(n), m.logits.Rows(0, n)));
  }
  const int64_t vocab = m.config.text.vocab_size, hb = m.config.backbone_hidden_size;
  logits->resize(static_cast<size_t>(n) * vocab);
  GANNET_RETURN_IF_ERROR(m.be->CopyToHost(logits->data(), m.logits.data, logits->size() * 4));
  // The next hidden state in the activation type, widened to f32.
  const Tensor hid = m.hid[0].Rows(0, n);
  std::vector<char> raw(static_cast<size_t>(n) * hb * hid.elem_bytes());
  GANNET_RETURN_IF_ERROR(m.be->CopyToHost(raw.data(), hid.data, raw.size()));
  next_hidden->resize(static_cast<size_t>(n) * hb);
  for (size_t i = 0; i < next_hidden->size(); ++i) {
    if (hid.dtype == DType::kF32) {
      std::memcpy(&(*next_hidden)[i], raw.data() + i * 4, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, raw.data() + i * 2, 2);
      (*next_hidden)[i] = Bf16ToFloat(b);
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::spec

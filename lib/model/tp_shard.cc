#include "lib/model/tp_shard.h"

#include <cstring>

#include "lib/common/status.h"

namespace gannet::model {

namespace {

int LocalKvHeads(int num_kv_heads, int world) { return std::max(1, num_kv_heads / world); }

absl::Status CheckDivides(int64_t value, int world, std::string_view what) {
  if (value % world != 0) {
    return InvalidArgumentError("tensor parallel size {} does not divide {} ({})", world, what,
                                value);
  }
  return absl::OkStatus();
}

// A rank's part of one tensor: `len` indices from `begin` along dimension `dim`.
struct Slice {
  int dim = -1;  // -1: the whole tensor (replicated)
  int64_t begin = 0, len = 0;
};

}  // namespace

MoeSplit DefaultMoeSplit(const ModelConfig& config, int world) {
  // gannet-moe-split-bench on an H200 (26B-A4B, one layer, uniform routing; docs/results-log/tp.md
  // "MoE split"): at 2 ranks whole experts per rank tie or win at every token count (0.80-1.03x
  // the intermediate split's time). At 4 and 8 ranks, steps of 64 tokens and more are 1.2-2x
  // faster with whole experts (the intermediate split leaves each expert 176 or 88 rows for
  // 64-row tiles) and steps of 1-16 tokens 5-60% slower (2-13 us a layer: the busiest rank holds
  // more than 1/N of a token's experts); the batched steps gain far more than the small ones lose.
  if (!config.text.enable_moe_block || world < 2) return MoeSplit::kIntermediate;
  if (config.text.num_experts % world != 0) return MoeSplit::kIntermediate;
  return MoeSplit::kExperts;
}

std::string_view MoeSplitName(MoeSplit split) {
  switch (split) {
    case MoeSplit::kAuto:
      return "auto";
    case MoeSplit::kIntermediate:
      return "intermediate";
    case MoeSplit::kExperts:
      return "experts";
  }
  return "?";
}

namespace {
MoeSplit Resolve(const ModelConfig& config, int world, MoeSplit moe) {
  return moe == MoeSplit::kAuto ? DefaultMoeSplit(config, world) : moe;
}
}  // namespace

absl::Status CheckTpShardable(const ModelConfig& config, int world, MoeSplit moe) {
  if (world < 1 || world > kMaxTensorParallel) {
    return InvalidArgumentError("tensor parallel size must be 1 to {}, got {}", kMaxTensorParallel,
                                world);
  }
  const TextConfig& c = config.text;
  GANNET_RETURN_IF_ERROR(CheckDivides(c.num_attention_heads, world, "num_attention_heads"));
  GANNET_RETURN_IF_ERROR(CheckDivides(c.vocab_size, world, "vocab_size"));
  GANNET_RETURN_IF_ERROR(CheckDivides(c.intermediate_size, world, "intermediate_size"));
  if (c.enable_moe_block) {
    if (Resolve(config, world, moe) == MoeSplit::kExperts) {
      GANNET_RETURN_IF_ERROR(CheckDivides(c.num_experts, world, "num_experts"));
    } else {
      GANNET_RETURN_IF_ERROR(CheckDivides(c.moe_intermediate_size, world, "moe_intermediate_size"));
    }
  }
  for (int kv : {c.num_key_value_heads, c.FullNumKvHeads()}) {
    if (kv % world != 0 && world % kv != 0) {
      return InvalidArgumentError(
          "tensor parallel size {} and {} KV heads: one must divide the other (KV heads are split, "
          "or replicated when there are fewer than ranks)",
          world, kv);
    }
  }
  return absl::OkStatus();
}

ModelConfig ShardConfig(const ModelConfig& config, int world, MoeSplit moe) {
  ModelConfig s = config;
  TextConfig& c = s.text;
  c.num_attention_heads /= world;
  c.num_key_value_heads = LocalKvHeads(config.text.num_key_value_heads, world);
  if (c.num_global_key_value_heads > 0) {
    c.num_global_key_value_heads = LocalKvHeads(config.text.num_global_key_value_heads, world);
  }
  c.intermediate_size /= world;
  if (c.enable_moe_block && Resolve(config, world, moe) == MoeSplit::kExperts) {
    c.local_experts = config.text.num_experts / world;
  } else {
    c.moe_intermediate_size /= world;
  }
  return s;
}

int64_t VocabShardSize(const ModelConfig& config, int world) {
  return config.text.vocab_size / world;
}

int KvHeadBegin(int num_kv_heads, TpShard shard) {
  if (num_kv_heads >= shard.world) return shard.rank * (num_kv_heads / shard.world);
  return shard.rank * num_kv_heads / shard.world;  // the KV head this rank's q heads read
}

namespace {

absl::StatusOr<WeightView> Take(const WeightView& v, const Slice& s, TpShard shard,
                                ShardedWeights* out) {
  if (!v.present() || s.dim < 0) return v;
  if (s.dim >= static_cast<int>(v.shape.size()) || s.begin < 0 ||
      s.begin + s.len > v.shape[s.dim]) {
    return InternalError("tensor parallel: slice [{}, {}) of dim {} outside weight '{}'", s.begin,
                         s.begin + s.len, s.dim, v.name);
  }
  if (v.quantize_at_load() && s.dim == static_cast<int>(v.shape.size()) - 1) {
    // A row-parallel shard of a weight quantized at load: its groups of inputs must not straddle
    // ranks, so that every rank quantizes exactly the groups one device would.
    const int64_t g = v.format.group_size;
    if (g == v.shape.back()) {
      return InvalidArgumentError(
          "tensor parallelism: '{}' is quantized per channel at load, and {} ranks split its "
          "inputs (each would scale a different channel); use a group size (int4-g128)",
          v.name, shard.world);
    }
    if (s.begin % g != 0 || s.len % g != 0) {
      return InvalidArgumentError(
          "tensor parallelism: '{}' splits its {} inputs into {} per rank, not a multiple of the "
          "int4 group of {}",
          v.name, v.shape.back(), s.len, g);
    }
  }
  WeightView r = v;
  r.shape[s.dim] = s.len;
  if (v.synthetic) {
    r.name = fmt::format("{}#tp{}of{}", v.name, shard.rank, shard.world);
    return r;
  }
  const int64_t elem = DTypeBits(v.dtype) / 8;
  int64_t outer = 1, inner = elem;
  for (int d = 0; d < s.dim; ++d) outer *= v.shape[d];
  for (size_t d = s.dim + 1; d < v.shape.size(); ++d) inner *= v.shape[d];
  const auto* src = static_cast<const uint8_t*>(v.data);
  if (outer == 1) {  // contiguous: a view
    r.data = src + s.begin * inner;
    return r;
  }
  const int64_t chunk = s.len * inner, stride = v.shape[s.dim] * inner;
  auto buf = std::make_unique<uint8_t[]>(static_cast<size_t>(outer * chunk));
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(buf.get() + o * chunk, src + o * stride + s.begin * inner, chunk);
  }
  r.data = buf.get();
  out->copied_bytes += outer * chunk;
  out->storage.push_back(std::move(buf));
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedWeights>> ShardWeights(const ModelConfig& config,
                                                             const ModelWeights& w, TpShard shard) {
  GANNET_RETURN_IF_ERROR(CheckTpShardable(config, shard.world, shard.moe));
  for (const WeightView* view : AllViews(w)) {
    // Shards slice rows and columns of plain tensors (and of dense values a backend quantizes at
    // load: QuantizeAtLoad); packed int4 and its scales are not sliced yet (issue 53).
    if ((view->quantized() && !view->quantize_at_load()) || !view->pieces.empty()) {
      return UnimplementedError(
          "tensor parallelism: '{}' is {}; only plain bf16/f16/f32 weights "
          "are sharded so far",
          view->name,
          view->quantized() ? "quantized (" + WeightFormatName(view->format) + ")"
                            : std::string("gathered from per-expert modules"));
    }
  }
  if (shard.rank < 0 || shard.rank >= shard.world) {
    return InvalidArgumentError("tensor parallel rank {} outside [0, {})", shard.rank, shard.world);
  }
  const TextConfig& c = config.text;
  const int world = shard.world;
  auto out = std::make_unique<ShardedWeights>();
  ModelWeights& v = out->views;
  v = w;
  const int64_t vs = VocabShardSize(config, world);
  const Slice vocab{0, shard.rank * vs, vs};
  // An assistant with the centroid head (E2B/E4B) keeps its whole token table: the head scores
  // the top clusters' tokens, which scatter over every vocabulary shard (see the header).
  const bool whole_table = config.kind == ModelKind::kAssistant && config.use_ordered_embeddings;
  GANNET_ASSIGN_OR_RETURN(v.embed_tokens,
                          Take(w.embed_tokens, whole_table ? Slice{} : vocab, shard, out.get()));
  GANNET_ASSIGN_OR_RETURN(v.lm_head, Take(w.lm_head, vocab, shard, out.get()));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    LayerWeights& o = v.layers[l];
    const int64_t d = c.LayerHeadDim(l);
    const int64_t nq = c.num_attention_heads / world;
    const int kv = c.LayerNumKvHeads(l);
    const int64_t nkv = LocalKvHeads(kv, world);
    const Slice q_rows{0, shard.rank * nq * d, nq * d};
    const Slice kv_rows{0, KvHeadBegin(kv, shard) * d, nkv * d};
    GANNET_ASSIGN_OR_RETURN(o.q_proj, Take(lw.q_proj, q_rows, shard, out.get()));
    GANNET_ASSIGN_OR_RETURN(o.k_proj, Take(lw.k_proj, kv_rows, shard, out.get()));
    GANNET_ASSIGN_OR_RETURN(o.v_proj, Take(lw.v_proj, kv_rows, shard, out.get()));
    GANNET_ASSIGN_OR_RETURN(o.o_proj,
                            Take(lw.o_proj, {1, q_rows.begin, q_rows.len}, shard, out.get()));
    if (lw.gate_proj.present()) {
      const int64_t I = lw.gate_proj.dim(0) / world;
      const Slice rows{0, shard.rank * I, I};
      GANNET_ASSIGN_OR_RETURN(o.gate_proj, Take(lw.gate_proj, rows, shard, out.get()));
      GANNET_ASSIGN_OR_RETURN(o.up_proj, Take(lw.up_proj, rows, shard, out.get()));
      GANNET_ASSIGN_OR_RETURN(o.down_proj,
                              Take(lw.down_proj, {1, rows.begin, rows.len}, shard, out.get()));
    }
    if (lw.experts_gate_up.present() && Resolve(config, world, shard.moe) == MoeSplit::kExperts) {
      // Expert parallelism: a contiguous block of whole experts, rows of dim 0 (views).
      const int64_t El = c.num_experts / world;
      const Slice block{0, shard.rank * El, El};
      GANNET_ASSIGN_OR_RETURN(o.experts_gate_up, Take(lw.experts_gate_up, block, shard, out.get()));
      GANNET_ASSIGN_OR_RETURN(o.experts_down, Take(lw.experts_down, block, shard, out.get()));
    } else if (lw.experts_gate_up.present()) {
      // [E, 2I, H]: the rank's gate rows and up rows of every expert, as [E, 2 * I/world, H].
      const WeightView& src = lw.experts_gate_up;
      const int64_t I = src.dim(1) / 2, Il = I / world;
      if (src.synthetic) {  // only the name and shape matter (Take names the shard)
        GANNET_ASSIGN_OR_RETURN(o.experts_gate_up,
                                Take(src, {1, shard.rank * Il, 2 * Il}, shard, out.get()));
      } else {
        // Per expert [gate_e; up_e], copied straight from the checkpoint.
        const int64_t E = src.dim(0), row = src.dim(2) * (DTypeBits(src.dtype) / 8);
        const int64_t block = Il * row;
        const auto* from = static_cast<const uint8_t*>(src.data);
        auto buf = std::make_unique<uint8_t[]>(static_cast<size_t>(2 * E * block));
        for (int64_t e = 0; e < E; ++e) {
          std::memcpy(buf.get() + 2 * e * block, from + (e * 2 * I + shard.rank * Il) * row, block);
          std::memcpy(buf.get() + (2 * e + 1) * block,
                      from + (e * 2 * I + I + shard.rank * Il) * row, block);
        }
        WeightView gu = src;
        gu.shape[1] = 2 * Il;
        gu.data = buf.get();
        out->copied_bytes += 2 * E * block;
        out->storage.push_back(std::move(buf));
        o.experts_gate_up = gu;
      }
      GANNET_ASSIGN_OR_RETURN(o.experts_down,
                              Take(lw.experts_down, {2, shard.rank * Il, Il}, shard, out.get()));
    }
  }
  return out;
}

int64_t ShardParameterCount(const ModelConfig& config, int world, MoeSplit moe) {
  // The shard geometry's tensors, less the vocabulary rows of the embedding (and of an untied LM
  // head) that other ranks hold.
  const TextConfig& c = config.text;
  const int64_t others = c.vocab_size - VocabShardSize(config, world);
  return CountParameters(ShardConfig(config, world, moe)) -
         others * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);
}

}  // namespace gannet::model

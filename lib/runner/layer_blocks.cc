#include "lib/runner/layer_blocks.h"

#include "lib/common/status.h"

namespace gannet::runner {

using backend::Tensor;

absl::Status AttendAndProject(backend::Backend* be, const model::TextConfig& c, int layer, Tensor q,
                              backend::LayerKvView kv, const backend::StepMetadata& md, Tensor attn,
                              Tensor o_proj, Tensor out) {
  const int64_t n = q.dim(0);
  const bool sliding = c.is_sliding(layer);
  const int d = c.LayerHeadDim(layer), nq = c.num_attention_heads;
  if (kv.group != (sliding ? backend::kSlidingGroup : backend::kFullGroup)) {
    return InternalError("layer {} ({}) attends into KV of group {}", layer,
                         sliding ? "sliding" : "full", kv.group);
  }
  backend::AttentionArgs at;
  at.q = q;
  at.kv = kv;
  at.out = Tensor::Make(attn.data, attn.dtype, {n, nq, d});
  at.num_q_heads = nq;
  at.num_kv_heads = c.LayerNumKvHeads(layer);
  at.head_dim = d;
  at.window = sliding ? c.sliding_window : 0;
  at.scale = 1.0f;  // Gemma-4 normalises q and k instead of scaling
  // HF Gemma-4 ("vision" models) overlays the image blocks on sliding layers only; full layers
  // stay causal (modeling_gemma4.py: create_masks_for_vision_model).
  at.image_block_mask = sliding && md.image_block != nullptr;
  at.meta = &md;
  GANNET_RETURN_IF_ERROR(be->Attention(at));
  return be->Linear(at.out.Reshape({n, static_cast<int64_t>(nq) * d}), o_proj, out);
}

absl::Status GatedMlp(backend::Backend* be, const DeviceLayer& layer, Tensor h, Tensor gate_up,
                      Tensor mlp, Tensor out) {
  const int64_t n = h.dim(0), I = layer.intermediate;
  Tensor gu = gate_up.Rows(0, n).Reshape({n, gate_up.dim(1)}).Cols(0, 2 * I);
  Tensor m = mlp.Rows(0, n).Reshape({n, mlp.dim(1)}).Cols(0, I);
  // The product where the gate/up projection is made (once per element), not in the down
  // projection's GEMV, which would evaluate it in every CTA (docs/results-log/decode.md, session
  // 29).
  GANNET_RETURN_IF_ERROR(be->LinearGeluMul(h, layer.gate_up, gu, m));
  return be->Linear(m, layer.down, out);
}

}  // namespace gannet::runner

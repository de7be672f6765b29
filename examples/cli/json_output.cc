#include "examples/cli/json_output.h"

#include <cmath>

#include "lib/common/json.h"
#include "lib/common/utf8.h"

namespace gannet_cli {
namespace {

using gannet::Json;

Json Num(double d) { return std::isfinite(d) ? Json::Number(d) : Json(); }

Json Ids(const std::vector<int32_t>& ids) {
  Json a = Json::MakeArray();
  for (int32_t id : ids) a.Push(Json::Int(id));
  return a;
}

}  // namespace

std::string ValidUtf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = gannet::Utf8SequenceLength(std::string_view(s).substr(i));
    if (n == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string RequestJson(const RunResult& r, double load_seconds, bool with_logprobs) {
  Json o = Json::MakeObject();
  o.Set("text", Json::String(ValidUtf8(r.text)));
  o.Set("thinking", Json::String(ValidUtf8(r.thinking)));
  o.Set("tokens", Ids(r.tokens));
  o.Set("finish", Json::String(FinishName(r.finish)));
  if (with_logprobs) {
    Json lps = Json::MakeArray();
    for (const TokenLogprobs& t : r.logprobs) {
      Json e = Json::MakeObject();
      e.Set("id", Json::Int(t.id));
      e.Set("logprob", Num(t.logprob));
      Json top = Json::MakeArray();
      for (const auto& [id, lp] : t.top) {
        Json x = Json::MakeObject();
        x.Set("id", Json::Int(id));
        x.Set("logprob", Num(lp));
        top.Push(std::move(x));
      }
      e.Set("top", std::move(top));
      lps.Push(std::move(e));
    }
    o.Set("logprobs", std::move(lps));
  }
  o.Set("prompt_tokens", Json::Int(r.prompt_tokens));
  o.Set("cached_prompt_tokens", Json::Int(r.cached_tokens));
  o.Set("generated_tokens", Json::Int(static_cast<int64_t>(r.tokens.size())));
  if (r.draft_tokens > 0) {
    o.Set("draft_tokens", Json::Int(r.draft_tokens));
    o.Set("accepted_draft_tokens", Json::Int(r.accepted_drafts));
  }
  const double decode_s = (r.total_ms - r.ttft_ms) / 1000.0;
  o.Set("ttft_ms", Num(r.ttft_ms));
  o.Set("tpot_ms", Num(r.tpot_ms()));
  o.Set("total_ms", Num(r.total_ms));
  o.Set("tokens_per_s",
        Num(decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / decode_s : 0.0));
  if (load_seconds >= 0) o.Set("load_s", Num(load_seconds));
  if (r.status != GANNET_OK) {
    Json e = Json::MakeObject();
    e.Set("status", Json::String(gannet_status_string(r.status)));
    e.Set("message", Json::String(ValidUtf8(r.error)));
    o.Set("error", std::move(e));
  }
  return o.Dump();
}

std::string ModelInfoJson(const std::string& model, const gannet_model_info_t& i) {
  Json o = Json::MakeObject();
  o.Set("model", Json::String(ValidUtf8(model)));
  o.Set("model_type", Json::String(i.model_type));
  o.Set("variant", Json::String(i.variant));
  o.Set("dtypes", Json::String(i.dtypes));
  o.Set("num_parameters", Json::Int(i.num_parameters));
  o.Set("weight_bytes", Json::Int(i.weight_bytes));
  o.Set("skipped_tower_bytes", Json::Int(i.skipped_tower_bytes));
  o.Set("num_shards", Json::Int(i.num_shards));
  o.Set("has_tokenizer", Json::Bool(i.has_tokenizer != 0));
  o.Set("num_layers", Json::Int(i.num_layers));
  o.Set("num_sliding_layers", Json::Int(i.num_sliding_layers));
  o.Set("num_full_layers", Json::Int(i.num_full_layers));
  o.Set("num_kv_shared_layers", Json::Int(i.num_kv_shared_layers));
  o.Set("hidden_size", Json::Int(i.hidden_size));
  o.Set("vocab_size", Json::Int(i.vocab_size));
  o.Set("max_position_embeddings", Json::Int(i.max_position_embeddings));
  o.Set("sliding_window", Json::Int(i.sliding_window));
  o.Set("num_attention_heads", Json::Int(i.num_attention_heads));
  o.Set("num_kv_heads", Json::Int(i.num_kv_heads));
  o.Set("num_full_kv_heads", Json::Int(i.num_full_kv_heads));
  o.Set("head_dim", Json::Int(i.head_dim));
  o.Set("full_head_dim", Json::Int(i.full_head_dim));
  o.Set("num_experts", Json::Int(i.num_experts));
  o.Set("top_k_experts", Json::Int(i.top_k_experts));
  o.Set("kv_bytes_per_token_sliding", Json::Int(i.kv_bytes_per_token_sliding));
  o.Set("kv_bytes_per_token_full", Json::Int(i.kv_bytes_per_token_full));
  o.Set("weight_format", Json::String(i.weight_format));
  o.Set("weight_bytes_attention", Json::Int(i.weight_bytes_attention));
  o.Set("weight_bytes_mlp", Json::Int(i.weight_bytes_mlp));
  o.Set("weight_bytes_experts", Json::Int(i.weight_bytes_experts));
  o.Set("weight_bytes_embeddings", Json::Int(i.weight_bytes_embeddings));
  o.Set("weight_bytes_other", Json::Int(i.weight_bytes_other));
  o.Set("kept_plain", Json::String(i.kept_plain));
  return o.Dump();
}

std::string TokensJson(const std::vector<int32_t>& ids, const std::vector<std::string>* pieces) {
  Json o = Json::MakeObject();
  o.Set("ids", Ids(ids));
  if (pieces != nullptr) {
    Json p = Json::MakeArray();
    for (const std::string& s : *pieces) p.Push(Json::String(ValidUtf8(s)));
    o.Set("pieces", std::move(p));
  }
  return o.Dump();
}

}  // namespace gannet_cli

#include "lib/tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "lib/common/file_util.h"
#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/tokenizer/added_vocabulary.h"
#include "lib/tokenizer/bpe_model.h"
#include "lib/tokenizer/decoder.h"
#include "lib/tokenizer/json_fields.h"
#include "lib/tokenizer/normalizer.h"
#include "lib/tokenizer/pre_tokenizer.h"
#include "lib/tokenizer/unicode_text.h"

namespace gannet::tokenizer {

using internal::JsonWhere;

struct Tokenizer::Impl {
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  DecoderChain decoder;
  AddedVocabulary added;
  // The post-processor's "single" template around $A (add_special_tokens only).
  std::vector<int32_t> prefix_ids, suffix_ids;
  std::vector<bool> held_byte_token;  // by id; see IsHeldByteToken
};

namespace {

const Json& FieldOrNull(const Json& root, std::string_view key) {
  static const Json kNull;
  const Json* v = root.Find(key);
  return v == nullptr ? kNull : *v;
}

// One entry of "added_tokens" with the id the file gives it (checked once the model is read).
struct FileAddedToken {
  AddedToken token;
  int64_t file_id = 0;
};

absl::StatusOr<FileAddedToken> ReadAddedToken(const Json& j, const JsonWhere& w) {
  GANNET_RETURN_IF_ERROR(internal::ExpectObject(j, w));
  FileAddedToken f;
  AddedToken& t = f.token;
  GANNET_ASSIGN_OR_RETURN(f.file_id, internal::GetInt(j, "id", w));
  GANNET_ASSIGN_OR_RETURN(t.content, internal::GetString(j, "content", w));
  GANNET_ASSIGN_OR_RETURN(t.special, internal::GetBool(j, "special", false, w));
  GANNET_ASSIGN_OR_RETURN(t.normalized, internal::GetBool(j, "normalized", true, w));
  GANNET_ASSIGN_OR_RETURN(t.lstrip, internal::GetBool(j, "lstrip", false, w));
  GANNET_ASSIGN_OR_RETURN(t.rstrip, internal::GetBool(j, "rstrip", false, w));
  GANNET_ASSIGN_OR_RETURN(t.single_word, internal::GetBool(j, "single_word", false, w));
  return f;
}

absl::StatusOr<std::vector<AddedToken>> ResolveAddedTokens(std::vector<FileAddedToken> list,
                                                           const BpeModel& model,
                                                           const JsonWhere& where) {
  std::vector<AddedToken> tokens;
  // Ids are assigned the way HF tokenizers assigns them on load (a model id when the content is
  // in the vocabulary, else sequentially after it); a file that disagrees is rejected.
  int64_t max_added = -1;
  absl::flat_hash_map<std::string, int32_t> seen;  // content -> id
  const int64_t model_size = static_cast<int64_t>(model.num_entries());
  for (size_t i = 0; i < list.size(); ++i) {
    JsonWhere w = where.Index(i);
    AddedToken& t = list[i].token;
    const int64_t file_id = list[i].file_id;
    auto dup = seen.find(t.content);
    int64_t id;
    if (auto model_id = model.TokenToId(t.content)) {
      id = *model_id;
    } else if (dup != seen.end()) {
      id = dup->second;
    } else {
      id = max_added < 0 ? model_size : std::max(max_added + 1, model_size);
    }
    if (file_id != id) {
      return w.Error(
          fmt::format("token \"{}\" has id {} but loads as id {} (its model vocab id "
                      "or the next free id after the vocabulary)",
                      t.content, file_id, id));
    }
    if (id >= BpeModel::kMaxTokenId) return w.Error("id out of range");
    t.id = static_cast<int32_t>(id);
    max_added = std::max(max_added, id);
    if (dup == seen.end()) {
      seen.emplace(t.content, t.id);
      tokens.push_back(std::move(t));
    }
  }
  return tokens;
}

// Reads a TemplateProcessing post-processor's "single" template into the ids around $A.
absl::Status ParsePostProcessor(const Json& json, const JsonWhere& where,
                                std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  if (json.is_null()) return absl::OkStatus();
  GANNET_ASSIGN_OR_RETURN(std::string type, internal::GetType(json, where));
  if (type != "TemplateProcessing") {
    return UnimplementedError("{}: {}: post_processor type '{}' is not supported", where.source,
                              where.path, type);
  }
  const Json* single = json.Find("single");
  JsonWhere sw = where.Child("single");
  if (single == nullptr || !single->is_array()) return sw.Error("must be an array");
  const Json* specials = json.Find("special_tokens");
  JsonWhere tw = where.Child("special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single->AsArray().size(); ++i) {
    const Json& item = single->AsArray()[i];
    JsonWhere iw = sw.Index(i);
    GANNET_RETURN_IF_ERROR(internal::ExpectObject(item, iw));
    if (const Json* seq = item.Find("Sequence")) {
      GANNET_RETURN_IF_ERROR(internal::ExpectObject(*seq, iw.Child("Sequence")));
      GANNET_ASSIGN_OR_RETURN(std::string name,
                              internal::GetString(*seq, "id", iw.Child("Sequence")));
      if (name != "A" || seen_sequence) return iw.Error("the single template must contain $A once");
      seen_sequence = true;
      continue;
    }
    const Json* special = item.Find("SpecialToken");
    if (special == nullptr) return iw.Error("expected a Sequence or SpecialToken item");
    GANNET_ASSIGN_OR_RETURN(std::string name,
                            internal::GetString(*special, "id", iw.Child("SpecialToken")));
    const Json* entry = specials == nullptr ? nullptr : specials->Find(name);
    if (entry == nullptr) return tw.Error(fmt::format("no entry for \"{}\"", name));
    const Json* ids = entry->Find("ids");
    if (ids == nullptr || !ids->is_array()) return tw.Child(name).Error("ids must be an array");
    for (const Json& id : ids->AsArray()) {
      if (!id.is_int() || id.AsInt() < 0 || id.AsInt() >= BpeModel::kMaxTokenId) {
        return tw.Child(name).Error("ids must be token ids");
      }
      (seen_sequence ? suffix : prefix)->push_back(static_cast<int32_t>(id.AsInt()));
    }
  }
  if (!seen_sequence) return sw.Error("the single template has no $A");
  return absl::OkStatus();
}

}  // namespace

namespace internal {

// What a tokenizer.json holds, gathered member by member (Json::Stream, or Json::Walk over a
// tree): the bulk (model.vocab, model.merges, added_tokens) goes straight into compact form, and
// only the small members are kept as JSON. So a file costs a small multiple of its bytes (issue
// 56: a whole tree of Gemma-4's 32 MB file peaked at ~1.3 GB).
class TokenizerJsonReader {
 public:
  // The most values one kept member (a normalizer, a decoder, one added token) may have: real
  // ones have tens; this keeps any one of them under ~16 MB of tree.
  static constexpr int64_t kMaxValuesPerMember = 1 << 16;

  explicit TokenizerJsonReader(std::string_view source) : where_{source, ""} {
    handler_.descend = [this](const std::vector<std::string>& path, Json::Type type) {
      return Descend(path, type);
    };
    handler_.value = [this](const std::vector<std::string>& path, Json value) {
      return Value(path, std::move(value));
    };
  }
  const Json::StreamHandler& handler() const { return handler_; }

 private:
  bool Descend(const std::vector<std::string>& path, Json::Type type) {
    const bool object = type == Json::Type::kObject;
    if (path.size() == 1 && path[0] == "model") {
      return object && NewKey(&top_keys_, "model").ok() && (has_model_ = true);
    }
    if (path.size() == 1 && path[0] == "added_tokens") {
      return !object && NewKey(&top_keys_, "added_tokens").ok();
    }
    if (path.size() == 2 && path[0] == "model" && (path[1] == "vocab" || path[1] == "merges")) {
      // Both kinds of container stream, so a wrong one costs no memory; only an object vocab
      // and an array of merges count (a non-BPE model's vocab is reported as such in Finish).
      if (!NewKey(&model_keys_, path[1]).ok()) return false;
      (path[1] == "vocab" ? has_vocab_ : has_merges_) = object == (path[1] == "vocab");
      return true;
    }
    return false;
  }

  // Duplicate keys of the streamed objects (the tree reader refuses them in any object).
  absl::Status NewKey(absl::flat_hash_map<std::string, bool>* seen, const std::string& key) {
    if (!seen->emplace(key, true).second) {
      return where_.Error(fmt::format("duplicate key \"{}\"", EscapeForMessage(key)));
    }
    return absl::OkStatus();
  }

  absl::Status Value(const std::vector<std::string>& path, Json value) {
    const std::string& key = path.back();
    if (path.size() == 1) {
      GANNET_RETURN_IF_ERROR(NewKey(&top_keys_, key));
      if (key == "model") return internal::ExpectObject(value, where_.Child("model"));
      if (key == "added_tokens") {
        if (value.is_null()) return absl::OkStatus();
        return where_.Child(key).Error("must be an array");
      }
      if (key == "normalizer" || key == "pre_tokenizer" || key == "decoder" ||
          key == "post_processor") {
        kept_.Set(key, std::move(value));
      }
      return absl::OkStatus();  // other members (version, truncation, padding) are not used
    }
    if (path[0] == "added_tokens") {
      GANNET_ASSIGN_OR_RETURN(
          FileAddedToken t,
          ReadAddedToken(value, where_.Child("added_tokens").Index(added_.size())));
      added_.push_back(std::move(t));
      return absl::OkStatus();
    }
    // Under "model".
    if (path.size() == 2) {
      GANNET_RETURN_IF_ERROR(NewKey(&model_keys_, key));
      // A vocab or merges that is not a container: absent for Finish's checks.
      if (key != "vocab" && key != "merges") model_options_.Set(key, std::move(value));
      return absl::OkStatus();
    }
    if (path[1] == "vocab") {
      if (has_vocab_) bpe_.AddVocab(key, value);
      return absl::OkStatus();
    }
    if (!has_merges_) return absl::OkStatus();
    return bpe_.AddMerge(value, where_.Child("model").Child("merges").Index(num_merges_++));
  }

  JsonWhere where_;
  Json::StreamHandler handler_;
  absl::flat_hash_map<std::string, bool> top_keys_, model_keys_;
  bool has_model_ = false, has_vocab_ = false, has_merges_ = false;
  Json kept_ = Json::MakeObject();           // normalizer, pre_tokenizer, decoder, post_processor
  Json model_options_ = Json::MakeObject();  // the model's members but vocab and merges
  BpeModel::Builder bpe_;
  size_t num_merges_ = 0;
  std::vector<FileAddedToken> added_;
  friend class gannet::tokenizer::Tokenizer;
};

}  // namespace internal

using internal::TokenizerJsonReader;

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  GANNET_ASSIGN_OR_RETURN(std::string text,
                          ReadFileToString(path, kMaxTokenizerJsonBytes, "tokenizer.json"));
  return FromJson(text, path);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json_text,
                                                               std::string_view source) {
  TokenizerJsonReader reader(source);
  absl::Status st =
      Json::Stream(json_text, TokenizerJsonReader::kMaxValuesPerMember, reader.handler());
  // JSON syntax errors name the line and column; the reader's own errors name the file already.
  if (!st.ok())
    return absl::StartsWith(st.message(), "JSON ") ? Annotate(st, std::string(source)) : st;
  return FromReader(reader);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromParsedJson(const Json& root,
                                                                     std::string_view source) {
  JsonWhere where{source, ""};
  GANNET_RETURN_IF_ERROR(internal::ExpectObject(root, where));
  TokenizerJsonReader reader(source);
  GANNET_RETURN_IF_ERROR(root.Walk(reader.handler()));
  return FromReader(reader);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromReader(TokenizerJsonReader& reader) {
  const JsonWhere& where = reader.where_;
  const std::string_view source = where.source;
  auto impl = std::make_unique<Impl>();
  const Json& root = reader.kept_;
  const Json* model = &reader.model_options_;
  JsonWhere mw = where.Child("model");
  if (!reader.has_model_) return mw.Error("missing");
  const Json* type = model->Find("type");
  if (type != nullptr && !(type->is_string() && type->AsString() == "BPE")) {
    return UnimplementedError("{}: model.type: unknown model type {} (only BPE is supported)",
                              source, type->Dump());
  }
  if (type == nullptr && !(reader.has_vocab_ && reader.has_merges_)) {
    return mw.Error("no type, and not a BPE model (vocab + merges)");
  }
  GANNET_ASSIGN_OR_RETURN(impl->model,
                          reader.bpe_.Finish(*model, reader.has_vocab_, reader.has_merges_, mw));
  GANNET_ASSIGN_OR_RETURN(impl->normalizer, ParseNormalizer(FieldOrNull(root, "normalizer"),
                                                            where.Child("normalizer")));
  GANNET_ASSIGN_OR_RETURN(impl->pre_tokenizer, ParsePreTokenizer(FieldOrNull(root, "pre_tokenizer"),
                                                                 where.Child("pre_tokenizer")));
  GANNET_ASSIGN_OR_RETURN(
      impl->decoder, DecoderChain::Parse(FieldOrNull(root, "decoder"), where.Child("decoder")));
  GANNET_RETURN_IF_ERROR(ParsePostProcessor(FieldOrNull(root, "post_processor"),
                                            where.Child("post_processor"), &impl->prefix_ids,
                                            &impl->suffix_ids));

  GANNET_ASSIGN_OR_RETURN(
      std::vector<AddedToken> added,
      ResolveAddedTokens(std::move(reader.added_), *impl->model, where.Child("added_tokens")));
  for (AddedToken& t : added) {
    t.normalized_content = t.content;
    if (t.normalized && impl->normalizer != nullptr) {
      impl->normalizer->Normalize(&t.normalized_content);
    }
  }
  impl->added = AddedVocabulary(std::move(added));

  int32_t vocab_size = impl->model->id_limit();
  for (const AddedToken& t : impl->added.tokens()) vocab_size = std::max(vocab_size, t.id + 1);
  for (const auto* list : {&impl->prefix_ids, &impl->suffix_ids}) {
    for (int32_t id : *list) {
      if (id >= vocab_size) {
        return where.Child("post_processor")
            .Error(fmt::format("special token id {} is outside the vocabulary", id));
      }
    }
  }

  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(impl)));
  tok->vocab_size_ = vocab_size;
  Impl& im = *tok->impl_;
  im.held_byte_token.assign(vocab_size, false);
  for (int32_t id = 0; id < vocab_size; ++id) {
    bool special;
    const std::string* s = tok->TokenString(id, &special);
    if (s != nullptr) {
      im.held_byte_token[id] = im.decoder.IsHeldByteToken(*s);
      tok->max_token_bytes_ = std::max<int64_t>(tok->max_token_bytes_, s->size());
    }
  }
  // A normalizer that shortens text, or an added token that swallows the whitespace beside it,
  // lets a token stand for more input than its string: scale the bound, or drop it (0: none).
  const int64_t shrink = im.normalizer != nullptr ? im.normalizer->MaxShrink() : 1;
  bool strips = false;
  for (const AddedToken& t : im.added.tokens()) strips |= t.lstrip || t.rstrip;
  strips |= im.pre_tokenizer != nullptr && im.pre_tokenizer->Drops();
  strips |= !im.model->covers_every_character();
  if (shrink == 0 || strips ||
      __builtin_mul_overflow(tok->max_token_bytes_, shrink, &tok->max_token_bytes_)) {
    tok->max_token_bytes_ = 0;
  }
  auto id_of = [&](std::string_view s) { return tok->TokenToId(s).value_or(-1); };
  tok->bos_id_ = id_of("<bos>");
  tok->eos_id_ = id_of("<eos>");
  tok->pad_id_ = id_of("<pad>");
  if (const Json* unk = model->Find("unk_token"); unk != nullptr && unk->is_string()) {
    tok->unk_id_ = id_of(unk->AsString());
  }
  return tok;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  return Encode(text, options, {});
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options,
                                       absl::Span<const std::pair<size_t, size_t>> plain) const {
  const Impl& im = *impl_;
  std::string sanitized;
  if (ReplaceInvalidUtf8(text, &sanitized)) {
    text = sanitized;
    plain = {};  // offsets into the caller's text no longer apply (callers validate UTF-8)
  }

  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (options.add_special_tokens) ids.assign(im.prefix_ids.begin(), im.prefix_ids.end());
  std::vector<AddedVocabulary::Segment> raw, normalized;
  std::vector<std::string_view> words;
  std::string buffer;
  im.added.Split(text, /*raw=*/true, &raw, plain);
  for (const auto& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    buffer.assign(seg.text);
    if (im.normalizer != nullptr) im.normalizer->Normalize(&buffer);
    normalized.clear();
    // Normalizing moves offsets: a piece that holds plain text matches no special token at all.
    const size_t at = static_cast<size_t>(seg.text.data() - text.data());
    auto first =
        std::upper_bound(plain.begin(), plain.end(), at,
                         [](size_t b, const std::pair<size_t, size_t>& r) { return b < r.second; });
    const bool holds_plain = first != plain.end() && first->first < at + seg.text.size();
    im.added.Split(buffer, /*raw=*/false, &normalized, {}, holds_plain);
    for (const auto& piece : normalized) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      words.assign(1, piece.text);
      if (im.pre_tokenizer != nullptr) im.pre_tokenizer->Split(&words);
      for (std::string_view w : words) im.model->Tokenize(w, &ids);
    }
  }
  if (options.add_special_tokens) ids.insert(ids.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return ids;
}

const std::string* Tokenizer::TokenString(int32_t id, bool* special) const {
  *special = false;
  if (const AddedToken* t = impl_->added.FindById(id)) {
    *special = t->special;
    // HF hands the decoder (and id_to_token) the normalized form of a normalized added token.
    return t->normalized ? &t->normalized_content : &t->content;
  }
  return impl_->model->IdToToken(id);
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              const DecodeOptions& options) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    bool special;
    const std::string* s = id >= 0 && id < vocab_size_ ? TokenString(id, &special) : nullptr;
    if (s == nullptr) {
      return InvalidArgumentError("cannot decode token id {}: not in the vocabulary (size {})", id,
                                  vocab_size_);
    }
    if (special && options.skip_special_tokens) continue;
    tokens.push_back(*s);
  }
  return impl_->decoder.Decode(std::move(tokens));
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* t = impl_->added.FindByContent(token)) return t->id;
  return impl_->model->TokenToId(token);
}

absl::StatusOr<std::string_view> Tokenizer::IdToToken(int32_t id) const {
  bool special;
  const std::string* s = id >= 0 && id < vocab_size_ ? TokenString(id, &special) : nullptr;
  if (s == nullptr) {
    return InvalidArgumentError("token id {} is not in the vocabulary (size {})", id, vocab_size_);
  }
  return std::string_view(*s);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* t = impl_->added.FindById(id);
  return t != nullptr && t->special;
}

absl::Span<const int32_t> Tokenizer::special_prefix_ids() const { return impl_->prefix_ids; }

bool Tokenizer::streamable() const { return impl_->decoder.streamable(); }

bool Tokenizer::IsHeldByteToken(int32_t id) const {
  return id >= 0 && id < vocab_size_ && impl_->held_byte_token[id];
}

}  // namespace gannet::tokenizer

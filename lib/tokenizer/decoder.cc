#include "lib/tokenizer/decoder.h"

#include <utility>

#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/tokenizer/unicode_text.h"

namespace gannet::tokenizer {
namespace {

using internal::JsonWhere;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      size_t pos = t.find(from_);
      if (pos == std::string::npos) continue;
      std::string out;
      size_t start = 0;
      for (; pos != std::string::npos; pos = t.find(from_, start)) {
        out.append(t, start, pos - start);
        out.append(to_);
        start = pos + from_.size();
      }
      out.append(t, start, std::string::npos);
      t = std::move(out);
    }
  }
  size_t pattern_code_points() const {
    size_t n = 0;
    for (char c : from_) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
  }

 private:
  std::string from_, to_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens->size());
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (IsValidUtf8(run)) {
        out.push_back(std::move(run));
      } else {
        // HF replaces every byte of an invalid run, not just the bad ones.
        for (size_t i = 0; i < run.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
    };
    for (std::string& t : *tokens) {
      unsigned char byte;
      if (ParseByteToken(t, &byte)) {
        run.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    *tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    size_t total = 0;
    for (const std::string& t : *tokens) total += t.size();
    std::string joined;
    joined.reserve(total);
    for (const std::string& t : *tokens) joined += t;
    tokens->assign(1, std::move(joined));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(uint32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      std::string_view s = t;
      size_t len;
      for (size_t i = 0; i < start_ && !s.empty() && NextCodePoint(s, &len) == content_; ++i) {
        s.remove_prefix(len);
      }
      for (size_t i = 0; i < stop_ && !s.empty() && LastCodePoint(s, &len) == content_; ++i) {
        s.remove_suffix(len);
      }
      if (s.size() != t.size()) t = std::string(s);
    }
  }
  size_t start() const { return start_; }
  size_t stop() const { return stop_; }

 private:
  uint32_t content_;
  size_t start_, stop_;
};

// Parses one decoder object, flattening Sequence into `steps`.
absl::Status ParseInto(const Json& json, const JsonWhere& where,
                       std::vector<std::unique_ptr<Decoder>>* steps,
                       internal::RewriteBudget* budget) {
  if (json.is_null()) return absl::OkStatus();
  GANNET_ASSIGN_OR_RETURN(std::string type, internal::GetType(json, where));
  // A Replace counts with its growth; a Sequence only through its steps.
  if (type != "Replace" && type != "Sequence") GANNET_RETURN_IF_ERROR(budget->AddStep(where));
  if (type == "Replace") {
    GANNET_ASSIGN_OR_RETURN(std::string from, internal::GetStringPattern(json, where));
    GANNET_ASSIGN_OR_RETURN(std::string to, internal::GetString(json, "content", where));
    GANNET_RETURN_IF_ERROR(budget->AddReplace(from, to, where));
    steps->push_back(std::make_unique<ReplaceDecoder>(std::move(from), std::move(to)));
  } else if (type == "ByteFallback") {
    steps->push_back(std::make_unique<ByteFallbackDecoder>());
  } else if (type == "Fuse") {
    steps->push_back(std::make_unique<FuseDecoder>());
  } else if (type == "Strip") {
    GANNET_ASSIGN_OR_RETURN(std::string content, internal::GetString(json, "content", where));
    size_t len = Utf8SequenceLength(content);
    if (len == 0 || len != content.size()) {
      return where.Child("content").Error("must be exactly one character");
    }
    GANNET_ASSIGN_OR_RETURN(int64_t start, internal::GetInt(json, "start", where));
    GANNET_ASSIGN_OR_RETURN(int64_t stop, internal::GetInt(json, "stop", where));
    if (start < 0 || stop < 0) return where.Error("start and stop must be >= 0");
    steps->push_back(std::make_unique<StripDecoder>(
        DecodeUtf8(content, len), static_cast<size_t>(start), static_cast<size_t>(stop)));
  } else if (type == "Sequence") {
    const Json* list = json.Find("decoders");
    JsonWhere lw = where.Child("decoders");
    if (list == nullptr || !list->is_array()) return lw.Error("must be an array");
    for (size_t i = 0; i < list->AsArray().size(); ++i) {
      GANNET_RETURN_IF_ERROR(ParseInto(list->AsArray()[i], lw.Index(i), steps, budget));
    }
  } else {
    return UnimplementedError("{}: {}: decoder type '{}' is not supported", where.source,
                              where.path, type);
  }
  return absl::OkStatus();
}

}  // namespace

bool ParseByteToken(std::string_view token, unsigned char* byte) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return false;
  int hi = HexDigit(token[3]), lo = HexDigit(token[4]);
  if (token[3] == '+' && lo >= 0) {
    *byte = static_cast<unsigned char>(lo);
    return true;
  }
  if (hi < 0 || lo < 0) return false;
  *byte = static_cast<unsigned char>(hi * 16 + lo);
  return true;
}

absl::StatusOr<DecoderChain> DecoderChain::Parse(const Json& json, const JsonWhere& where) {
  DecoderChain chain;
  chain.has_decoder_ = !json.is_null();
  internal::RewriteBudget budget;
  GANNET_RETURN_IF_ERROR(ParseInto(json, where, &chain.steps_, &budget));
  bool fused = false;
  for (size_t i = 0; i < chain.steps_.size(); ++i) {
    const Decoder* step = chain.steps_[i].get();
    if (dynamic_cast<const FuseDecoder*>(step) != nullptr) fused = true;
    if (dynamic_cast<const ByteFallbackDecoder*>(step) != nullptr) {
      if (chain.byte_fallback_index_ < 0) chain.byte_fallback_index_ = static_cast<int>(i);
      if (fused) chain.streamable_ = false;
    }
    if (const auto* strip = dynamic_cast<const StripDecoder*>(step); strip && fused) {
      if (strip->stop() > 0 || strip->start() > 1) chain.streamable_ = false;
    }
    if (const auto* rep = dynamic_cast<const ReplaceDecoder*>(step); rep && fused) {
      if (rep->pattern_code_points() > 1) chain.streamable_ = false;
    }
  }
  return chain;
}

std::string DecoderChain::Decode(std::vector<std::string> tokens) const {
  if (!has_decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  for (const auto& step : steps_) step->DecodeChain(&tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

bool DecoderChain::IsHeldByteToken(std::string_view token) const {
  if (byte_fallback_index_ < 0) return false;
  unsigned char byte;
  if (byte_fallback_index_ == 0) return ParseByteToken(token, &byte);
  std::vector<std::string> one{std::string(token)};
  for (int i = 0; i < byte_fallback_index_; ++i) steps_[i]->DecodeChain(&one);
  return one.size() == 1 && ParseByteToken(one[0], &byte);
}

}  // namespace gannet::tokenizer

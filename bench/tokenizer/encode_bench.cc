// Tokenizer throughput in MB/s of input text (encode) or output text (decode), on the parity
// tokenizer (tests/data/tokenizer/parity_tokenizer.json: Gemma-style byte-fallback BPE, 8k vocab)
// and 256 KiB of King James Bible prose (kjv_sample.txt). A benchmark, not a test: it prints
// numbers and checks nothing beyond loading its inputs.
//
// Every case repeats its input, so after the first iteration the BPE word cache (10k words)
// is warm, as it is in a server; a cold pass runs at roughly a quarter of these rates.
// Cases:
//   EncodeDocument   the whole sample as one string. Gemma's pre-tokenizer does not split on
//                    spaces, so this is one 256 KiB BPE word, which the model cuts before
//                    each "▁" (BpeModel::CanSplitAtMetaspace) into cacheable pieces.
//   EncodeLines      one Encode per verse (~150 bytes), like short prompts; words repeat, so the
//                    word cache is warm after the first pass.
//   EncodeChat       the sample wrapped in Gemma-4 turn markers every few lines (added tokens).
//   EncodeUnicode    the parity test strings (CJK, emoji, RTL, byte fallback), concatenated.
//   Decode           the document's ids back to text.
// Run: build/<dir>/bench/tokenizer/tokenizer_encode_bench [--benchmark_filter=...]
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "lib/common/file_util.h"
#include "lib/common/json.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::tokenizer {
namespace {

struct Inputs {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string document;
  std::vector<std::string> lines;
  std::string chat;
  std::string unicode;
};

const Inputs& GetInputs() {
  static const Inputs* inputs = [] {
    const std::string dir = GANNET_TOKENIZER_DATA;
    auto fail = [](const absl::Status& s) {
      std::fprintf(stderr, "encode_bench: %s\n", std::string(s.message()).c_str());
      std::exit(1);
    };
    auto* in = new Inputs;
    auto tok = Tokenizer::FromFile(dir + "/parity_tokenizer.json");
    if (!tok.ok()) fail(tok.status());
    in->tokenizer = *std::move(tok);
    auto doc = ReadFileToString(dir + "/kjv_sample.txt", int64_t{1} << 30, "test data");
    if (!doc.ok()) fail(doc.status());
    in->document = *std::move(doc);
    size_t start = 0;
    int n = 0;
    while (start < in->document.size()) {
      size_t end = in->document.find('\n', start);
      if (end == std::string::npos) end = in->document.size();
      in->lines.push_back(in->document.substr(start, end - start));
      in->chat += (n % 4 == 0 ? "<|turn>user\n" : "") + in->lines.back() +
                  (n % 4 == 3 ? "<turn|>\n" : "\n");
      ++n;
      start = end + 1;
    }
    auto expected = ReadFileToString(dir + "/parity_expected.json", int64_t{1} << 30, "test data");
    if (!expected.ok()) fail(expected.status());
    auto json = Json::Parse(*expected);
    if (!json.ok()) fail(json.status());
    for (const Json& c : json->Find("cases")->AsArray()) {
      if (const Json* s = c.Find("input")) in->unicode += s->AsString() + "\n";
    }
    return in;
  }();
  return *inputs;
}

void EncodeOne(benchmark::State& state, const std::string& text) {
  const Tokenizer& tok = *GetInputs().tokenizer;
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok.Encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / tokens;
}

void BM_EncodeDocument(benchmark::State& state) { EncodeOne(state, GetInputs().document); }
void BM_EncodeChat(benchmark::State& state) { EncodeOne(state, GetInputs().chat); }
void BM_EncodeUnicode(benchmark::State& state) { EncodeOne(state, GetInputs().unicode); }

void BM_EncodeLines(benchmark::State& state) {
  const Inputs& in = GetInputs();
  size_t bytes = 0;
  for (const std::string& line : in.lines) bytes += line.size();
  for (auto _ : state) {
    for (const std::string& line : in.lines) {
      std::vector<int32_t> ids = in.tokenizer->Encode(line);
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_Decode(benchmark::State& state) {
  const Inputs& in = GetInputs();
  std::vector<int32_t> ids = in.tokenizer->Encode(in.document);
  for (auto _ : state) {
    auto text = in.tokenizer->Decode(ids);
    benchmark::DoNotOptimize(text->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.document.size()));
}

BENCHMARK(BM_EncodeDocument)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeLines)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeChat)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeUnicode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gannet::tokenizer

BENCHMARK_MAIN();

// gannet-make-tiny: writes the tiny synthetic Gemma-4 checkpoints used by the tests.
//
//   gannet-make-tiny OUT_DIR [VARIANT ...]
//
// VARIANT is one of 31b, 26b-a4b, e4b, e2b and their -assistant drafters (default: all). Each goes
// to OUT_DIR/<variant>/ with config.json, safetensors weights and tokenizer.json, and the target
// models a chat_template.jinja: gannet's rendition of Gemma-4's (tools/make_tiny/
// chat_template_{large,small}.jinja; tests/tokenizer/chat_corpus_test.cc checks it renders as
// the reference template does). Output is
// deterministic: rerunning reproduces the committed tests/data/tiny checkpoints bit for bit.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lib/common/file_util.h"
#include "lib/common/status.h"
#include "lib/model/synthetic.h"
#include "lib/model/variants.h"
#include "lib/tokenizer/tiny_tokenizer.h"

namespace {

absl::Status MakeOne(const std::string& out_dir, const std::string& variant) {
  using namespace gannet;
  GANNET_ASSIGN_OR_RETURN(Json config, model::VariantConfig(variant, model::VariantSize::kTiny));
  const std::string dir = out_dir + "/" + variant;
  ::mkdir(out_dir.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  model::SyntheticOptions options;
  // Exercise the loader's other paths: the 31B checkpoint is sharded, and the multimodal-wrapper
  // checkpoints carry tower tensors that text-only loading must skip.
  options.num_shards = variant == "31b" ? 2 : 1;
  options.tower_tensors = config.Find("vision_config") != nullptr;
  GANNET_RETURN_IF_ERROR(model::WriteSyntheticCheckpoint(config, dir, options));
  GANNET_ASSIGN_OR_RETURN(std::string tok, tokenizer::MakeTinyTokenizerJson(model::kTinyVocabSize));
  GANNET_RETURN_IF_ERROR(WriteStringToFile(dir + "/tokenizer.json", tok));
  if (variant.find("assistant") != std::string::npos) return absl::OkStatus();
  const bool small = variant == "e2b" || variant == "e4b";
  GANNET_ASSIGN_OR_RETURN(std::string chat_template,
                          ReadFileToString(std::string(GANNET_MAKE_TINY_DIR) + "/chat_template_" +
                                               (small ? "small" : "large") + ".jinja",
                                           int64_t{1} << 20, "chat template"));
  return WriteStringToFile(dir + "/chat_template.jinja", chat_template);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: gannet-make-tiny OUT_DIR [VARIANT ...]\nvariants:");
    for (const auto& v : gannet::model::KnownVariantNames()) std::fprintf(stderr, " %s", v.c_str());
    std::fprintf(stderr, "\n");
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> variants(argv + 2, argv + argc);
  if (variants.empty()) variants = gannet::model::KnownVariantNames();
  for (const std::string& v : variants) {
    absl::Status st = MakeOne(argv[1], v);
    if (!st.ok()) {
      std::fprintf(stderr, "gannet-make-tiny: %s: %s\n", v.c_str(),
                   std::string(st.message()).c_str());
      return 1;
    }
    std::printf("wrote %s/%s\n", argv[1], v.c_str());
  }
  return 0;
}

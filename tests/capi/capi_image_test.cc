// Images through the public C ABI on the CPU backend: a PNG and a chat on the tiny multimodal
// checkpoint tests/data/tiny/mm-api, against HF's processor, chat template and greedy answer
// (tools/golden/mm_api_golden.py -> tests/data/golden/mm-api.json), for each placeholder form
// (chat_json image part, `<|image|>` in prompt_text, image_token_id in prompt_tokens); and the
// errors gannet_request_check and submit give for bad images, with the engine serving after them.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {
namespace {

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Deterministic bytes that start like no image format.
std::vector<uint8_t> MakeNoise() {
  std::vector<uint8_t> v(1000);
  uint32_t x = 12345;
  for (uint8_t& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 24);
  }
  v[0] = 0x00;
  return v;
}

class CapiImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream f(TestDataDir() + "/golden/mm-api.json");
    ASSERT_TRUE(f.good());
    golden_ = nlohmann::json::parse(f);
    png_ = ReadBytes(TestDataDir() + "/images/" + golden_["image"].get<std::string>());
    chat_ = nlohmann::json{{"messages", golden_["messages"]}}.dump();
    prompt_text_ = golden_["prompt_text"].get<std::string>();
    hf_ids_ = golden_["input_ids"].get<std::vector<int32_t>>();
    greedy_ = golden_["greedy"].get<std::vector<int32_t>>();
    image_ = GANNET_IMAGE_INIT;
    image_.data = png_.data();
    image_.size = png_.size();
    image_.max_soft_tokens = golden_["max_soft_tokens"].get<int32_t>();
    dir_ = TinyModelDir("mm-api");
  }

  gannet_request_t Greedy() const {
    gannet_request_t r = GANNET_REQUEST_INIT;
    r.max_tokens = static_cast<int32_t>(greedy_.size());
    r.ignore_default_stop_tokens = 1;  // HF generated with min_new_tokens = max_new_tokens
    r.images = &image_;
    r.num_images = 1;
    return r;
  }

  // HF's ids with the image's soft tokens folded back into one placeholder (boi/eoi removed).
  std::vector<int32_t> PlaceholderIds() const {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < hf_ids_.size(); ++i) {
      if (hf_ids_[i] == 6 || hf_ids_[i] == 8) continue;  // boi, eoi of the tiny vocabulary
      if (hf_ids_[i] == 7 && !ids.empty() && ids.back() == 7) continue;
      ids.push_back(hf_ids_[i]);
    }
    return ids;
  }

  nlohmann::json golden_;
  std::vector<uint8_t> png_;
  std::string chat_, prompt_text_, dir_;
  std::vector<int32_t> hf_ids_, greedy_;
  gannet_image_t image_;
};

TEST_F(CapiImageTest, EveryPlaceholderFormMatchesHf) {
  gannet_engine_t* engine = CreateTinyEngine("mm-api");
  ASSERT_NE(engine, nullptr);
  // The chat template renders the image part as HF's does.
  const gannet_tokenizer_t* tok = nullptr;
  ASSERT_EQ(gannet_engine_tokenizer(engine, &tok), GANNET_OK);
  std::string text(4096, '\0');
  size_t len = 0;
  ASSERT_EQ(
      gannet_apply_chat_template_json(tok, chat_.c_str(), 1, 0, text.data(), text.size(), &len),
      GANNET_OK);
  EXPECT_EQ(text.substr(0, len), prompt_text_);

  const std::vector<int32_t> ids = PlaceholderIds();
  // Forms: chat_json, the same with split_special_tokens (servers set it: the image part's
  // placeholder comes from the template, not from users' text), prompt_text, prompt_tokens.
  for (int form = 0; form < 4; ++form) {
    gannet_request_t r = Greedy();
    if (form == 0) r.chat_json = chat_.c_str();
    if (form == 3) {
      r.chat_json = chat_.c_str();
      r.split_special_tokens = 1;
    }
    if (form == 1) r.prompt_text = prompt_text_.c_str();
    if (form == 2) {
      r.prompt_tokens = ids.data();
      r.num_prompt_tokens = ids.size();
    }
    // Submit errors first: RunAlone would wait for events that never come.
    ASSERT_EQ(gannet_request_check(&r, nullptr), GANNET_OK)
        << form << ": " << gannet_last_error_message();
    const Outcome o = RunAlone(engine, r);
    EXPECT_EQ(o.status, GANNET_OK) << form << ": " << o.message;
    EXPECT_EQ(o.terminal_events, 1);
    EXPECT_EQ(o.num_prompt_tokens, static_cast<int32_t>(hf_ids_.size())) << form;
    EXPECT_EQ(o.tokens, greedy_) << form;  // one TOKEN event per generated token
    EXPECT_EQ(o.finish, GANNET_FINISH_LENGTH);
  }
  gannet_engine_destroy(engine);
}

TEST_F(CapiImageTest, RequestCheckRefusesBadImages) {
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  ASSERT_EQ(gannet_model_info(dir_.c_str(), &info), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(info.has_vision, 1);
  EXPECT_EQ(info.image_token_id, 7);
  gannet_request_t r = Greedy();
  r.chat_json = chat_.c_str();
  EXPECT_EQ(gannet_request_check(&r, &info), GANNET_OK) << gannet_last_error_message();

  auto expect_refused = [&](const gannet_request_t& req, const char* what, const char* needle) {
    EXPECT_EQ(gannet_request_check(&req, &info), GANNET_ERR_INVALID_ARGUMENT) << what;
    EXPECT_NE(std::string(gannet_last_error_message()).find(needle), std::string::npos)
        << what << ": " << gannet_last_error_message();
  };
  gannet_image_t bad = image_;
  r.images = &bad;
  bad.size = png_.size() / 2;  // truncated
  expect_refused(r, "truncated", "images[0]");
  const std::vector<uint8_t> noise = MakeNoise();
  bad.data = noise.data();
  bad.size = noise.size();
  expect_refused(r, "random bytes", "images[0]");
  bad = GANNET_IMAGE_INIT;
  const uint8_t pixel[3] = {1, 2, 3};
  bad.rgb = pixel;  // 0 x 0
  expect_refused(r, "0x0", "images[0]");
  bad = image_;
  bad.size = 0;  // 0 bytes
  expect_refused(r, "0 bytes", "images[0]");
  bad = GANNET_IMAGE_INIT;  // neither bytes nor pixels
  expect_refused(r, "empty", "images[0]");
  bad = image_;
  bad.max_soft_tokens = 100;
  expect_refused(r, "budget", "max_soft_tokens");
  // Two images for one placeholder, and a placeholder without an image.
  const gannet_image_t two[2] = {image_, image_};
  r.images = two;
  r.num_images = 2;
  expect_refused(r, "count", "placeholders");
  r.num_images = 0;
  r.images = nullptr;
  EXPECT_NE(gannet_request_check(&r, &info), GANNET_OK);
  // Too many soft tokens for the context.
  r.images = &image_;
  r.num_images = 1;
  gannet_model_info_t small = info;
  small.max_position_embeddings = 40;
  EXPECT_EQ(gannet_request_check(&r, &small), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("context"), std::string::npos);
  // image_url parts are the server's to convert.
  const std::string url_chat =
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": )"
      R"({"url": "data:image/png;base64,AAAA"}}]}]})";
  r.chat_json = url_chat.c_str();
  expect_refused(r, "image_url", "image_url");
}

TEST_F(CapiImageTest, SubmitRefusesAndTheEngineServes) {
  gannet_engine_t* engine = CreateTinyEngine("mm-api");
  ASSERT_NE(engine, nullptr);
  gannet_request_t r = Greedy();
  r.chat_json = chat_.c_str();
  uint64_t id = 0;
  gannet_image_t big = image_;
  big.max_soft_tokens = 560;  // > max_model_len 256 tokens
  r.images = &big;
  EXPECT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("context"), std::string::npos)
      << gannet_last_error_message();
  gannet_image_t bad = image_;
  bad.size = 40;
  r.images = &bad;
  EXPECT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("images[0]"), std::string::npos);
  r.images = &image_;
  r.num_images = 0;
  EXPECT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  // The engine still serves, with the image.
  r.num_images = 1;
  const Outcome o = RunAlone(engine, r);
  EXPECT_EQ(o.status, GANNET_OK) << o.message;
  EXPECT_EQ(o.tokens, greedy_);
  gannet_engine_destroy(engine);
}

}  // namespace
}  // namespace gannet::testing

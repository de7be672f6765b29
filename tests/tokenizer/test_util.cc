#include "tests/tokenizer/test_util.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "lib/common/file_util.h"

namespace gannet::tokenizer::testing {

std::string DataPath(const std::string& name) {
  const char* root = std::getenv("GANNET_TEST_DATA");
  if (root == nullptr) {
    ADD_FAILURE() << "GANNET_TEST_DATA is not set (run the test through ctest)";
    return "";
  }
  return std::string(root) + "/tokenizer/" + name;
}

Json LoadJson(const std::string& name) {
  auto text = ReadFileToString(DataPath(name), int64_t{1} << 30, "test data");
  if (!text.ok()) {
    ADD_FAILURE() << text.status();
    return Json();
  }
  auto json = Json::Parse(*text);
  if (!json.ok()) {
    ADD_FAILURE() << name << ": " << json.status();
    return Json();
  }
  return *std::move(json);
}

std::vector<int32_t> Ids(const Json& array) {
  std::vector<int32_t> ids;
  for (const Json& v : array.AsArray()) ids.push_back(static_cast<int32_t>(v.AsInt()));
  return ids;
}

const Tokenizer& ParityTokenizer() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::FromFile(DataPath("parity_tokenizer.json"));
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      std::abort();
    }
    return t->release();
  }();
  return *tok;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace gannet::tokenizer::testing

// Shared helpers of the tokenizer tests: fixture paths under $GANNET_TEST_DATA/tokenizer and
// small JSON conversions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/common/json.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::tokenizer::testing {

// $GANNET_TEST_DATA/tokenizer/<name>; fails the test (empty string) if the variable is unset.
std::string DataPath(const std::string& name);

// Parses a fixture file; ADD_FAILURE and a null Json on error.
Json LoadJson(const std::string& name);

std::vector<int32_t> Ids(const Json& array);

// The parity tokenizer (tests/data/tokenizer/parity_tokenizer.json), loaded once.
const Tokenizer& ParityTokenizer();

// Decodes hex ("e282ac") into bytes.
std::string FromHex(const std::string& hex);

}  // namespace gannet::tokenizer::testing

// Every C ABI entry point with NULL and invalid arguments: a clear status and message, no crash.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {
namespace {

std::string LastError() { return gannet_last_error_message(); }

TEST(CapiArgsTest, StatusStringsAndVersion) {
  EXPECT_STREQ(gannet_status_string(GANNET_OK), "GANNET_OK");
  EXPECT_STREQ(gannet_status_string(GANNET_ERR_DEVICE_LOST), "GANNET_ERR_DEVICE_LOST");
  EXPECT_STREQ(gannet_status_string(12345), "GANNET_ERR_UNKNOWN");
  EXPECT_STREQ(gannet_version(), "0.2.0");
  EXPECT_EQ(gannet_version_code(), 200);
  EXPECT_EQ(gannet_abi_version(), GANNET_ABI_VERSION);
}

TEST(CapiArgsTest, CreateRejectsBadArguments) {
  gannet_engine_t* engine = nullptr;
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  EXPECT_EQ(gannet_engine_create(nullptr, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_create(&config, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("model_dir"), std::string::npos) << LastError();

  config.struct_size = 3;
  config.model_dir = "/nonexistent";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("struct_size"), std::string::npos) << LastError();

  config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = "/nonexistent/model";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_NOT_FOUND);
  EXPECT_NE(LastError().find("/nonexistent/model/config.json"), std::string::npos) << LastError();

  const std::string dir = TinyModelDir("e2b");
  config.model_dir = dir.c_str();
  config.backend = "tpu";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("tpu"), std::string::npos) << LastError();

  config.backend = "cpu";
  config.max_running_seqs = -1;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);

  config.max_running_seqs = 0;
  config.max_model_len = 1 << 30;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("max_position_embeddings"), std::string::npos) << LastError();

  config.max_model_len = 0;
  config.load_format = "gguf";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);  // never written on failure

  config.load_format = nullptr;
  config.kv_cache_dtype = "int4";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("kv_cache_dtype 'int4'"), std::string::npos) << LastError();
  config.kv_cache_dtype = nullptr;
  config.compute_dtype = "int8";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("compute_dtype 'int8' is not one of auto"), std::string::npos)
      << LastError();
  config.compute_dtype = nullptr;
  config.kv_separate_k_eq_v = 2;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("kv_separate_k_eq_v is 2"), std::string::npos) << LastError();
  config.kv_separate_k_eq_v = 0;
  config.startup_warmup = 2;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("startup_warmup is 2"), std::string::npos) << LastError();
  config.startup_warmup = 0;

  // A drafter is not servable on its own.
  const std::string drafter = TinyModelDir("e2b-assistant");
  config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = drafter.c_str();
  config.backend = "cpu";
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("assistant"), std::string::npos) << LastError();
}

// Multi-process tensor parallelism: the group id, its rank check, and serve on an engine that
// serves requests itself.
TEST(CapiArgsTest, TensorParallelGroupArguments) {
  EXPECT_EQ(gannet_tp_create_id(nullptr), GANNET_ERR_INVALID_ARGUMENT);
  gannet_tp_id_t id = {};
  const gannet_status_t st = gannet_tp_create_id(&id);
  if (st == GANNET_OK) {
    bool any = false;
    for (uint8_t b : id.bytes) any = any || b != 0;
    EXPECT_TRUE(any) << "gannet_tp_create_id returned an all-zero id";
  } else {
    // A build without NCCL; nothing else.
    EXPECT_EQ(st, GANNET_ERR_UNIMPLEMENTED) << gannet_status_string(st) << ": " << LastError();
    EXPECT_NE(LastError().find("NCCL"), std::string::npos) << LastError();
  }

  // A rank outside [0, tensor_parallel_size) is refused before anything loads.
  const std::string dir = TinyModelDir("31b");
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = dir.c_str();
  config.backend = "cpu";
  config.tensor_parallel_size = 2;
  config.tp_rank = 2;
  config.tp_id = &id;
  gannet_engine_t* engine = nullptr;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("tp_rank"), std::string::npos) << LastError();
  EXPECT_EQ(engine, nullptr);
  config.tp_rank = -1;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);

  EXPECT_EQ(gannet_engine_serve(nullptr, 0), GANNET_ERR_INVALID_ARGUMENT);
  engine = CreateTinyEngine("31b");
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(gannet_engine_serve(engine, -2), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("timeout_ms"), std::string::npos) << LastError();
  // A normal engine serves requests itself: nothing to wait for, whatever the timeout.
  EXPECT_EQ(gannet_engine_serve(engine, 0), GANNET_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(gannet_engine_serve(engine, -1), GANNET_ERR_FAILED_PRECONDITION);
  EXPECT_FALSE(LastError().empty());
  // ... and still does.
  std::vector<int32_t> prompt = MakePrompt(1, 5);
  Outcome o = RunAlone(engine, GreedyRequest(prompt, 4));
  EXPECT_EQ(o.terminal_events, 1);
  EXPECT_EQ(o.status, GANNET_OK) << o.message;
  gannet_engine_destroy(engine);
}

TEST(CapiArgsTest, EntryPointsRejectNullAndInvalid) {
  gannet_engine_destroy(nullptr);  // a no-op
  gannet_engine_t* engine = CreateTinyEngine("e2b");
  ASSERT_NE(engine, nullptr);
  std::vector<int32_t> prompt = MakePrompt(1, 5);
  gannet_request_t req = GreedyRequest(prompt, 4);
  uint64_t id = 0;
  EXPECT_EQ(gannet_engine_submit(nullptr, &req, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_submit(engine, nullptr, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_submit(engine, &req, nullptr), GANNET_ERR_INVALID_ARGUMENT);

  gannet_request_t bad = req;
  bad.struct_size = 0;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  bad = req;
  bad.num_prompt_tokens = 0;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("exactly one prompt"), std::string::npos) << LastError();
  bad = req;
  bad.prompt_tokens = nullptr;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  bad = req;
  bad.temperature = -1.0f;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("temperature"), std::string::npos) << LastError();
  bad = req;
  bad.top_p = 1.5f;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("top_p"), std::string::npos) << LastError();
  bad = req;
  bad.max_tokens = -3;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  bad = req;
  bad.min_tokens = 9;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("min_tokens"), std::string::npos) << LastError();
  bad = req;
  bad.logprobs = 1000;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  bad = req;
  bad.num_stop_strings = 2;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  bad = req;
  bad.num_messages = 1;
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);

  EXPECT_EQ(gannet_engine_cancel(nullptr, 1), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_cancel(engine, 987654), GANNET_ERR_NOT_FOUND);

  const gannet_event_t* const* events = nullptr;
  size_t n = 7;
  EXPECT_EQ(gannet_engine_poll(nullptr, 0, 8, &events, &n), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_poll(engine, 0, 8, nullptr, &n), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_poll(engine, 0, 8, &events, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_poll(engine, 0, 0, &events, &n), GANNET_OK);
  EXPECT_EQ(n, 0u);

  gannet_engine_stats_t stats = GANNET_ENGINE_STATS_INIT;
  EXPECT_EQ(gannet_engine_get_stats(nullptr, &stats), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(gannet_engine_get_stats(engine, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  stats.struct_size = 0;
  EXPECT_EQ(gannet_engine_get_stats(engine, &stats), GANNET_ERR_INVALID_ARGUMENT);

  // The engine still serves after all of that.
  Outcome o = RunAlone(engine, req);
  EXPECT_EQ(o.finish == GANNET_FINISH_LENGTH || o.finish == GANNET_FINISH_STOP, true);
  EXPECT_EQ(o.terminal_events, 1);
  gannet_engine_destroy(engine);
}

// Found by an audit (session 31): sizes that end inside a pointer, counts that would read past
// the caller's arrays, flags outside their encoding, roles and deadlines that only submit (or
// nothing) refused. Each is INVALID_ARGUMENT naming the field, from submit and from the check.
TEST(CapiArgsTest, RequestFieldsAreCheckedBeforeUse) {
  const char* text = "hello";
  gannet_request_t base = GANNET_REQUEST_INIT;
  base.prompt_text = text;
  auto expect_bad = [](const gannet_request_t& r, const std::string& needle) {
    EXPECT_EQ(gannet_request_check(&r, nullptr), GANNET_ERR_INVALID_ARGUMENT) << needle;
    EXPECT_NE(LastError().find(needle), std::string::npos) << LastError();
  };
  ASSERT_EQ(gannet_request_check(&base, nullptr), GANNET_OK) << LastError();

  gannet_request_t r = base;
  r.struct_size = offsetof(gannet_request_t, prompt_text) + 4;  // half of the text pointer
  expect_bad(r, "struct_size");
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = "/nonexistent";
  config.struct_size = offsetof(gannet_engine_config_t, model_dir) + 4;
  gannet_engine_t* engine = nullptr;
  EXPECT_EQ(gannet_engine_create(&config, &engine), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("struct_size"), std::string::npos) << LastError();

  const int32_t one_id = 2;
  r = GANNET_REQUEST_INIT;
  r.prompt_tokens = &one_id;
  r.num_prompt_tokens = static_cast<size_t>(-1);  // a negative length
  expect_bad(r, "num_prompt_tokens");
  const gannet_chat_message_t message = GANNET_CHAT_MESSAGE_INIT;
  r = GANNET_REQUEST_INIT;
  r.messages = &message;
  r.num_messages = static_cast<size_t>(-1);
  expect_bad(r, "num_messages");

  r = base;
  r.enable_thinking = 2;
  expect_bad(r, "enable_thinking");
  r = base;
  r.add_generation_prompt = 3;
  expect_bad(r, "add_generation_prompt");
  r = base;
  r.ignore_default_stop_tokens = -1;
  expect_bad(r, "ignore_default_stop_tokens");
  r = base;
  r.deadline_ms = -5;
  expect_bad(r, "deadline_ms");

  gannet_chat_message_t tool = GANNET_CHAT_MESSAGE_INIT;
  tool.role = "tool";
  tool.content = "x";
  r = GANNET_REQUEST_INIT;
  r.messages = &tool;
  r.num_messages = 1;
  expect_bad(r, "role 'tool'");

  // The tokenizer entries' flags.
  const std::string dir = TinyModelDir("e2b");
  gannet_tokenizer_t* tok = nullptr;
  ASSERT_EQ(gannet_tokenizer_open(dir.c_str(), &tok), GANNET_OK) << LastError();
  size_t n = 0;
  EXPECT_EQ(gannet_tokenize(tok, "a", 1, 2, nullptr, 0, &n), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("add_special_tokens"), std::string::npos) << LastError();
  EXPECT_EQ(gannet_detokenize(tok, &one_id, 1, -1, nullptr, 0, &n), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("skip_special_tokens"), std::string::npos) << LastError();
  gannet_chat_message_t user = GANNET_CHAT_MESSAGE_INIT;
  user.role = "user";
  user.content = "hi";
  EXPECT_EQ(gannet_apply_chat_template(tok, &user, 1, 2, 0, nullptr, 0, &n),
            GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("add_generation_prompt"), std::string::npos) << LastError();
  EXPECT_EQ(gannet_apply_chat_template(tok, &user, 1, 1, 0, nullptr, 0, &n), GANNET_OK);
  gannet_tokenizer_close(tok);
}

TEST(CapiArgsTest, OlderSmallerStructsStillWork) {
  gannet_engine_t* engine = CreateTinyEngine("e2b");
  ASSERT_NE(engine, nullptr);
  // A caller built against a header whose stats struct ended after num_waiting.
  struct OldStats {
    uint32_t struct_size;
    int32_t num_running;
    int32_t num_waiting;
    int32_t canary;
  } old = {static_cast<uint32_t>(offsetof(gannet_engine_stats_t, kv_pages_total)), -1, -1, 1234};
  EXPECT_EQ(gannet_engine_get_stats(engine, reinterpret_cast<gannet_engine_stats_t*>(&old)),
            GANNET_OK);
  EXPECT_EQ(old.num_running, 0);
  EXPECT_EQ(old.canary, 1234);  // nothing written past the caller's struct
  gannet_engine_destroy(engine);

  // A config that ends before startup_warmup (the 0.2 ABI's first release did): whatever its
  // memory holds past the struct, the field is the default.
  struct {
    gannet_engine_config_t config;
    int32_t garbage[4];
  } older{GANNET_ENGINE_CONFIG_INIT, {7, 7, 7, 7}};
  const std::string dir = TinyModelDir("e2b");
  older.config.model_dir = dir.c_str();
  older.config.backend = "cpu";
  older.config.max_model_len = 64;
  older.config.struct_size =
      static_cast<uint32_t>(offsetof(gannet_engine_config_t, startup_warmup));
  older.config.startup_warmup = 7;  // past the caller's struct_size: never read
  engine = nullptr;
  ASSERT_EQ(gannet_engine_create(&older.config, &engine), GANNET_OK) << gannet_last_error_message();
  gannet_engine_destroy(engine);
}

// Reading refuses what is not a regular file (never blocks on a FIFO) and quotes file contents
// escaped: a model folder cannot hang the engine or write escape sequences to a terminal.
TEST(CapiArgsTest, OnlyRegularFilesAreReadAndMessagesAreEscaped) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gannet_args_" + std::to_string(::getpid()));
  fs::create_directories(dir / "config.json");  // a directory where the file should be
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  EXPECT_EQ(gannet_model_info(dir.c_str(), &info), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("is a directory, not a regular file"), std::string::npos)
      << LastError();
  fs::remove(dir / "config.json");
  ASSERT_EQ(::mkfifo((dir / "config.json").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(gannet_model_info(dir.c_str(), &info), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("is a FIFO"), std::string::npos) << LastError();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  fs::remove(dir / "config.json");
  {
    std::ofstream f(dir / "config.json");
    f << "{\"model_type\": \"evil\\u001b[2J\\u0007\"}";
  }
  EXPECT_EQ(gannet_model_info(dir.c_str(), &info), GANNET_ERR_UNIMPLEMENTED);
  const std::string msg = LastError();
  EXPECT_NE(msg.find("evil\\x1b[2J\\x07"), std::string::npos) << msg;
  for (char c : msg) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << msg;
  fs::remove_all(dir);
}

TEST(CapiArgsTest, ModelInfoValidatesTheTokenizer) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gannet_tok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(TinyModelDir("e2b")) / f, dir / f, fs::copy_options::overwrite_existing);
  }
  { std::ofstream(dir / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\""; }
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  EXPECT_EQ(gannet_model_info(dir.c_str(), &info), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("tokenizer.json"), std::string::npos) << LastError();
  fs::remove(dir / "tokenizer.json");
  EXPECT_EQ(gannet_model_info(dir.c_str(), &info), GANNET_OK) << LastError();
  EXPECT_EQ(info.has_tokenizer, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gannet::testing

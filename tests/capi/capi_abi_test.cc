// The 0.2 ABI's growth rules and hardening (issue 10): event pointers with struct_size, chat
// message arrays read with the first element's stride, progress that reports bytes and can abort
// a load, saturating deadlines, the queue bound counting unpolled final events, one prompt-length
// rule for every error, one UTF-8 rule (reject), request checks without an engine, the tokenizer
// API and the stats' backend and device.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {
namespace {

std::string LastError() { return gannet_last_error_message(); }

class CapiAbiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = CreateTinyEngine("e4b");
    ASSERT_NE(engine_, nullptr);
  }
  void TearDown() override { gannet_engine_destroy(engine_); }
  gannet_engine_t* engine_ = nullptr;
};

TEST_F(CapiAbiTest, EventsArePointersAndCarryTheirSize) {
  const std::vector<int32_t> prompt = MakePrompt(1, 6);
  gannet_request_t r = GreedyRequest(prompt, 3);
  r.ignore_default_stop_tokens = 1;
  uint64_t id = 0;
  ASSERT_EQ(gannet_engine_submit(engine_, &r, &id), GANNET_OK) << LastError();
  int tokens = 0, terminal = 0;
  while (terminal == 0) {
    const gannet_event_t* const* events = nullptr;
    size_t n = 0;
    ASSERT_EQ(gannet_engine_poll(engine_, 200, 2, &events, &n), GANNET_OK);
    ASSERT_LE(n, 2u);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NE(events[i], nullptr);
      EXPECT_EQ(events[i]->struct_size, sizeof(gannet_event_t));
      EXPECT_EQ(events[i]->request_id, id);
      if (events[i]->type == GANNET_EVENT_TOKEN)
        ++tokens;
      else
        ++terminal;
    }
  }
  EXPECT_EQ(tokens, 3);
}

// A message struct from a later header: the same fields first, more after them.
struct FutureMessage {
  gannet_chat_message_t base;
  const char* name;
  const void* images;
};

TEST_F(CapiAbiTest, ChatMessagesAreReadWithTheirOwnStride) {
  constexpr uint32_t kMsg = sizeof(gannet_chat_message_t);
  gannet_chat_message_t now[] = {{kMsg, "system", "Be brief."}, {kMsg, "user", "Hello!"}};
  gannet_request_t r = GANNET_REQUEST_INIT;
  r.messages = now;
  r.num_messages = 2;
  r.max_tokens = 4;
  const Outcome a = RunAlone(engine_, r);
  ASSERT_EQ(a.status, GANNET_OK) << a.message;

  FutureMessage later[2] = {};
  later[0].base = {sizeof(FutureMessage), "system", "Be brief."};
  later[1].base = {sizeof(FutureMessage), "user", "Hello!"};
  later[0].name = later[1].name = "ignored by this library";
  r.messages = &later[0].base;
  const Outcome b = RunAlone(engine_, r);
  ASSERT_EQ(b.status, GANNET_OK) << b.message;
  EXPECT_EQ(b.num_prompt_tokens, a.num_prompt_tokens);
  EXPECT_EQ(b.tokens, a.tokens);

  // Mixed sizes in one array, and a size too small to hold the fields, are refused.
  later[1].base.struct_size = kMsg;
  uint64_t id;
  EXPECT_EQ(gannet_engine_submit(engine_, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("messages[1].struct_size"), std::string::npos) << LastError();
  now[0].struct_size = 8;
  r.messages = now;
  EXPECT_EQ(gannet_engine_submit(engine_, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("GANNET_CHAT_MESSAGE_INIT"), std::string::npos) << LastError();
}

struct ProgressLog {
  std::vector<gannet_progress_t> seen;
  int abort_after = -1;  // return nonzero at this call
};

int32_t OnProgress(void* user, const gannet_progress_t* p) {
  auto* log = static_cast<ProgressLog*>(user);
  log->seen.push_back(*p);
  return log->abort_after >= 0 && static_cast<int>(log->seen.size()) > log->abort_after ? 1 : 0;
}

TEST(CapiProgressTest, ReportsBytesAndCanAbortTheLoad) {
  ProgressLog log;
  gannet_engine_t* e = CreateTinyEngine("31b", [&](gannet_engine_config_t* c) {
    c->progress_callback = OnProgress;
    c->progress_user_data = &log;
  });
  ASSERT_NE(e, nullptr);
  gannet_engine_destroy(e);
  ASSERT_GT(log.seen.size(), 3u);
  int64_t last = 0;
  for (const gannet_progress_t& p : log.seen) {
    EXPECT_EQ(p.struct_size, sizeof(gannet_progress_t));
    EXPECT_STREQ(p.stage, "weights");
    EXPECT_GE(p.bytes_done, last);
    EXPECT_GT(p.bytes_total, 0);
    EXPECT_DOUBLE_EQ(p.fraction, static_cast<double>(p.bytes_done) / p.bytes_total);
    last = p.bytes_done;
  }
  EXPECT_EQ(log.seen.back().bytes_done, log.seen.back().bytes_total);

  ProgressLog stop;
  stop.abort_after = 2;
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  const std::string dir = TinyModelDir("31b");
  c.model_dir = dir.c_str();
  c.backend = "cpu";
  c.progress_callback = OnProgress;
  c.progress_user_data = &stop;
  gannet_engine_t* never = nullptr;
  EXPECT_EQ(gannet_engine_create(&c, &never), GANNET_ERR_CANCELLED);
  EXPECT_EQ(never, nullptr);
  EXPECT_EQ(stop.seen.size(), 3u);  // nothing loads after the abort
  EXPECT_NE(LastError().find("cancelled"), std::string::npos) << LastError();
}

// Everything that can be checked is checked before any weight loads: no progress is reported.
TEST(CapiPreloadTest, BadSettingsFailBeforeTheWeightsLoad) {
  const std::string dir = TinyModelDir("31b");
  auto attempt = [&](const std::function<void(gannet_engine_config_t*)>& edit) {
    ProgressLog log;
    gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
    c.model_dir = dir.c_str();
    c.progress_callback = OnProgress;
    c.progress_user_data = &log;
    edit(&c);
    gannet_engine_t* e = nullptr;
    const gannet_status_t st = gannet_engine_create(&c, &e);
    EXPECT_EQ(log.seen.size(), 0u) << "weights loaded before failing: " << LastError();
    gannet_engine_destroy(e);
    return st;
  };
  EXPECT_EQ(attempt([](gannet_engine_config_t* c) { c->backend = "gpu"; }),
            GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("'gpu'"), std::string::npos) << LastError();
  EXPECT_EQ(attempt([](gannet_engine_config_t* c) { c->device_id = 7; }),
            GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("device 7"), std::string::npos) << LastError();
  EXPECT_EQ(attempt([](gannet_engine_config_t* c) {
              c->backend = "cpu";
              c->max_model_len = 1;
            }),
            GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("too small"), std::string::npos) << LastError();
  EXPECT_EQ(attempt([](gannet_engine_config_t* c) {
              c->backend = "cpu";
              c->max_running_seqs = 64;
              c->max_step_tokens = 8;
            }),
            GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(attempt([](gannet_engine_config_t* c) { c->model_dir = "/nonexistent/model"; }),
            GANNET_ERR_NOT_FOUND);
}

TEST_F(CapiAbiTest, HugeDeadlinesMeanNever) {
  const std::vector<int32_t> prompt = MakePrompt(2, 5);
  gannet_request_t r = GreedyRequest(prompt, 3);
  r.ignore_default_stop_tokens = 1;
  for (int64_t d : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 1,
                    int64_t{1} << 62}) {
    r.deadline_ms = d;
    const Outcome o = RunAlone(engine_, r);
    EXPECT_EQ(o.status, GANNET_OK) << d << ": " << o.message;
    EXPECT_EQ(o.tokens.size(), 3u);
  }
}

TEST(CapiQueueTest, FailedRequestsCountUntilTheirEventIsPolled) {
  gannet_engine_t* e =
      CreateTinyEngine("e2b", [](gannet_engine_config_t* c) { c->max_queued_requests = 8; });
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> bad = {2, 100000};  // outside the 512-token vocabulary
  gannet_request_t r = GreedyRequest(bad, 2);
  uint64_t id;
  for (int i = 0; i < 8; ++i) ASSERT_EQ(gannet_engine_submit(e, &r, &id), GANNET_OK) << i;
  EXPECT_EQ(gannet_engine_submit(e, &r, &id), GANNET_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(LastError().find("max_queued_requests"), std::string::npos) << LastError();
  // Polling the ERROR events frees the slots.
  size_t errors = 0;
  while (errors < 8) {
    const gannet_event_t* const* ev;
    size_t n = 0;
    ASSERT_EQ(gannet_engine_poll(e, 200, 64, &ev, &n), GANNET_OK);
    for (size_t i = 0; i < n; ++i) errors += ev[i]->type == GANNET_EVENT_ERROR;
    ASSERT_GT(n, 0u);
  }
  EXPECT_EQ(gannet_engine_submit(e, &r, &id), GANNET_OK) << LastError();
  gannet_engine_destroy(e);
}

TEST_F(CapiAbiTest, EveryErrorKindReportsThePromptLength) {
  // Found at submit (an id outside the vocabulary) and by the scheduler (longer than the
  // context): both ERROR events carry the prompt's length.
  std::vector<int32_t> bad = MakePrompt(3, 9);
  bad[4] = 100000;
  const Outcome a = RunAlone(engine_, GreedyRequest(bad, 2));
  EXPECT_EQ(a.status, GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(a.num_prompt_tokens, 9);
  const std::vector<int32_t> long_prompt = MakePrompt(4, 300);  // max_model_len is 256
  const Outcome b = RunAlone(engine_, GreedyRequest(long_prompt, 2));
  EXPECT_EQ(b.status, GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_prompt_tokens, 300);
  EXPECT_NE(b.message.find("max_model_len"), std::string::npos) << b.message;
}

TEST_F(CapiAbiTest, InvalidUtf8IsRejectedEverywhere) {
  const char* bad = "caf\xc3";  // truncated sequence
  uint64_t id;
  gannet_request_t r = GANNET_REQUEST_INIT;
  r.prompt_text = bad;
  r.max_tokens = 2;
  EXPECT_EQ(gannet_engine_submit(engine_, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("prompt_text is not valid UTF-8"), std::string::npos) << LastError();
  gannet_chat_message_t m = {sizeof(gannet_chat_message_t), "user", bad};
  r = GANNET_REQUEST_INIT;
  r.messages = &m;
  r.num_messages = 1;
  EXPECT_EQ(gannet_engine_submit(engine_, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("messages[0]"), std::string::npos) << LastError();
  r = GANNET_REQUEST_INIT;
  r.prompt_text = "hello";
  const char* stops[] = {"ok", bad};
  r.stop_strings = stops;
  r.num_stop_strings = 2;
  EXPECT_EQ(gannet_engine_submit(engine_, &r, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("stop_strings[1]"), std::string::npos) << LastError();
}

TEST(CapiRequestCheckTest, ChecksWithoutAnEngine) {
  gannet_request_t r = GANNET_REQUEST_INIT;
  r.prompt_text = "hi";
  EXPECT_EQ(gannet_request_check(&r, nullptr), GANNET_OK) << LastError();
  r.temperature = -1;
  EXPECT_EQ(gannet_request_check(&r, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  r.temperature = 0;
  r.max_tokens = 3;
  r.min_tokens = 4;
  EXPECT_EQ(gannet_request_check(&r, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  r.min_tokens = 0;
  r.seed_mode = 7;
  EXPECT_EQ(gannet_request_check(&r, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  r.seed_mode = GANNET_SEED_FIXED;

  // Against a model: dummy models have no tokenizer, so text is refused before anything loads.
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  ASSERT_EQ(gannet_model_info("dummy:e2b", &info), GANNET_OK);
  EXPECT_EQ(gannet_request_check(&r, &info), GANNET_ERR_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("tokenizer.json"), std::string::npos) << LastError();
  const std::vector<int32_t> ids = {2, 300000};
  r = GreedyRequest(ids, 4);
  EXPECT_EQ(gannet_request_check(&r, &info), GANNET_ERR_INVALID_ARGUMENT);  // vocabulary 262144
  EXPECT_NE(LastError().find("outside the vocabulary"), std::string::npos) << LastError();
}

// A copy of a tiny model folder without tokenizer.json (hard links: no bytes copied).
std::string WithoutTokenizer(const std::string& variant) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gannet_notok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(TinyModelDir(variant))) {
    if (f.path().filename() == "tokenizer.json") continue;
    fs::path to = dir / f.path().filename();
    if (!fs::exists(to)) fs::copy_file(f.path(), to);
  }
  return dir.string();
}

TEST_F(CapiAbiTest, TokenizerApiMatchesWhatTheEngineDoes) {
  const gannet_tokenizer_t* tok = nullptr;
  ASSERT_EQ(gannet_engine_tokenizer(engine_, &tok), GANNET_OK) << LastError();
  gannet_tokenizer_info_t info = GANNET_TOKENIZER_INFO_INIT;
  ASSERT_EQ(gannet_tokenizer_get_info(tok, &info), GANNET_OK);
  EXPECT_EQ(info.vocab_size, 512);
  EXPECT_EQ(info.bos_id, 2);
  EXPECT_EQ(info.eos_id, 1);
  EXPECT_EQ(info.start_of_turn_id, 105);
  EXPECT_EQ(info.end_of_turn_id, 106);

  const std::string text = "The quick brown fox";
  size_t n = 0;
  ASSERT_EQ(gannet_tokenize(tok, text.data(), text.size(), 1, nullptr, 0, &n), GANNET_OK);
  ASSERT_GT(n, 2u);
  std::vector<int32_t> ids(n - 1);
  size_t needed = 0;
  EXPECT_EQ(gannet_tokenize(tok, text.data(), text.size(), 1, ids.data(), ids.size(), &needed),
            GANNET_ERR_RESOURCE_EXHAUSTED);
  EXPECT_EQ(needed, n);
  ids.resize(n);
  ASSERT_EQ(gannet_tokenize(tok, text.data(), text.size(), 1, ids.data(), ids.size(), &n),
            GANNET_OK);
  EXPECT_EQ(ids[0], 2);
  // The engine counts the same prompt the same way.
  gannet_request_t r = GANNET_REQUEST_INIT;
  r.prompt_text = text.c_str();
  r.max_tokens = 1;
  EXPECT_EQ(RunAlone(engine_, r).num_prompt_tokens, static_cast<int32_t>(n));

  char buf[256];
  size_t len = 0;
  ASSERT_EQ(gannet_detokenize(tok, ids.data(), ids.size(), 1, buf, sizeof(buf), &len), GANNET_OK);
  EXPECT_EQ(std::string(buf, len), text);
  EXPECT_EQ(buf[len], '\0');
  std::string pieces;
  for (size_t i = 1; i < ids.size(); ++i) {
    ASSERT_EQ(gannet_token_to_piece(tok, ids[i], buf, sizeof(buf), &len), GANNET_OK);
    pieces.append(buf, len);
  }
  EXPECT_NE(pieces.find("quick"), std::string::npos) << pieces;
  const int32_t out_of_range = 100000;
  EXPECT_EQ(gannet_detokenize(tok, &out_of_range, 1, 0, buf, sizeof(buf), &len),
            GANNET_ERR_INVALID_ARGUMENT);

  // The chat template renders what the engine tokenizes for a chat request.
  gannet_chat_message_t m[] = {{sizeof(gannet_chat_message_t), "user", "Hello!"}};
  ASSERT_EQ(gannet_apply_chat_template(tok, m, 1, 1, 0, nullptr, 0, &len), GANNET_OK);
  std::string prompt(len, '\0');
  ASSERT_EQ(gannet_apply_chat_template(tok, m, 1, 1, 0, prompt.data(), prompt.size(), &len),
            GANNET_OK);
  EXPECT_EQ(prompt.rfind("<bos><|turn>user\nHello!<turn|>\n<|turn>model\n", 0), 0u) << prompt;
  ASSERT_EQ(gannet_tokenize(tok, prompt.data(), prompt.size(), 0, nullptr, 0, &n), GANNET_OK);
  r = GANNET_REQUEST_INIT;
  r.messages = m;
  r.num_messages = 1;
  r.max_tokens = 1;
  EXPECT_EQ(RunAlone(engine_, r).num_prompt_tokens, static_cast<int32_t>(n));

  // A tokenizer opened from the folder behaves the same; a folder without one is NOT_FOUND.
  gannet_tokenizer_t* own = nullptr;
  const std::string dir = TinyModelDir("e4b");
  ASSERT_EQ(gannet_tokenizer_open(dir.c_str(), &own), GANNET_OK) << LastError();
  size_t again = 0;
  ASSERT_EQ(gannet_tokenize(own, prompt.data(), prompt.size(), 0, nullptr, 0, &again), GANNET_OK);
  EXPECT_EQ(again, n);
  gannet_tokenizer_close(own);
  const std::string bare = WithoutTokenizer("e2b");
  EXPECT_EQ(gannet_tokenizer_open(bare.c_str(), &own), GANNET_ERR_NOT_FOUND);
  gannet_engine_t* no_tok = nullptr;
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  c.model_dir = bare.c_str();
  c.backend = "cpu";
  c.max_model_len = 64;
  ASSERT_EQ(gannet_engine_create(&c, &no_tok), GANNET_OK) << LastError();
  EXPECT_EQ(gannet_engine_tokenizer(no_tok, &tok), GANNET_ERR_NOT_FOUND);
  gannet_engine_destroy(no_tok);
  std::filesystem::remove_all(bare);
}

TEST_F(CapiAbiTest, StatsNameTheBackendAndDevice) {
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  ASSERT_EQ(gannet_engine_get_stats(engine_, &s), GANNET_OK);
  EXPECT_STREQ(s.backend, "cpu");
  EXPECT_EQ(s.device_id, -1);
  EXPECT_NE(std::string(s.device_name).find("threads"), std::string::npos) << s.device_name;
  EXPECT_GT(s.load_seconds, 0.0);
  EXPECT_GT(s.kv_bytes, 0);
  EXPECT_GE(s.max_running_seqs, 1);
  EXPECT_STREQ(s.backend_fallback, "");  // "cpu" was asked for: no fallback
  EXPECT_EQ(s.timed_decode_steps, 0);
  // Decode steps run back to back are timed; on the CPU the host never waits on a device.
  const std::vector<int32_t> prompt = MakePrompt(5, 6);
  gannet_request_t r = GreedyRequest(prompt, 12);
  r.ignore_default_stop_tokens = 1;
  ASSERT_EQ(RunAlone(engine_, r).tokens.size(), 12u);
  ASSERT_EQ(gannet_engine_get_stats(engine_, &s), GANNET_OK);
  EXPECT_GE(s.timed_decode_steps, 9);  // 11 decode steps; the last one has no successor
  EXPECT_LE(s.timed_decode_steps, 11);
  EXPECT_GT(s.timed_decode_seconds, 0.0);
  EXPECT_EQ(s.timed_decode_device_seconds, 0.0);
  // An older caller's smaller struct gets what fits, and nothing past it.
  struct {
    gannet_engine_stats_t old_part;
  } small;
  std::memset(&small, 0xab, sizeof(small));
  small.old_part.struct_size = offsetof(gannet_engine_stats_t, max_running_seqs);
  ASSERT_EQ(gannet_engine_get_stats(engine_, &small.old_part), GANNET_OK);
  EXPECT_EQ(small.old_part.max_running_seqs, static_cast<int32_t>(0xabababab));
  EXPECT_EQ(small.old_part.sliding_window, s.sliding_window);
}

}  // namespace
}  // namespace gannet::testing

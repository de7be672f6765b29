// Pins the ABI (GANNET_ABI_VERSION 2): sizes and field offsets of every public struct (x86-64 /
// aarch64 LP64). A change here breaks binary compatibility: from ABI 2 on, structs may only grow
// at the end, and this file then only gains lines.
#include <cstddef>

#include "gannet/gannet.h"
#include "gtest/gtest.h"

static_assert(sizeof(gannet_status_t) == 4);
static_assert(GANNET_ABI_VERSION == 2);
static_assert(GANNET_VERSION_CODE == 200);
static_assert(offsetof(gannet_engine_config_t, struct_size) == 0);
static_assert(offsetof(gannet_request_t, struct_size) == 0);
static_assert(offsetof(gannet_event_t, struct_size) == 0);
static_assert(offsetof(gannet_chat_message_t, struct_size) == 0);
static_assert(offsetof(gannet_progress_t, struct_size) == 0);
static_assert(offsetof(gannet_engine_config_t, model_dir) == 8);
static_assert(offsetof(gannet_engine_config_t, kv_memory_bytes) == 48);
static_assert(offsetof(gannet_engine_config_t, load_format) == 80);
static_assert(offsetof(gannet_engine_config_t, progress_callback) == 88);
static_assert(offsetof(gannet_engine_config_t, draft_model_dir) == 104);
static_assert(offsetof(gannet_engine_config_t, num_speculative_tokens) == 112);
static_assert(offsetof(gannet_engine_config_t, max_prefill_tokens_while_decoding) == 120);
static_assert(offsetof(gannet_engine_config_t, tensor_parallel_size) == 128);
static_assert(offsetof(gannet_engine_config_t, num_device_ids) == 132);
static_assert(offsetof(gannet_engine_config_t, device_ids) == 136);
static_assert(offsetof(gannet_engine_config_t, tp_rank) == 144);
static_assert(offsetof(gannet_engine_config_t, tp_id) == 152);
static_assert(offsetof(gannet_engine_config_t, kv_cache_dtype) == 160);
static_assert(offsetof(gannet_engine_config_t, kv_separate_k_eq_v) == 168);
static_assert(offsetof(gannet_engine_config_t, compute_dtype) == 176);
static_assert(offsetof(gannet_engine_config_t, startup_warmup) == 184);
static_assert(offsetof(gannet_engine_config_t, max_undelivered_tokens) == 192);
static_assert(offsetof(gannet_engine_config_t, max_undelivered_tokens_per_request) == 200);
static_assert(offsetof(gannet_engine_config_t, weight_dtype) == 208);
static_assert(sizeof(gannet_engine_config_t) == 216);
static_assert(offsetof(gannet_tp_id_t, bytes) == 0);
static_assert(sizeof(gannet_tp_id_t) == 128);
static_assert(offsetof(gannet_progress_t, stage) == 8);
static_assert(offsetof(gannet_progress_t, fraction) == 16);
static_assert(offsetof(gannet_progress_t, bytes_done) == 24);
static_assert(offsetof(gannet_progress_t, eta_s) == 56);
static_assert(sizeof(gannet_progress_t) == 64);
static_assert(offsetof(gannet_chat_message_t, role) == 8);
static_assert(offsetof(gannet_chat_message_t, content) == 16);
static_assert(sizeof(gannet_chat_message_t) == 24);
static_assert(offsetof(gannet_request_t, prompt_tokens) == 8);
static_assert(offsetof(gannet_request_t, prompt_text) == 24);
static_assert(offsetof(gannet_request_t, messages) == 32);
static_assert(offsetof(gannet_request_t, max_tokens) == 48);
static_assert(offsetof(gannet_request_t, temperature) == 56);
static_assert(offsetof(gannet_request_t, frequency_penalty) == 80);
static_assert(offsetof(gannet_request_t, seed_mode) == 84);
static_assert(offsetof(gannet_request_t, seed) == 88);
static_assert(offsetof(gannet_request_t, stop_token_ids) == 96);
static_assert(offsetof(gannet_request_t, ignore_default_stop_tokens) == 112);
static_assert(offsetof(gannet_request_t, stop_strings) == 120);
static_assert(offsetof(gannet_request_t, logprobs) == 136);
static_assert(offsetof(gannet_request_t, deadline_ms) == 144);
static_assert(offsetof(gannet_request_t, enable_thinking) == 156);
static_assert(offsetof(gannet_request_t, disable_speculation) == 160);
static_assert(offsetof(gannet_request_t, split_special_tokens) == 168);
static_assert(offsetof(gannet_request_t, chat_json) == 176);
static_assert(offsetof(gannet_request_t, reply_prefix) == 184);
static_assert(sizeof(gannet_request_t) == 192);
static_assert(offsetof(gannet_event_t, type) == 4);
static_assert(offsetof(gannet_event_t, request_id) == 8);
static_assert(offsetof(gannet_event_t, token_id) == 16);
static_assert(offsetof(gannet_event_t, text) == 24);
static_assert(offsetof(gannet_event_t, text_len) == 32);
static_assert(offsetof(gannet_event_t, logprob) == 40);
static_assert(offsetof(gannet_event_t, finish_reason) == 44);
static_assert(offsetof(gannet_event_t, top_token_ids) == 48);
static_assert(offsetof(gannet_event_t, status) == 64);
static_assert(offsetof(gannet_event_t, num_prompt_tokens) == 68);
static_assert(offsetof(gannet_event_t, message) == 72);
static_assert(offsetof(gannet_event_t, num_generated_tokens) == 80);
static_assert(offsetof(gannet_event_t, num_cached_prompt_tokens) == 84);
static_assert(offsetof(gannet_event_t, num_draft_tokens) == 88);
static_assert(offsetof(gannet_event_t, num_accepted_draft_tokens) == 92);
static_assert(offsetof(gannet_event_t, thinking) == 96);
static_assert(sizeof(gannet_event_t) == 104);
static_assert(offsetof(gannet_model_info_t, num_parameters) == 136);
static_assert(offsetof(gannet_model_info_t, kv_bytes_per_token_full) == 248);
static_assert(offsetof(gannet_model_info_t, weight_format) == 256);
static_assert(offsetof(gannet_model_info_t, weight_bytes_attention) == 320);
static_assert(offsetof(gannet_model_info_t, kept_plain) == 360);
static_assert(sizeof(gannet_model_info_t) == 488);
static_assert(offsetof(gannet_engine_stats_t, kv_pages_total) == 12);
static_assert(offsetof(gannet_engine_stats_t, prefix_cache_hit_tokens) == 48);
static_assert(offsetof(gannet_engine_stats_t, weight_bytes) == 120);
static_assert(offsetof(gannet_engine_stats_t, max_running_seqs) == 152);
static_assert(offsetof(gannet_engine_stats_t, kv_bytes) == 160);
static_assert(offsetof(gannet_engine_stats_t, load_seconds) == 176);
static_assert(offsetof(gannet_engine_stats_t, backend) == 184);
static_assert(offsetof(gannet_engine_stats_t, device_name) == 200);
static_assert(offsetof(gannet_engine_stats_t, backend_fallback) == 296);
static_assert(offsetof(gannet_engine_stats_t, num_speculative_tokens) == 552);
static_assert(offsetof(gannet_engine_stats_t, spec_verify_chunks) == 560);
static_assert(offsetof(gannet_engine_stats_t, spec_mean_accepted_length) == 584);
static_assert(offsetof(gannet_engine_stats_t, spec_draft_rounds) == 592);
static_assert(offsetof(gannet_engine_stats_t, timed_decode_steps) == 600);
static_assert(offsetof(gannet_engine_stats_t, timed_decode_device_seconds) == 616);
static_assert(offsetof(gannet_engine_stats_t, kv_cache_dtype) == 624);
static_assert(offsetof(gannet_engine_stats_t, compute_dtype) == 640);
static_assert(sizeof(gannet_engine_stats_t) == 648);
static_assert(offsetof(gannet_tokenizer_info_t, vocab_size) == 4);
static_assert(offsetof(gannet_tokenizer_info_t, end_of_turn_id) == 28);
static_assert(sizeof(gannet_tokenizer_info_t) == 32);

TEST(LayoutTest, InitMacrosSetSizesAndDefaults) {
  gannet_request_t r = GANNET_REQUEST_INIT;
  EXPECT_EQ(r.struct_size, sizeof(gannet_request_t));
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_EQ(r.seed_mode, GANNET_SEED_RANDOM);
  EXPECT_EQ(r.split_special_tokens, 0);
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  EXPECT_EQ(c.struct_size, sizeof(gannet_engine_config_t));
  EXPECT_EQ(c.model_dir, nullptr);
  EXPECT_EQ(c.tensor_parallel_size, 0);
  EXPECT_EQ(c.num_device_ids, 0);
  EXPECT_EQ(c.device_ids, nullptr);
  EXPECT_EQ(c.tp_rank, 0);
  EXPECT_EQ(c.tp_id, nullptr);
  EXPECT_EQ(c.kv_cache_dtype, nullptr);
  EXPECT_EQ(c.kv_separate_k_eq_v, 0);
  EXPECT_EQ(c.compute_dtype, nullptr);
  EXPECT_EQ(c.startup_warmup, 0);
  EXPECT_EQ(c.max_undelivered_tokens, 0);
  EXPECT_EQ(c.max_undelivered_tokens_per_request, 0);
  gannet_chat_message_t m = GANNET_CHAT_MESSAGE_INIT;
  EXPECT_EQ(m.struct_size, sizeof(gannet_chat_message_t));
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  EXPECT_EQ(s.struct_size, sizeof(gannet_engine_stats_t));
  EXPECT_STREQ(s.kv_cache_dtype, "");
  gannet_model_info_t i = GANNET_MODEL_INFO_INIT;
  EXPECT_EQ(i.struct_size, sizeof(gannet_model_info_t));
  gannet_tokenizer_info_t t = GANNET_TOKENIZER_INFO_INIT;
  EXPECT_EQ(t.struct_size, sizeof(gannet_tokenizer_info_t));
}

TEST(LayoutTest, VersionQueriesMatchTheHeader) {
  EXPECT_EQ(gannet_version_code(), GANNET_VERSION_CODE);
  EXPECT_EQ(gannet_abi_version(), GANNET_ABI_VERSION);
  EXPECT_STREQ(gannet_version(), "0.2.0");
}

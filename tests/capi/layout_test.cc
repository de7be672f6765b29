// Pins the ABI: sizes and field offsets of every public struct (x86-64 / aarch64 LP64). A change
// here breaks binary compatibility and must only ever append fields.
#include <cstddef>

#include "gannet/gannet.h"
#include "gtest/gtest.h"

static_assert(sizeof(gannet_status_t) == 4);
static_assert(offsetof(gannet_engine_config_t, struct_size) == 0);
static_assert(offsetof(gannet_engine_config_t, model_dir) == 8);
static_assert(offsetof(gannet_engine_config_t, backend) == 16);
static_assert(offsetof(gannet_engine_config_t, device_id) == 24);
static_assert(offsetof(gannet_engine_config_t, kv_memory_bytes) == 48);
static_assert(offsetof(gannet_engine_config_t, load_format) == 80);
static_assert(offsetof(gannet_engine_config_t, progress_callback) == 88);
static_assert(sizeof(gannet_engine_config_t) == 104);

static_assert(offsetof(gannet_sampling_params_t, temperature) == 4);
static_assert(offsetof(gannet_sampling_params_t, has_seed) == 32);
static_assert(offsetof(gannet_sampling_params_t, seed) == 40);
static_assert(sizeof(gannet_sampling_params_t) == 48);

static_assert(sizeof(gannet_chat_message_t) == 16);

static_assert(offsetof(gannet_request_t, prompt_tokens) == 8);
static_assert(offsetof(gannet_request_t, prompt_text) == 24);
static_assert(offsetof(gannet_request_t, sampling) == 48);
static_assert(offsetof(gannet_request_t, max_tokens) == 96);
static_assert(offsetof(gannet_request_t, stop_token_ids) == 104);
static_assert(offsetof(gannet_request_t, stop_strings) == 128);
static_assert(offsetof(gannet_request_t, logprobs) == 144);
static_assert(offsetof(gannet_request_t, deadline_ms) == 152);
static_assert(offsetof(gannet_request_t, enable_thinking) == 164);
static_assert(sizeof(gannet_request_t) == 168);

static_assert(offsetof(gannet_event_t, request_id) == 0);
static_assert(offsetof(gannet_event_t, type) == 8);
static_assert(offsetof(gannet_event_t, text) == 16);
static_assert(offsetof(gannet_event_t, top_token_ids) == 40);
static_assert(offsetof(gannet_event_t, finish_reason) == 56);
static_assert(offsetof(gannet_event_t, message) == 64);
static_assert(sizeof(gannet_event_t) == 88);

static_assert(offsetof(gannet_model_info_t, model_type) == 4);
static_assert(offsetof(gannet_model_info_t, num_parameters) == 136);
static_assert(offsetof(gannet_model_info_t, kv_bytes_per_token_full) == 248);
static_assert(sizeof(gannet_model_info_t) == 256);

static_assert(offsetof(gannet_engine_stats_t, kv_pages_total) == 12);
static_assert(offsetof(gannet_engine_stats_t, prefix_cache_hit_tokens) == 48);
static_assert(offsetof(gannet_engine_stats_t, weight_bytes) == 120);
static_assert(sizeof(gannet_engine_stats_t) == 152);

TEST(LayoutTest, InitMacrosSetSizes) {
  gannet_request_t r = GANNET_REQUEST_INIT;
  EXPECT_EQ(r.struct_size, sizeof(gannet_request_t));
  EXPECT_EQ(r.sampling.struct_size, sizeof(gannet_sampling_params_t));
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  EXPECT_EQ(c.struct_size, sizeof(gannet_engine_config_t));
  EXPECT_EQ(c.model_dir, nullptr);
}

/* Prints the layout of include/gannet/gannet.h as the C compiler sees it, for bindings that mirror
 * the header by hand (examples/rust/gannet-sys, tests/layout.rs) to compare against:
 *   size TYPE BYTES                every struct
 *   field TYPE.FIELD OFFSET SIZE   every field of every struct
 *   const NAME VALUE               every integer constant
 * A struct or field added to gannet.h belongs here too. */
#include <stddef.h>
#include <stdio.h>

#include "gannet/gannet.h"

#define SIZE(type) printf("size %s %zu\n", #type, sizeof(type))
#define FIELD(type, field) \
  printf("field %s.%s %zu %zu\n", #type, #field, offsetof(type, field), sizeof(((type*)0)->field))
#define CONST(name) printf("const %s %lld\n", #name, (long long)(name))

int main(void) {
  SIZE(gannet_status_t);

  SIZE(gannet_progress_t);
  FIELD(gannet_progress_t, struct_size);
  FIELD(gannet_progress_t, stage);
  FIELD(gannet_progress_t, fraction);
  FIELD(gannet_progress_t, bytes_done);
  FIELD(gannet_progress_t, bytes_total);
  FIELD(gannet_progress_t, elapsed_s);
  FIELD(gannet_progress_t, bytes_per_s);
  FIELD(gannet_progress_t, eta_s);

  SIZE(gannet_engine_config_t);
  FIELD(gannet_engine_config_t, struct_size);
  FIELD(gannet_engine_config_t, model_dir);
  FIELD(gannet_engine_config_t, backend);
  FIELD(gannet_engine_config_t, device_id);
  FIELD(gannet_engine_config_t, max_running_seqs);
  FIELD(gannet_engine_config_t, max_step_tokens);
  FIELD(gannet_engine_config_t, max_model_len);
  FIELD(gannet_engine_config_t, page_size);
  FIELD(gannet_engine_config_t, kv_memory_bytes);
  FIELD(gannet_engine_config_t, kv_sliding_pages);
  FIELD(gannet_engine_config_t, kv_full_pages);
  FIELD(gannet_engine_config_t, disable_prefix_cache);
  FIELD(gannet_engine_config_t, num_threads);
  FIELD(gannet_engine_config_t, max_queued_requests);
  FIELD(gannet_engine_config_t, disable_cuda_graphs);
  FIELD(gannet_engine_config_t, load_format);
  FIELD(gannet_engine_config_t, progress_callback);
  FIELD(gannet_engine_config_t, progress_user_data);
  FIELD(gannet_engine_config_t, draft_model_dir);
  FIELD(gannet_engine_config_t, num_speculative_tokens);
  FIELD(gannet_engine_config_t, max_prefill_tokens_while_decoding);
  FIELD(gannet_engine_config_t, tensor_parallel_size);
  FIELD(gannet_engine_config_t, num_device_ids);
  FIELD(gannet_engine_config_t, device_ids);
  FIELD(gannet_engine_config_t, tp_rank);
  FIELD(gannet_engine_config_t, tp_id);
  FIELD(gannet_engine_config_t, kv_cache_dtype);
  FIELD(gannet_engine_config_t, kv_separate_k_eq_v);
  FIELD(gannet_engine_config_t, compute_dtype);
  FIELD(gannet_engine_config_t, startup_warmup);
  FIELD(gannet_engine_config_t, max_undelivered_tokens);
  FIELD(gannet_engine_config_t, max_undelivered_tokens_per_request);
  FIELD(gannet_engine_config_t, weight_dtype);

  SIZE(gannet_tp_id_t);
  FIELD(gannet_tp_id_t, bytes);

  SIZE(gannet_model_info_t);
  FIELD(gannet_model_info_t, struct_size);
  FIELD(gannet_model_info_t, model_type);
  FIELD(gannet_model_info_t, variant);
  FIELD(gannet_model_info_t, dtypes);
  FIELD(gannet_model_info_t, num_parameters);
  FIELD(gannet_model_info_t, weight_bytes);
  FIELD(gannet_model_info_t, skipped_tower_bytes);
  FIELD(gannet_model_info_t, num_shards);
  FIELD(gannet_model_info_t, has_tokenizer);
  FIELD(gannet_model_info_t, num_layers);
  FIELD(gannet_model_info_t, num_sliding_layers);
  FIELD(gannet_model_info_t, num_full_layers);
  FIELD(gannet_model_info_t, num_kv_shared_layers);
  FIELD(gannet_model_info_t, hidden_size);
  FIELD(gannet_model_info_t, vocab_size);
  FIELD(gannet_model_info_t, max_position_embeddings);
  FIELD(gannet_model_info_t, sliding_window);
  FIELD(gannet_model_info_t, num_attention_heads);
  FIELD(gannet_model_info_t, num_kv_heads);
  FIELD(gannet_model_info_t, num_full_kv_heads);
  FIELD(gannet_model_info_t, head_dim);
  FIELD(gannet_model_info_t, full_head_dim);
  FIELD(gannet_model_info_t, num_experts);
  FIELD(gannet_model_info_t, top_k_experts);
  FIELD(gannet_model_info_t, kv_bytes_per_token_sliding);
  FIELD(gannet_model_info_t, kv_bytes_per_token_full);
  FIELD(gannet_model_info_t, weight_format);
  FIELD(gannet_model_info_t, weight_bytes_attention);
  FIELD(gannet_model_info_t, weight_bytes_mlp);
  FIELD(gannet_model_info_t, weight_bytes_experts);
  FIELD(gannet_model_info_t, weight_bytes_embeddings);
  FIELD(gannet_model_info_t, weight_bytes_other);
  FIELD(gannet_model_info_t, kept_plain);
  FIELD(gannet_model_info_t, has_vision);
  FIELD(gannet_model_info_t, image_token_id);

  SIZE(gannet_chat_message_t);
  FIELD(gannet_chat_message_t, struct_size);
  FIELD(gannet_chat_message_t, role);
  FIELD(gannet_chat_message_t, content);

  SIZE(gannet_request_t);
  FIELD(gannet_request_t, struct_size);
  FIELD(gannet_request_t, prompt_tokens);
  FIELD(gannet_request_t, num_prompt_tokens);
  FIELD(gannet_request_t, prompt_text);
  FIELD(gannet_request_t, messages);
  FIELD(gannet_request_t, num_messages);
  FIELD(gannet_request_t, max_tokens);
  FIELD(gannet_request_t, min_tokens);
  FIELD(gannet_request_t, temperature);
  FIELD(gannet_request_t, top_k);
  FIELD(gannet_request_t, top_p);
  FIELD(gannet_request_t, min_p);
  FIELD(gannet_request_t, repetition_penalty);
  FIELD(gannet_request_t, presence_penalty);
  FIELD(gannet_request_t, frequency_penalty);
  FIELD(gannet_request_t, seed_mode);
  FIELD(gannet_request_t, seed);
  FIELD(gannet_request_t, stop_token_ids);
  FIELD(gannet_request_t, num_stop_token_ids);
  FIELD(gannet_request_t, ignore_default_stop_tokens);
  FIELD(gannet_request_t, stop_strings);
  FIELD(gannet_request_t, num_stop_strings);
  FIELD(gannet_request_t, logprobs);
  FIELD(gannet_request_t, priority);
  FIELD(gannet_request_t, deadline_ms);
  FIELD(gannet_request_t, add_generation_prompt);
  FIELD(gannet_request_t, enable_thinking);
  FIELD(gannet_request_t, disable_speculation);
  FIELD(gannet_request_t, split_special_tokens);
  FIELD(gannet_request_t, chat_json);
  FIELD(gannet_request_t, reply_prefix);
  FIELD(gannet_request_t, images);
  FIELD(gannet_request_t, num_images);
  SIZE(gannet_image_t);
  FIELD(gannet_image_t, struct_size);
  FIELD(gannet_image_t, max_soft_tokens);
  FIELD(gannet_image_t, data);
  FIELD(gannet_image_t, size);
  FIELD(gannet_image_t, rgb);
  FIELD(gannet_image_t, width);
  FIELD(gannet_image_t, height);

  SIZE(gannet_event_t);
  FIELD(gannet_event_t, struct_size);
  FIELD(gannet_event_t, type);
  FIELD(gannet_event_t, request_id);
  FIELD(gannet_event_t, token_id);
  FIELD(gannet_event_t, num_top_logprobs);
  FIELD(gannet_event_t, text);
  FIELD(gannet_event_t, text_len);
  FIELD(gannet_event_t, logprob);
  FIELD(gannet_event_t, finish_reason);
  FIELD(gannet_event_t, top_token_ids);
  FIELD(gannet_event_t, top_logprobs);
  FIELD(gannet_event_t, status);
  FIELD(gannet_event_t, num_prompt_tokens);
  FIELD(gannet_event_t, message);
  FIELD(gannet_event_t, num_generated_tokens);
  FIELD(gannet_event_t, num_cached_prompt_tokens);
  FIELD(gannet_event_t, num_draft_tokens);
  FIELD(gannet_event_t, num_accepted_draft_tokens);
  FIELD(gannet_event_t, thinking);

  SIZE(gannet_engine_stats_t);
  FIELD(gannet_engine_stats_t, struct_size);
  FIELD(gannet_engine_stats_t, num_running);
  FIELD(gannet_engine_stats_t, num_waiting);
  FIELD(gannet_engine_stats_t, kv_pages_total);
  FIELD(gannet_engine_stats_t, kv_pages_used);
  FIELD(gannet_engine_stats_t, kv_pages_cached);
  FIELD(gannet_engine_stats_t, kv_pages_free);
  FIELD(gannet_engine_stats_t, page_size);
  FIELD(gannet_engine_stats_t, prefix_cache_hit_tokens);
  FIELD(gannet_engine_stats_t, prefix_cache_query_tokens);
  FIELD(gannet_engine_stats_t, prefix_cache_hit_rate);
  FIELD(gannet_engine_stats_t, total_prompt_tokens);
  FIELD(gannet_engine_stats_t, total_generated_tokens);
  FIELD(gannet_engine_stats_t, num_preemptions);
  FIELD(gannet_engine_stats_t, num_steps);
  FIELD(gannet_engine_stats_t, prompt_tokens_per_s);
  FIELD(gannet_engine_stats_t, generated_tokens_per_s);
  FIELD(gannet_engine_stats_t, weight_bytes);
  FIELD(gannet_engine_stats_t, kv_bytes_per_token);
  FIELD(gannet_engine_stats_t, sliding_window);
  FIELD(gannet_engine_stats_t, max_model_len);
  FIELD(gannet_engine_stats_t, max_running_seqs);
  FIELD(gannet_engine_stats_t, device_id);
  FIELD(gannet_engine_stats_t, kv_bytes);
  FIELD(gannet_engine_stats_t, device_memory_bytes);
  FIELD(gannet_engine_stats_t, load_seconds);
  FIELD(gannet_engine_stats_t, backend);
  FIELD(gannet_engine_stats_t, device_name);
  FIELD(gannet_engine_stats_t, backend_fallback);
  FIELD(gannet_engine_stats_t, num_speculative_tokens);
  FIELD(gannet_engine_stats_t, spec_verify_chunks);
  FIELD(gannet_engine_stats_t, spec_draft_tokens);
  FIELD(gannet_engine_stats_t, spec_accepted_tokens);
  FIELD(gannet_engine_stats_t, spec_mean_accepted_length);
  FIELD(gannet_engine_stats_t, spec_draft_rounds);
  FIELD(gannet_engine_stats_t, timed_decode_steps);
  FIELD(gannet_engine_stats_t, timed_decode_seconds);
  FIELD(gannet_engine_stats_t, timed_decode_device_seconds);
  FIELD(gannet_engine_stats_t, kv_cache_dtype);
  FIELD(gannet_engine_stats_t, compute_dtype);

  SIZE(gannet_tokenizer_info_t);
  FIELD(gannet_tokenizer_info_t, struct_size);
  FIELD(gannet_tokenizer_info_t, vocab_size);
  FIELD(gannet_tokenizer_info_t, bos_id);
  FIELD(gannet_tokenizer_info_t, eos_id);
  FIELD(gannet_tokenizer_info_t, pad_id);
  FIELD(gannet_tokenizer_info_t, unk_id);
  FIELD(gannet_tokenizer_info_t, start_of_turn_id);
  FIELD(gannet_tokenizer_info_t, end_of_turn_id);

  CONST(GANNET_VERSION_MAJOR);
  CONST(GANNET_VERSION_MINOR);
  CONST(GANNET_VERSION_PATCH);
  CONST(GANNET_VERSION_CODE);
  CONST(GANNET_ABI_VERSION);
  CONST(GANNET_OK);
  CONST(GANNET_ERR_INVALID_ARGUMENT);
  CONST(GANNET_ERR_NOT_FOUND);
  CONST(GANNET_ERR_OUT_OF_MEMORY);
  CONST(GANNET_ERR_RESOURCE_EXHAUSTED);
  CONST(GANNET_ERR_UNIMPLEMENTED);
  CONST(GANNET_ERR_DATA_LOSS);
  CONST(GANNET_ERR_DEVICE_LOST);
  CONST(GANNET_ERR_CANCELLED);
  CONST(GANNET_ERR_DEADLINE_EXCEEDED);
  CONST(GANNET_ERR_FAILED_PRECONDITION);
  CONST(GANNET_ERR_INTERNAL);
  CONST(GANNET_LOG_LEVEL_DEBUG);
  CONST(GANNET_LOG_LEVEL_INFO);
  CONST(GANNET_LOG_LEVEL_WARNING);
  CONST(GANNET_LOG_LEVEL_ERROR);
  CONST(GANNET_LOG_LEVEL_OFF);
  CONST(GANNET_SEED_RANDOM);
  CONST(GANNET_SEED_FIXED);
  CONST(GANNET_SEED_REQUEST_ID);
  CONST(GANNET_EVENT_TOKEN);
  CONST(GANNET_EVENT_FINISH);
  CONST(GANNET_EVENT_ERROR);
  CONST(GANNET_FINISH_STOP);
  CONST(GANNET_FINISH_LENGTH);
  CONST(GANNET_FINISH_CANCELLED);
  CONST(GANNET_FINISH_ERROR);
  return 0;
}

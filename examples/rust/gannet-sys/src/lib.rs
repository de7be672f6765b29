//! Raw declarations of gannet's C ABI, written by hand to mirror `include/gannet/gannet.h`
//! field for field. The comments of the header apply; the safe API is the `gannet` crate.
//!
//! Every struct is `#[repr(C)]` and its size and field offsets are checked at compile time
//! against the numbers `tests/capi/layout_test.cc` pins for the C header (LP64). The `*_INIT`
//! macros are the `Default` impls and the `*_init()` functions.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};
use std::mem::{offset_of, size_of};

// ---- status ------------------------------------------------------------------------------

pub type gannet_status_t = i32;

pub const GANNET_VERSION_MAJOR: u32 = 0;
pub const GANNET_VERSION_MINOR: u32 = 1;
pub const GANNET_VERSION_PATCH: u32 = 0;

pub const GANNET_OK: gannet_status_t = 0;
pub const GANNET_ERR_INVALID_ARGUMENT: gannet_status_t = 1;
pub const GANNET_ERR_NOT_FOUND: gannet_status_t = 2;
pub const GANNET_ERR_OUT_OF_MEMORY: gannet_status_t = 3;
pub const GANNET_ERR_RESOURCE_EXHAUSTED: gannet_status_t = 4;
pub const GANNET_ERR_UNIMPLEMENTED: gannet_status_t = 5;
pub const GANNET_ERR_DATA_LOSS: gannet_status_t = 6;
pub const GANNET_ERR_DEVICE_LOST: gannet_status_t = 7;
pub const GANNET_ERR_CANCELLED: gannet_status_t = 8;
pub const GANNET_ERR_DEADLINE_EXCEEDED: gannet_status_t = 9;
pub const GANNET_ERR_FAILED_PRECONDITION: gannet_status_t = 10;
pub const GANNET_ERR_INTERNAL: gannet_status_t = 11;

// ---- logging -----------------------------------------------------------------------------

pub const GANNET_LOG_LEVEL_DEBUG: i32 = 0;
pub const GANNET_LOG_LEVEL_INFO: i32 = 1;
pub const GANNET_LOG_LEVEL_WARNING: i32 = 2;
pub const GANNET_LOG_LEVEL_ERROR: i32 = 3;
pub const GANNET_LOG_LEVEL_OFF: i32 = 4;

pub type gannet_log_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, level: i32, message: *const c_char)>;

// ---- engine ------------------------------------------------------------------------------

/// Opaque engine handle.
#[repr(C)]
pub struct gannet_engine_t {
    _private: [u8; 0],
}

pub type gannet_progress_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, stage: *const c_char, fraction: f64)>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_engine_config_t {
    pub struct_size: u32,
    pub model_dir: *const c_char,
    pub backend: *const c_char,
    pub device_id: i32,
    pub max_running_seqs: i32,
    pub max_step_tokens: i32,
    pub max_model_len: i32,
    pub page_size: i32,
    pub kv_memory_bytes: i64,
    pub kv_sliding_pages: i32,
    pub kv_full_pages: i32,
    pub disable_prefix_cache: i32,
    pub num_threads: i32,
    pub max_queued_requests: i32,
    pub disable_cuda_graphs: i32,
    pub load_format: *const c_char,
    pub progress_callback: gannet_progress_fn,
    pub progress_user_data: *mut c_void,
}

impl Default for gannet_engine_config_t {
    /// `GANNET_ENGINE_CONFIG_INIT`.
    fn default() -> Self {
        Self {
            struct_size: size_of::<Self>() as u32,
            model_dir: std::ptr::null(),
            backend: std::ptr::null(),
            device_id: 0,
            max_running_seqs: 0,
            max_step_tokens: 0,
            max_model_len: 0,
            page_size: 0,
            kv_memory_bytes: 0,
            kv_sliding_pages: 0,
            kv_full_pages: 0,
            disable_prefix_cache: 0,
            num_threads: 0,
            max_queued_requests: 0,
            disable_cuda_graphs: 0,
            load_format: std::ptr::null(),
            progress_callback: None,
            progress_user_data: std::ptr::null_mut(),
        }
    }
}

// ---- model information -------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_model_info_t {
    pub struct_size: u32,
    pub model_type: [c_char; 32],
    pub variant: [c_char; 64],
    pub dtypes: [c_char; 32],
    pub num_parameters: i64,
    pub weight_bytes: i64,
    pub skipped_tower_bytes: i64,
    pub num_shards: i32,
    pub has_tokenizer: i32,
    pub num_layers: i32,
    pub num_sliding_layers: i32,
    pub num_full_layers: i32,
    pub num_kv_shared_layers: i32,
    pub hidden_size: i64,
    pub vocab_size: i64,
    pub max_position_embeddings: i64,
    pub sliding_window: i32,
    pub num_attention_heads: i32,
    pub num_kv_heads: i32,
    pub num_full_kv_heads: i32,
    pub head_dim: i32,
    pub full_head_dim: i32,
    pub num_experts: i32,
    pub top_k_experts: i32,
    pub kv_bytes_per_token_sliding: i64,
    pub kv_bytes_per_token_full: i64,
}

impl Default for gannet_model_info_t {
    /// All zero, with `struct_size` set (the library fills what fits).
    fn default() -> Self {
        // SAFETY: every field is an integer or an integer array; all-zero is a valid value.
        let mut info: Self = unsafe { std::mem::zeroed() };
        info.struct_size = size_of::<Self>() as u32;
        info
    }
}

// ---- requests ----------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct gannet_sampling_params_t {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub has_seed: i32,
    pub seed: u64,
}

impl Default for gannet_sampling_params_t {
    /// `GANNET_SAMPLING_PARAMS_INIT`.
    fn default() -> Self {
        Self {
            struct_size: size_of::<Self>() as u32,
            temperature: 0.0,
            top_k: 0,
            top_p: 0.0,
            min_p: 0.0,
            repetition_penalty: 0.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            has_seed: 0,
            seed: 0,
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_chat_message_t {
    pub role: *const c_char,
    pub content: *const c_char,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_request_t {
    pub struct_size: u32,
    pub prompt_tokens: *const i32,
    pub num_prompt_tokens: usize,
    pub prompt_text: *const c_char,
    pub messages: *const gannet_chat_message_t,
    pub num_messages: usize,
    pub sampling: gannet_sampling_params_t,
    pub max_tokens: i32,
    pub min_tokens: i32,
    pub stop_token_ids: *const i32,
    pub num_stop_token_ids: usize,
    pub ignore_default_stop_tokens: i32,
    pub stop_strings: *const *const c_char,
    pub num_stop_strings: usize,
    pub logprobs: i32,
    pub priority: i32,
    pub deadline_ms: i64,
    pub add_generation_prompt: i32,
    pub enable_thinking: i32,
}

impl Default for gannet_request_t {
    /// `GANNET_REQUEST_INIT`.
    fn default() -> Self {
        Self {
            struct_size: size_of::<Self>() as u32,
            prompt_tokens: std::ptr::null(),
            num_prompt_tokens: 0,
            prompt_text: std::ptr::null(),
            messages: std::ptr::null(),
            num_messages: 0,
            sampling: gannet_sampling_params_t::default(),
            max_tokens: 0,
            min_tokens: 0,
            stop_token_ids: std::ptr::null(),
            num_stop_token_ids: 0,
            ignore_default_stop_tokens: 0,
            stop_strings: std::ptr::null(),
            num_stop_strings: 0,
            logprobs: 0,
            priority: 0,
            deadline_ms: 0,
            add_generation_prompt: 0,
            enable_thinking: 0,
        }
    }
}

// ---- events ------------------------------------------------------------------------------

pub const GANNET_EVENT_TOKEN: i32 = 1;
pub const GANNET_EVENT_FINISH: i32 = 2;
pub const GANNET_EVENT_ERROR: i32 = 3;

pub const GANNET_FINISH_STOP: i32 = 1;
pub const GANNET_FINISH_LENGTH: i32 = 2;
pub const GANNET_FINISH_CANCELLED: i32 = 3;
pub const GANNET_FINISH_ERROR: i32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_event_t {
    pub request_id: u64,
    pub r#type: i32,
    pub token_id: i32,
    pub text: *const c_char,
    pub text_len: usize,
    pub logprob: f32,
    pub num_top_logprobs: i32,
    pub top_token_ids: *const i32,
    pub top_logprobs: *const f32,
    pub finish_reason: i32,
    pub status: gannet_status_t,
    pub message: *const c_char,
    pub num_prompt_tokens: i32,
    pub num_generated_tokens: i32,
    pub num_cached_prompt_tokens: i32,
}

// ---- statistics --------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_engine_stats_t {
    pub struct_size: u32,
    pub num_running: i32,
    pub num_waiting: i32,
    pub kv_pages_total: [i32; 2],
    pub kv_pages_used: [i32; 2],
    pub kv_pages_cached: [i32; 2],
    pub kv_pages_free: [i32; 2],
    pub page_size: i32,
    pub prefix_cache_hit_tokens: i64,
    pub prefix_cache_query_tokens: i64,
    pub prefix_cache_hit_rate: f64,
    pub total_prompt_tokens: i64,
    pub total_generated_tokens: i64,
    pub num_preemptions: i64,
    pub num_steps: i64,
    pub prompt_tokens_per_s: f64,
    pub generated_tokens_per_s: f64,
    pub weight_bytes: i64,
    pub kv_bytes_per_token: [i64; 2],
    pub sliding_window: i32,
    pub max_model_len: i32,
}

impl Default for gannet_engine_stats_t {
    /// `GANNET_ENGINE_STATS_INIT`.
    fn default() -> Self {
        // SAFETY: every field is an integer, a float or an array of them; all-zero is valid.
        let mut stats: Self = unsafe { std::mem::zeroed() };
        stats.struct_size = size_of::<Self>() as u32;
        stats
    }
}

// ---- functions ---------------------------------------------------------------------------

extern "C" {
    pub fn gannet_status_string(status: gannet_status_t) -> *const c_char;
    pub fn gannet_last_error_message() -> *const c_char;
    pub fn gannet_version() -> *const c_char;

    pub fn gannet_set_log_callback(fn_: gannet_log_fn, user_data: *mut c_void, min_level: i32);

    pub fn gannet_engine_create(
        config: *const gannet_engine_config_t,
        engine_out: *mut *mut gannet_engine_t,
    ) -> gannet_status_t;
    pub fn gannet_engine_destroy(engine: *mut gannet_engine_t);

    pub fn gannet_model_info(
        model_dir: *const c_char,
        info_out: *mut gannet_model_info_t,
    ) -> gannet_status_t;

    pub fn gannet_engine_submit(
        engine: *mut gannet_engine_t,
        request: *const gannet_request_t,
        request_id_out: *mut u64,
    ) -> gannet_status_t;
    pub fn gannet_engine_cancel(engine: *mut gannet_engine_t, request_id: u64) -> gannet_status_t;

    pub fn gannet_engine_poll(
        engine: *mut gannet_engine_t,
        timeout_ms: i32,
        max_events: usize,
        events_out: *mut *const gannet_event_t,
        num_events_out: *mut usize,
    ) -> gannet_status_t;

    pub fn gannet_engine_get_stats(
        engine: *mut gannet_engine_t,
        stats_out: *mut gannet_engine_stats_t,
    ) -> gannet_status_t;
}

// ---- layout: the numbers of tests/capi/layout_test.cc ------------------------------------

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<gannet_status_t>() == 4);
    assert!(offset_of!(gannet_engine_config_t, model_dir) == 8);
    assert!(offset_of!(gannet_engine_config_t, backend) == 16);
    assert!(offset_of!(gannet_engine_config_t, device_id) == 24);
    assert!(offset_of!(gannet_engine_config_t, kv_memory_bytes) == 48);
    assert!(offset_of!(gannet_engine_config_t, load_format) == 80);
    assert!(offset_of!(gannet_engine_config_t, progress_callback) == 88);
    assert!(size_of::<gannet_engine_config_t>() == 104);

    assert!(offset_of!(gannet_sampling_params_t, temperature) == 4);
    assert!(offset_of!(gannet_sampling_params_t, has_seed) == 32);
    assert!(offset_of!(gannet_sampling_params_t, seed) == 40);
    assert!(size_of::<gannet_sampling_params_t>() == 48);

    assert!(size_of::<gannet_chat_message_t>() == 16);

    assert!(offset_of!(gannet_request_t, prompt_tokens) == 8);
    assert!(offset_of!(gannet_request_t, prompt_text) == 24);
    assert!(offset_of!(gannet_request_t, sampling) == 48);
    assert!(offset_of!(gannet_request_t, max_tokens) == 96);
    assert!(offset_of!(gannet_request_t, stop_token_ids) == 104);
    assert!(offset_of!(gannet_request_t, stop_strings) == 128);
    assert!(offset_of!(gannet_request_t, logprobs) == 144);
    assert!(offset_of!(gannet_request_t, deadline_ms) == 152);
    assert!(offset_of!(gannet_request_t, enable_thinking) == 164);
    assert!(size_of::<gannet_request_t>() == 168);

    assert!(offset_of!(gannet_event_t, r#type) == 8);
    assert!(offset_of!(gannet_event_t, text) == 16);
    assert!(offset_of!(gannet_event_t, top_token_ids) == 40);
    assert!(offset_of!(gannet_event_t, finish_reason) == 56);
    assert!(offset_of!(gannet_event_t, message) == 64);
    assert!(size_of::<gannet_event_t>() == 88);

    assert!(offset_of!(gannet_model_info_t, model_type) == 4);
    assert!(offset_of!(gannet_model_info_t, num_parameters) == 136);
    assert!(offset_of!(gannet_model_info_t, kv_bytes_per_token_full) == 248);
    assert!(size_of::<gannet_model_info_t>() == 256);

    assert!(offset_of!(gannet_engine_stats_t, kv_pages_total) == 12);
    assert!(offset_of!(gannet_engine_stats_t, prefix_cache_hit_tokens) == 48);
    assert!(offset_of!(gannet_engine_stats_t, weight_bytes) == 120);
    assert!(size_of::<gannet_engine_stats_t>() == 152);
};

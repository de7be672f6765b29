//! Raw declarations of gannet's C ABI 0.2 (`GANNET_ABI_VERSION` 2), written by hand to mirror
//! `include/gannet/gannet.h` field for field. The comments of the header apply; the safe API is
//! the `gannet` crate.
//!
//! Every struct is `#[repr(C)]`. Its size and key field offsets are checked at compile time
//! against the numbers `tests/capi/layout_test.cc` pins for the C header (LP64), and
//! `tests/layout.rs` compares the size and offset of every field with what the C compiler gives
//! (`tests/examples/abi_sizes.c`). The `*_INIT` macros of the header are the `Default` impls.
//!
//! A program built on these declarations must only run against a library whose
//! [`gannet_abi_version`] equals [`GANNET_ABI_VERSION`].
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};
use std::mem::{offset_of, size_of};

// ---- versions and status -----------------------------------------------------------------

pub const GANNET_VERSION_MAJOR: i32 = 0;
pub const GANNET_VERSION_MINOR: i32 = 2;
pub const GANNET_VERSION_PATCH: i32 = 0;
/// `MAJOR * 10000 + MINOR * 100 + PATCH`: 200 for 0.2.0.
pub const GANNET_VERSION_CODE: i32 =
    GANNET_VERSION_MAJOR * 10000 + GANNET_VERSION_MINOR * 100 + GANNET_VERSION_PATCH;
/// Raised whenever a struct layout or a signature changes incompatibly (0.1 was 1).
pub const GANNET_ABI_VERSION: i32 = 2;

pub type gannet_status_t = i32;

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

/// The id that joins the processes of a multi-process tensor-parallel group (NCCL's unique id):
/// rank 0's process makes it with [`gannet_tp_create_id`], the application hands the bytes to the
/// other ranks' processes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gannet_tp_id_t {
    pub bytes: [u8; 128],
}

impl Default for gannet_tp_id_t {
    /// All zero (not a valid group id; [`gannet_tp_create_id`] makes one).
    fn default() -> Self {
        Self { bytes: [0; 128] }
    }
}

/// Loading progress of one stage (valid during the callback only).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_progress_t {
    pub struct_size: u32,
    pub stage: *const c_char,
    pub fraction: f64,
    pub bytes_done: i64,
    pub bytes_total: i64,
    pub elapsed_s: f64,
    pub bytes_per_s: f64,
    pub eta_s: f64,
}

/// Return 0 to continue, anything else to abort the load (create returns CANCELLED).
pub type gannet_progress_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, progress: *const gannet_progress_t) -> i32>;

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
    /// Speculative decoding with the target's Gemma-4 MTP assistant: its folder, or
    /// `"dummy:<variant>-assistant"`; NULL = off.
    pub draft_model_dir: *const c_char,
    /// Drafts per round, 1..8; 0 = 3 (needs `draft_model_dir`).
    pub num_speculative_tokens: i32,
    /// The most prompt tokens a step carries while it decodes; 0 = no limit beyond
    /// `max_step_tokens`; at most `max_step_tokens`.
    pub max_prefill_tokens_while_decoding: i64,
    /// Tensor parallelism in this process: the model split over this many CUDA devices (0 or 1
    /// = one device; at most 8). On the CPU backend the ranks are threads (tests).
    pub tensor_parallel_size: i32,
    /// Entries of `device_ids` (at most 8; 0 = devices 0 .. `tensor_parallel_size` - 1).
    pub num_device_ids: i32,
    /// The devices, rank 0 first; NULL = devices 0 .. size - 1. With it the size may be left 0.
    pub device_ids: *const i32,
    /// This process's rank in a multi-process tensor-parallel group (with `tp_id`), 0 ..
    /// `tensor_parallel_size` - 1. Rank 0 serves requests; the others call
    /// [`gannet_engine_serve`].
    pub tp_rank: i32,
    /// The group's id, the same in every rank's process; NULL = one process.
    pub tp_id: *const gannet_tp_id_t,
    /// How the KV cache stores keys and values: NULL or `"bf16"` = the model's precision (the
    /// CPU backend keeps f32); `"fp8"` (or `"fp8_e4m3"`) = FP8 E4M3 with one f32 scale per token
    /// and KV head (about half the bytes).
    pub kv_cache_dtype: *const c_char,
    pub kv_separate_k_eq_v: i32,
    /// What the CUDA backend computes in: NULL or `"auto"` = bf16, except on GPUs older than
    /// sm_75 (V100): there f16; `"bf16"`; or `"f16"` (weights converted to fp16 at load,
    /// activations fp16; the residual stream, norm inputs and logits stay f32). The CPU backend
    /// computes in f32 and takes only `"auto"`.
    pub compute_dtype: *const c_char,
    /// 1 = run one step of every shape the limits allow before create returns (the CUDA linear
    /// layers' tuning and the decode graphs' recording happen at start, not in the first requests
    /// of each shape); 0 = the default (off); -1 = off.
    pub startup_warmup: i32,
    /// Back-pressure: TOKEN events waiting to be polled, in all (0 = 262144) and per request
    /// (0 = 4096); a token past either ends its request with RESOURCE_EXHAUSTED.
    pub max_undelivered_tokens: i64,
    pub max_undelivered_tokens_per_request: i32,
    /// Quantize the linear layers as they load: null = as stored; `"int4-g32"`, `"int4-g64"`,
    /// `"int4-g128"`, `"int4-channel"` (each with `-asym`): W4A16 int4, round to nearest.
    pub weight_dtype: *const c_char,
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
            draft_model_dir: std::ptr::null(),
            num_speculative_tokens: 0,
            max_prefill_tokens_while_decoding: 0,
            tensor_parallel_size: 0,
            num_device_ids: 0,
            device_ids: std::ptr::null(),
            tp_rank: 0,
            tp_id: std::ptr::null(),
            kv_cache_dtype: std::ptr::null(),
            kv_separate_k_eq_v: 0,
            compute_dtype: std::ptr::null(),
            startup_warmup: 0,
            max_undelivered_tokens: 0,
            max_undelivered_tokens_per_request: 0,
            weight_dtype: std::ptr::null(),
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
    pub weight_format: [c_char; 64],
    pub weight_bytes_attention: i64,
    pub weight_bytes_mlp: i64,
    pub weight_bytes_experts: i64,
    pub weight_bytes_embeddings: i64,
    pub weight_bytes_other: i64,
    pub kept_plain: [c_char; 128],
    /// 1 when config.json has a vision_config.
    pub has_vision: i32,
    /// The image placeholder token (`<|image|>`).
    pub image_token_id: i32,
}

impl Default for gannet_model_info_t {
    /// `GANNET_MODEL_INFO_INIT`: all zero, with `struct_size` set (the library fills what fits).
    fn default() -> Self {
        // SAFETY: every field is an integer or an integer array; all-zero is a valid value.
        let mut info: Self = unsafe { std::mem::zeroed() };
        info.struct_size = size_of::<Self>() as u32;
        info
    }
}

// ---- requests ----------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_chat_message_t {
    /// Every element of an array shares the first's (the library reads with that stride).
    pub struct_size: u32,
    pub role: *const c_char,
    pub content: *const c_char,
}

impl Default for gannet_chat_message_t {
    /// `GANNET_CHAT_MESSAGE_INIT`.
    fn default() -> Self {
        Self {
            struct_size: size_of::<Self>() as u32,
            role: std::ptr::null(),
            content: std::ptr::null(),
        }
    }
}

/// Default: fresh entropy from the OS for every request.
pub const GANNET_SEED_RANDOM: i32 = 0;
/// `seed`: same seed + same request => same output, whatever else is running.
pub const GANNET_SEED_FIXED: i32 = 1;
/// Derived from the request id: repeatable runs of one engine without choosing seeds.
pub const GANNET_SEED_REQUEST_ID: i32 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_request_t {
    pub struct_size: u32,
    pub prompt_tokens: *const i32,
    pub num_prompt_tokens: usize,
    pub prompt_text: *const c_char,
    pub messages: *const gannet_chat_message_t,
    pub num_messages: usize,
    pub max_tokens: i32,
    pub min_tokens: i32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub seed_mode: i32,
    pub seed: u64,
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
    /// 1 = decode without drafts (engines with a draft model).
    pub disable_speculation: i32,
    /// 1 = chat message content is tokenized as plain text: a spelled control token ("<|turn>")
    /// cannot open or close turns. 0 = the reference template's behaviour.
    pub split_special_tokens: i64,
    /// A chat as one JSON object in the OpenAI shape (tools, tool calls, tool results), rendered
    /// by the model's own chat template; NULL = unused.
    pub chat_json: *const c_char,
    /// Chat prompts: text appended after the rendered chat, the forced start of the reply
    /// (template text: control-token spellings are tokens); NULL = none.
    pub reply_prefix: *const c_char,
    /// Images in prompt order: the k-th image placeholder of the prompt is `images[k]`.
    pub images: *const gannet_image_t,
    pub num_images: usize,
}

/// One image of a request: encoded PNG/JPEG/WebP bytes (`data`, `size`) or raw 8-bit RGB
/// (`rgb`, `width`, `height`, rows top down); exactly one of the two.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_image_t {
    /// Every element of an array shares the first's (the library reads with that stride).
    pub struct_size: u32,
    /// 0 = 280; else 70, 140, 280, 560 or 1120 soft tokens.
    pub max_soft_tokens: i32,
    pub data: *const u8,
    pub size: usize,
    pub rgb: *const u8,
    pub width: i32,
    pub height: i32,
}

impl Default for gannet_image_t {
    /// `GANNET_IMAGE_INIT`.
    fn default() -> Self {
        Self {
            struct_size: size_of::<gannet_image_t>() as u32,
            max_soft_tokens: 0,
            data: std::ptr::null(),
            size: 0,
            rgb: std::ptr::null(),
            width: 0,
            height: 0,
        }
    }
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
            max_tokens: 0,
            min_tokens: 0,
            temperature: 0.0,
            top_k: 0,
            top_p: 0.0,
            min_p: 0.0,
            repetition_penalty: 0.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed_mode: GANNET_SEED_RANDOM,
            seed: 0,
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
            disable_speculation: 0,
            split_special_tokens: 0,
            chat_json: std::ptr::null(),
            reply_prefix: std::ptr::null(),
            images: std::ptr::null(),
            num_images: 0,
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

/// Handed out by pointer ([`gannet_engine_poll`]); `struct_size` is the library's size, which
/// may exceed this struct's (fields appended by a later library).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gannet_event_t {
    pub struct_size: u32,
    pub r#type: i32,
    pub request_id: u64,
    pub token_id: i32,
    pub num_top_logprobs: i32,
    pub text: *const c_char,
    pub text_len: usize,
    pub logprob: f32,
    pub finish_reason: i32,
    pub top_token_ids: *const i32,
    pub top_logprobs: *const f32,
    pub status: gannet_status_t,
    pub num_prompt_tokens: i32,
    pub message: *const c_char,
    pub num_generated_tokens: i32,
    pub num_cached_prompt_tokens: i32,
    /// FINISH: drafts verified for this request (speculative decoding).
    pub num_draft_tokens: i32,
    /// FINISH: of which accepted.
    pub num_accepted_draft_tokens: i32,
    /// TOKEN/FINISH: 1 = `text` is the model's thinking, 0 = its answer. Present when
    /// `struct_size` covers it (earlier 0.2 libraries hand out 96-byte events).
    pub thinking: i32,
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
    pub max_running_seqs: i32,
    pub device_id: i32,
    pub kv_bytes: i64,
    pub device_memory_bytes: i64,
    pub load_seconds: f64,
    pub backend: [c_char; 16],
    pub device_name: [c_char; 96],
    pub backend_fallback: [c_char; 256],
    // Speculative decoding (zeros without a draft model).
    /// Drafts per round (K).
    pub num_speculative_tokens: i32,
    /// Steps' chunks that verified drafts.
    pub spec_verify_chunks: i64,
    /// Drafts verified.
    pub spec_draft_tokens: i64,
    /// Drafts accepted.
    pub spec_accepted_tokens: i64,
    /// Tokens emitted per verify chunk (accepted + 1).
    pub spec_mean_accepted_length: f64,
    /// Drafter rounds (one per step with proposing requests).
    pub spec_draft_rounds: i64,
    /// Decode steps run back to back: count, wall seconds, and device seconds from each step's
    /// first device op to its last (the rest is host work on the critical path; 0 on the CPU).
    pub timed_decode_steps: i64,
    pub timed_decode_seconds: f64,
    pub timed_decode_device_seconds: f64,
    /// What the KV cache stores: `"bf16"`, `"f32"` (cpu), `"fp8_e4m3"`.
    pub kv_cache_dtype: [c_char; 16],
    /// What activations and weights are: `"bf16"`, `"f16"`, `"f32"` (cpu).
    pub compute_dtype: [c_char; 8],
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

// ---- tokenizer ---------------------------------------------------------------------------

/// Opaque tokenizer handle (immutable; every call may run concurrently on one tokenizer).
#[repr(C)]
pub struct gannet_tokenizer_t {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gannet_tokenizer_info_t {
    pub struct_size: u32,
    pub vocab_size: i32,
    pub bos_id: i32,
    pub eos_id: i32,
    pub pad_id: i32,
    pub unk_id: i32,
    pub start_of_turn_id: i32,
    pub end_of_turn_id: i32,
}

impl Default for gannet_tokenizer_info_t {
    /// `GANNET_TOKENIZER_INFO_INIT`.
    fn default() -> Self {
        Self {
            struct_size: size_of::<Self>() as u32,
            vocab_size: 0,
            bos_id: 0,
            eos_id: 0,
            pad_id: 0,
            unk_id: 0,
            start_of_turn_id: 0,
            end_of_turn_id: 0,
        }
    }
}

// ---- functions ---------------------------------------------------------------------------

extern "C" {
    pub fn gannet_status_string(status: gannet_status_t) -> *const c_char;
    pub fn gannet_last_error_message() -> *const c_char;
    pub fn gannet_version() -> *const c_char;
    pub fn gannet_version_code() -> i32;
    pub fn gannet_abi_version() -> i32;

    pub fn gannet_set_log_callback(fn_: gannet_log_fn, user_data: *mut c_void, min_level: i32);

    pub fn gannet_engine_create(
        config: *const gannet_engine_config_t,
        engine_out: *mut *mut gannet_engine_t,
    ) -> gannet_status_t;
    pub fn gannet_engine_destroy(engine: *mut gannet_engine_t);
    /// UNIMPLEMENTED in a build without NCCL.
    pub fn gannet_tp_create_id(id_out: *mut gannet_tp_id_t) -> gannet_status_t;
    /// Ranks other than 0 of a multi-process group: waits until the group ends (`timeout_ms`
    /// -1 = no limit). FAILED_PRECONDITION on an engine that serves requests itself.
    pub fn gannet_engine_serve(engine: *mut gannet_engine_t, timeout_ms: i32) -> gannet_status_t;

    pub fn gannet_model_info(
        model_dir: *const c_char,
        info_out: *mut gannet_model_info_t,
    ) -> gannet_status_t;

    pub fn gannet_engine_submit(
        engine: *mut gannet_engine_t,
        request: *const gannet_request_t,
        request_id_out: *mut u64,
    ) -> gannet_status_t;
    /// `model` may be NULL: then only the checks that need no model run.
    pub fn gannet_request_check(
        request: *const gannet_request_t,
        model: *const gannet_model_info_t,
    ) -> gannet_status_t;
    pub fn gannet_engine_cancel(engine: *mut gannet_engine_t, request_id: u64) -> gannet_status_t;

    /// `*events_out` points to an array of `*num_events_out` event pointers, valid until the
    /// next poll on this engine (or destroy).
    pub fn gannet_engine_poll(
        engine: *mut gannet_engine_t,
        timeout_ms: i32,
        max_events: usize,
        events_out: *mut *const *const gannet_event_t,
        num_events_out: *mut usize,
    ) -> gannet_status_t;

    pub fn gannet_engine_get_stats(
        engine: *mut gannet_engine_t,
        stats_out: *mut gannet_engine_stats_t,
    ) -> gannet_status_t;

    pub fn gannet_tokenizer_open(
        model_dir: *const c_char,
        tokenizer_out: *mut *mut gannet_tokenizer_t,
    ) -> gannet_status_t;
    pub fn gannet_tokenizer_close(tokenizer: *mut gannet_tokenizer_t);
    /// Valid until the engine is destroyed; never close it.
    pub fn gannet_engine_tokenizer(
        engine: *mut gannet_engine_t,
        tokenizer_out: *mut *const gannet_tokenizer_t,
    ) -> gannet_status_t;
    pub fn gannet_tokenizer_get_info(
        tokenizer: *const gannet_tokenizer_t,
        info_out: *mut gannet_tokenizer_info_t,
    ) -> gannet_status_t;

    // The buffer calls: NULL and capacity 0 only count (OK with the size); a buffer too small
    // gets nothing, the size needed is set and RESOURCE_EXHAUSTED returned. Text outputs are
    // NUL-terminated when capacity allows one more byte (the size never counts the NUL).
    pub fn gannet_tokenize(
        tokenizer: *const gannet_tokenizer_t,
        text: *const c_char,
        text_len: usize,
        add_special_tokens: i32,
        ids_out: *mut i32,
        capacity: usize,
        num_ids_out: *mut usize,
    ) -> gannet_status_t;
    pub fn gannet_detokenize(
        tokenizer: *const gannet_tokenizer_t,
        ids: *const i32,
        num_ids: usize,
        skip_special_tokens: i32,
        text_out: *mut c_char,
        capacity: usize,
        text_len_out: *mut usize,
    ) -> gannet_status_t;
    pub fn gannet_token_to_piece(
        tokenizer: *const gannet_tokenizer_t,
        id: i32,
        text_out: *mut c_char,
        capacity: usize,
        text_len_out: *mut usize,
    ) -> gannet_status_t;
    pub fn gannet_apply_chat_template(
        tokenizer: *const gannet_tokenizer_t,
        messages: *const gannet_chat_message_t,
        num_messages: usize,
        add_generation_prompt: i32,
        enable_thinking: i32,
        text_out: *mut c_char,
        capacity: usize,
        text_len_out: *mut usize,
    ) -> gannet_status_t;
    pub fn gannet_apply_chat_template_json(
        tokenizer: *const gannet_tokenizer_t,
        chat_json: *const c_char,
        add_generation_prompt: i32,
        enable_thinking: i32,
        text_out: *mut c_char,
        capacity: usize,
        text_len_out: *mut usize,
    ) -> gannet_status_t;
    pub fn gannet_tokenizer_has_chat_template(tokenizer: *const gannet_tokenizer_t) -> i32;
}

// ---- layout: the numbers of tests/capi/layout_test.cc ------------------------------------

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<gannet_status_t>() == 4);
    assert!(GANNET_ABI_VERSION == 2);
    assert!(GANNET_VERSION_CODE == 200);
    assert!(offset_of!(gannet_engine_config_t, struct_size) == 0);
    assert!(offset_of!(gannet_request_t, struct_size) == 0);
    assert!(offset_of!(gannet_event_t, struct_size) == 0);
    assert!(offset_of!(gannet_chat_message_t, struct_size) == 0);
    assert!(offset_of!(gannet_progress_t, struct_size) == 0);

    assert!(offset_of!(gannet_engine_config_t, model_dir) == 8);
    assert!(offset_of!(gannet_engine_config_t, kv_memory_bytes) == 48);
    assert!(offset_of!(gannet_engine_config_t, load_format) == 80);
    assert!(offset_of!(gannet_engine_config_t, progress_callback) == 88);
    assert!(offset_of!(gannet_engine_config_t, draft_model_dir) == 104);
    assert!(offset_of!(gannet_engine_config_t, num_speculative_tokens) == 112);
    assert!(offset_of!(gannet_engine_config_t, max_prefill_tokens_while_decoding) == 120);
    assert!(offset_of!(gannet_engine_config_t, tensor_parallel_size) == 128);
    assert!(offset_of!(gannet_engine_config_t, num_device_ids) == 132);
    assert!(offset_of!(gannet_engine_config_t, device_ids) == 136);
    assert!(offset_of!(gannet_engine_config_t, tp_rank) == 144);
    assert!(offset_of!(gannet_engine_config_t, tp_id) == 152);
    assert!(offset_of!(gannet_engine_config_t, kv_cache_dtype) == 160);
    assert!(offset_of!(gannet_engine_config_t, kv_separate_k_eq_v) == 168);
    assert!(offset_of!(gannet_engine_config_t, compute_dtype) == 176);
    assert!(offset_of!(gannet_engine_config_t, startup_warmup) == 184);
    assert!(offset_of!(gannet_engine_config_t, max_undelivered_tokens) == 192);
    assert!(offset_of!(gannet_engine_config_t, max_undelivered_tokens_per_request) == 200);
    assert!(offset_of!(gannet_engine_config_t, weight_dtype) == 208);
    assert!(size_of::<gannet_engine_config_t>() == 216);
    assert!(size_of::<gannet_tp_id_t>() == 128);

    assert!(offset_of!(gannet_progress_t, stage) == 8);
    assert!(offset_of!(gannet_progress_t, fraction) == 16);
    assert!(offset_of!(gannet_progress_t, bytes_done) == 24);
    assert!(offset_of!(gannet_progress_t, eta_s) == 56);
    assert!(size_of::<gannet_progress_t>() == 64);

    assert!(offset_of!(gannet_chat_message_t, role) == 8);
    assert!(offset_of!(gannet_chat_message_t, content) == 16);
    assert!(size_of::<gannet_chat_message_t>() == 24);

    assert!(offset_of!(gannet_request_t, prompt_tokens) == 8);
    assert!(offset_of!(gannet_request_t, prompt_text) == 24);
    assert!(offset_of!(gannet_request_t, messages) == 32);
    assert!(offset_of!(gannet_request_t, max_tokens) == 48);
    assert!(offset_of!(gannet_request_t, temperature) == 56);
    assert!(offset_of!(gannet_request_t, frequency_penalty) == 80);
    assert!(offset_of!(gannet_request_t, seed_mode) == 84);
    assert!(offset_of!(gannet_request_t, seed) == 88);
    assert!(offset_of!(gannet_request_t, stop_token_ids) == 96);
    assert!(offset_of!(gannet_request_t, ignore_default_stop_tokens) == 112);
    assert!(offset_of!(gannet_request_t, stop_strings) == 120);
    assert!(offset_of!(gannet_request_t, logprobs) == 136);
    assert!(offset_of!(gannet_request_t, deadline_ms) == 144);
    assert!(offset_of!(gannet_request_t, enable_thinking) == 156);
    assert!(offset_of!(gannet_request_t, disable_speculation) == 160);
    assert!(offset_of!(gannet_request_t, split_special_tokens) == 168);
    assert!(offset_of!(gannet_request_t, chat_json) == 176);
    assert!(offset_of!(gannet_request_t, reply_prefix) == 184);
    assert!(offset_of!(gannet_request_t, images) == 192);
    assert!(offset_of!(gannet_request_t, num_images) == 200);
    assert!(size_of::<gannet_request_t>() == 208);
    assert!(offset_of!(gannet_image_t, data) == 8);
    assert!(offset_of!(gannet_image_t, width) == 32);
    assert!(size_of::<gannet_image_t>() == 40);

    assert!(offset_of!(gannet_event_t, r#type) == 4);
    assert!(offset_of!(gannet_event_t, request_id) == 8);
    assert!(offset_of!(gannet_event_t, token_id) == 16);
    assert!(offset_of!(gannet_event_t, text) == 24);
    assert!(offset_of!(gannet_event_t, text_len) == 32);
    assert!(offset_of!(gannet_event_t, logprob) == 40);
    assert!(offset_of!(gannet_event_t, finish_reason) == 44);
    assert!(offset_of!(gannet_event_t, top_token_ids) == 48);
    assert!(offset_of!(gannet_event_t, status) == 64);
    assert!(offset_of!(gannet_event_t, num_prompt_tokens) == 68);
    assert!(offset_of!(gannet_event_t, message) == 72);
    assert!(offset_of!(gannet_event_t, num_generated_tokens) == 80);
    assert!(offset_of!(gannet_event_t, num_cached_prompt_tokens) == 84);
    assert!(offset_of!(gannet_event_t, num_draft_tokens) == 88);
    assert!(offset_of!(gannet_event_t, num_accepted_draft_tokens) == 92);
    assert!(offset_of!(gannet_event_t, thinking) == 96);
    assert!(size_of::<gannet_event_t>() == 104);

    assert!(offset_of!(gannet_model_info_t, num_parameters) == 136);
    assert!(offset_of!(gannet_model_info_t, kv_bytes_per_token_full) == 248);
    assert!(offset_of!(gannet_model_info_t, weight_format) == 256);
    assert!(offset_of!(gannet_model_info_t, kept_plain) == 360);
    assert!(offset_of!(gannet_model_info_t, has_vision) == 488);
    assert!(size_of::<gannet_model_info_t>() == 496);

    assert!(offset_of!(gannet_engine_stats_t, kv_pages_total) == 12);
    assert!(offset_of!(gannet_engine_stats_t, prefix_cache_hit_tokens) == 48);
    assert!(offset_of!(gannet_engine_stats_t, weight_bytes) == 120);
    assert!(offset_of!(gannet_engine_stats_t, max_running_seqs) == 152);
    assert!(offset_of!(gannet_engine_stats_t, kv_bytes) == 160);
    assert!(offset_of!(gannet_engine_stats_t, load_seconds) == 176);
    assert!(offset_of!(gannet_engine_stats_t, backend) == 184);
    assert!(offset_of!(gannet_engine_stats_t, device_name) == 200);
    assert!(offset_of!(gannet_engine_stats_t, backend_fallback) == 296);
    assert!(offset_of!(gannet_engine_stats_t, num_speculative_tokens) == 552);
    assert!(offset_of!(gannet_engine_stats_t, spec_verify_chunks) == 560);
    assert!(offset_of!(gannet_engine_stats_t, spec_mean_accepted_length) == 584);
    assert!(offset_of!(gannet_engine_stats_t, spec_draft_rounds) == 592);
    assert!(offset_of!(gannet_engine_stats_t, timed_decode_steps) == 600);
    assert!(offset_of!(gannet_engine_stats_t, timed_decode_device_seconds) == 616);
    assert!(offset_of!(gannet_engine_stats_t, kv_cache_dtype) == 624);
    assert!(offset_of!(gannet_engine_stats_t, compute_dtype) == 640);
    assert!(size_of::<gannet_engine_stats_t>() == 648);

    assert!(offset_of!(gannet_tokenizer_info_t, vocab_size) == 4);
    assert!(offset_of!(gannet_tokenizer_info_t, end_of_turn_id) == 28);
    assert!(size_of::<gannet_tokenizer_info_t>() == 32);
};

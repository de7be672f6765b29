//! The hand-written declarations must match the C header as the C compiler sees it: every
//! struct's size, every field's offset and size, and every constant. ctest points
//! GANNET_ABI_SIZES at a C program (tests/examples/abi_sizes.c, CMake target gannet_abi_sizes)
//! that prints them; without it only the pinned numbers of tests/capi/layout_test.cc (checked at
//! compile time in src/lib.rs, and again below) and the version queries are checked.
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::mem::{offset_of, size_of};
use std::process::Command;

use gannet_sys::*;

/// The size of a field, from a projection `|s: &T| &s.field`.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The Rust side: "size TYPE" -> bytes, "field TYPE.FIELD" -> (offset, size), "const NAME" ->
/// value, in the words of abi_sizes.c.
fn rust_layout() -> BTreeMap<String, (i64, i64)> {
    let mut m = BTreeMap::new();
    macro_rules! layout {
        ($($ty:ident { $($field:ident),* $(,)? })*) => {$(
            m.insert(format!("size {}", stringify!($ty)), (size_of::<$ty>() as i64, 0));
            $(
                let name = stringify!($field).trim_start_matches("r#");
                m.insert(
                    format!("field {}.{}", stringify!($ty), name),
                    (
                        offset_of!($ty, $field) as i64,
                        field_size(|s: &$ty| &s.$field) as i64,
                    ),
                );
            )*
        )*};
    }
    macro_rules! consts {
        ($($name:ident),* $(,)?) => {$(
            m.insert(format!("const {}", stringify!($name)), ($name as i64, 0));
        )*};
    }
    m.insert(
        "size gannet_status_t".to_string(),
        (size_of::<gannet_status_t>() as i64, 0),
    );
    layout! {
        gannet_progress_t {
            struct_size, stage, fraction, bytes_done, bytes_total, elapsed_s, bytes_per_s, eta_s,
        }
        gannet_engine_config_t {
            struct_size, model_dir, backend, device_id, max_running_seqs, max_step_tokens,
            max_model_len, page_size, kv_memory_bytes, kv_sliding_pages, kv_full_pages,
            disable_prefix_cache, num_threads, max_queued_requests, disable_cuda_graphs,
            load_format, progress_callback, progress_user_data, draft_model_dir,
            num_speculative_tokens, max_prefill_tokens_while_decoding, tensor_parallel_size,
            num_device_ids, device_ids, tp_rank, tp_id, kv_cache_dtype, kv_separate_k_eq_v,
            compute_dtype, startup_warmup, max_undelivered_tokens,
            max_undelivered_tokens_per_request, weight_dtype,
        }
        gannet_tp_id_t { bytes }
        gannet_model_info_t {
            struct_size, model_type, variant, dtypes, num_parameters, weight_bytes,
            skipped_tower_bytes, num_shards, has_tokenizer, num_layers, num_sliding_layers,
            num_full_layers, num_kv_shared_layers, hidden_size, vocab_size,
            max_position_embeddings, sliding_window, num_attention_heads, num_kv_heads,
            num_full_kv_heads, head_dim, full_head_dim, num_experts, top_k_experts,
            kv_bytes_per_token_sliding, kv_bytes_per_token_full, weight_format,
            weight_bytes_attention, weight_bytes_mlp, weight_bytes_experts,
            weight_bytes_embeddings, weight_bytes_other, kept_plain, has_vision, image_token_id,
        }
        gannet_chat_message_t { struct_size, role, content }
        gannet_request_t {
            struct_size, prompt_tokens, num_prompt_tokens, prompt_text, messages, num_messages,
            max_tokens, min_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
            presence_penalty, frequency_penalty, seed_mode, seed, stop_token_ids,
            num_stop_token_ids, ignore_default_stop_tokens, stop_strings, num_stop_strings,
            logprobs, priority, deadline_ms, add_generation_prompt, enable_thinking,
            disable_speculation, split_special_tokens, chat_json, reply_prefix, images,
            num_images,
        }
        gannet_image_t { struct_size, max_soft_tokens, data, size, rgb, width, height }
        gannet_event_t {
            struct_size, r#type, request_id, token_id, num_top_logprobs, text, text_len, logprob,
            finish_reason, top_token_ids, top_logprobs, status, num_prompt_tokens, message,
            num_generated_tokens, num_cached_prompt_tokens, num_draft_tokens,
            num_accepted_draft_tokens, thinking,
        }
        gannet_engine_stats_t {
            struct_size, num_running, num_waiting, kv_pages_total, kv_pages_used,
            kv_pages_cached, kv_pages_free, page_size, prefix_cache_hit_tokens,
            prefix_cache_query_tokens, prefix_cache_hit_rate, total_prompt_tokens,
            total_generated_tokens, num_preemptions, num_steps, prompt_tokens_per_s,
            generated_tokens_per_s, weight_bytes, kv_bytes_per_token, sliding_window,
            max_model_len, max_running_seqs, device_id, kv_bytes, device_memory_bytes,
            load_seconds, backend, device_name, backend_fallback, num_speculative_tokens,
            spec_verify_chunks, spec_draft_tokens, spec_accepted_tokens,
            spec_mean_accepted_length, spec_draft_rounds, timed_decode_steps, timed_decode_seconds,
            timed_decode_device_seconds, kv_cache_dtype, compute_dtype,
        }
        gannet_tokenizer_info_t {
            struct_size, vocab_size, bos_id, eos_id, pad_id, unk_id, start_of_turn_id,
            end_of_turn_id,
        }
    }
    consts! {
        GANNET_VERSION_MAJOR, GANNET_VERSION_MINOR, GANNET_VERSION_PATCH, GANNET_VERSION_CODE,
        GANNET_ABI_VERSION,
        GANNET_OK, GANNET_ERR_INVALID_ARGUMENT, GANNET_ERR_NOT_FOUND, GANNET_ERR_OUT_OF_MEMORY,
        GANNET_ERR_RESOURCE_EXHAUSTED, GANNET_ERR_UNIMPLEMENTED, GANNET_ERR_DATA_LOSS,
        GANNET_ERR_DEVICE_LOST, GANNET_ERR_CANCELLED, GANNET_ERR_DEADLINE_EXCEEDED,
        GANNET_ERR_FAILED_PRECONDITION, GANNET_ERR_INTERNAL,
        GANNET_LOG_LEVEL_DEBUG, GANNET_LOG_LEVEL_INFO, GANNET_LOG_LEVEL_WARNING,
        GANNET_LOG_LEVEL_ERROR, GANNET_LOG_LEVEL_OFF,
        GANNET_SEED_RANDOM, GANNET_SEED_FIXED, GANNET_SEED_REQUEST_ID,
        GANNET_EVENT_TOKEN, GANNET_EVENT_FINISH, GANNET_EVENT_ERROR,
        GANNET_FINISH_STOP, GANNET_FINISH_LENGTH, GANNET_FINISH_CANCELLED, GANNET_FINISH_ERROR,
    }
    m
}

/// cargo runs a test in its package's folder (gannet-sys/), while a relative GANNET_ABI_SIZES is
/// usually written from the workspace folder (examples/rust, where the README runs
/// `cargo test`): a relative path is taken from this package's folder if it exists there, else
/// from the workspace folder.
fn abi_sizes_program(path: std::path::PathBuf) -> std::path::PathBuf {
    if path.is_absolute() || path.exists() {
        return path;
    }
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let from_workspace = workspace.join(&path);
    assert!(
        from_workspace.exists(),
        "GANNET_ABI_SIZES={} names no file (tried from {} and from {}); build the \
         gannet_abi_sizes CMake target",
        path.display(),
        env!("CARGO_MANIFEST_DIR"),
        workspace.display()
    );
    from_workspace
}

#[test]
fn layout_matches_the_c_compiler() {
    let Some(program) = std::env::var_os("GANNET_ABI_SIZES") else {
        eprintln!("GANNET_ABI_SIZES is not set: nothing to compare against");
        return;
    };
    let program = abi_sizes_program(std::path::PathBuf::from(program));
    let out = Command::new(&program)
        .output()
        .unwrap_or_else(|e| panic!("cannot run GANNET_ABI_SIZES={}: {e}", program.display()));
    assert!(out.status.success());
    let mut c = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let key = format!("{} {}", words[0], words[1]);
        let numbers: Vec<i64> = words[2..].iter().map(|w| w.parse().unwrap()).collect();
        let value = match (words[0], numbers.as_slice()) {
            ("size" | "const", [v]) => (*v, 0),
            ("field", [offset, size]) => (*offset, *size),
            _ => panic!("unexpected line from abi_sizes: {line}"),
        };
        assert!(c.insert(key, value).is_none(), "{line} printed twice");
    }
    let rust = rust_layout();
    let mut mismatches = Vec::new();
    for (key, want) in &c {
        match rust.get(key) {
            None => mismatches.push(format!("{key}: in gannet.h, not mirrored in gannet-sys")),
            Some(got) if got != want => mismatches.push(format!(
                "{key}: C {want:?}, Rust {got:?} (offset/value, size)"
            )),
            Some(_) => {}
        }
    }
    for key in rust.keys().filter(|k| !c.contains_key(*k)) {
        mismatches.push(format!("{key}: in gannet-sys, not printed by abi_sizes.c"));
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // Every struct of the header was compared (abi_sizes.c lists them all).
    assert_eq!(c.keys().filter(|k| k.starts_with("size ")).count(), 11);
}

#[test]
fn pinned_offsets_of_layout_test() {
    // The numbers of tests/capi/layout_test.cc (also asserted at compile time in src/lib.rs).
    assert_eq!(offset_of!(gannet_engine_config_t, draft_model_dir), 104);
    assert_eq!(
        offset_of!(gannet_engine_config_t, num_speculative_tokens),
        112
    );
    assert_eq!(
        offset_of!(gannet_engine_config_t, max_prefill_tokens_while_decoding),
        120
    );
    assert_eq!(
        offset_of!(gannet_engine_config_t, tensor_parallel_size),
        128
    );
    assert_eq!(offset_of!(gannet_engine_config_t, num_device_ids), 132);
    assert_eq!(offset_of!(gannet_engine_config_t, device_ids), 136);
    assert_eq!(offset_of!(gannet_engine_config_t, tp_rank), 144);
    assert_eq!(offset_of!(gannet_engine_config_t, tp_id), 152);
    assert_eq!(offset_of!(gannet_engine_config_t, kv_cache_dtype), 160);
    assert_eq!(offset_of!(gannet_engine_config_t, kv_separate_k_eq_v), 168);
    assert_eq!(offset_of!(gannet_engine_config_t, compute_dtype), 176);
    assert_eq!(offset_of!(gannet_engine_config_t, startup_warmup), 184);
    assert_eq!(offset_of!(gannet_engine_config_t, max_undelivered_tokens), 192);
    assert_eq!(
        offset_of!(gannet_engine_config_t, max_undelivered_tokens_per_request),
        200
    );
    assert_eq!(offset_of!(gannet_engine_config_t, weight_dtype), 208);
    assert_eq!(size_of::<gannet_engine_config_t>(), 216);
    assert_eq!(size_of::<gannet_tp_id_t>(), 128);
    assert_eq!(size_of::<gannet_progress_t>(), 64);
    assert_eq!(size_of::<gannet_chat_message_t>(), 24);
    assert_eq!(offset_of!(gannet_request_t, seed_mode), 84);
    assert_eq!(offset_of!(gannet_request_t, seed), 88);
    assert_eq!(offset_of!(gannet_request_t, disable_speculation), 160);
    assert_eq!(offset_of!(gannet_request_t, split_special_tokens), 168);
    assert_eq!(offset_of!(gannet_request_t, chat_json), 176);
    assert_eq!(offset_of!(gannet_request_t, reply_prefix), 184);
    assert_eq!(size_of::<gannet_request_t>(), 208);
    assert_eq!(size_of::<gannet_image_t>(), 40);
    assert_eq!(offset_of!(gannet_event_t, request_id), 8);
    assert_eq!(offset_of!(gannet_event_t, message), 72);
    assert_eq!(offset_of!(gannet_event_t, num_draft_tokens), 88);
    assert_eq!(offset_of!(gannet_event_t, num_accepted_draft_tokens), 92);
    assert_eq!(offset_of!(gannet_event_t, thinking), 96);
    assert_eq!(size_of::<gannet_event_t>(), 104);
    assert_eq!(offset_of!(gannet_model_info_t, weight_format), 256);
    assert_eq!(offset_of!(gannet_model_info_t, kept_plain), 360);
    assert_eq!(size_of::<gannet_model_info_t>(), 496);
    assert_eq!(offset_of!(gannet_engine_stats_t, backend_fallback), 296);
    assert_eq!(
        offset_of!(gannet_engine_stats_t, num_speculative_tokens),
        552
    );
    assert_eq!(offset_of!(gannet_engine_stats_t, spec_verify_chunks), 560);
    assert_eq!(
        offset_of!(gannet_engine_stats_t, spec_mean_accepted_length),
        584
    );
    assert_eq!(offset_of!(gannet_engine_stats_t, spec_draft_rounds), 592);
    assert_eq!(offset_of!(gannet_engine_stats_t, timed_decode_steps), 600);
    assert_eq!(offset_of!(gannet_engine_stats_t, kv_cache_dtype), 624);
    assert_eq!(offset_of!(gannet_engine_stats_t, compute_dtype), 640);
    assert_eq!(size_of::<gannet_engine_stats_t>(), 648);
    assert_eq!(size_of::<gannet_tokenizer_info_t>(), 32);
}

#[test]
fn defaults_are_the_init_macros() {
    assert_eq!(gannet_request_t::default().struct_size, 208);
    assert_eq!(gannet_image_t::default().struct_size, 40);
    assert_eq!(gannet_request_t::default().split_special_tokens, 0);
    assert_eq!(gannet_request_t::default().seed_mode, GANNET_SEED_RANDOM);
    assert_eq!(gannet_request_t::default().disable_speculation, 0);
    assert_eq!(gannet_chat_message_t::default().struct_size, 24);
    assert_eq!(gannet_engine_config_t::default().struct_size, 216);
    assert!(gannet_engine_config_t::default().weight_dtype.is_null());
    assert_eq!(gannet_engine_config_t::default().max_undelivered_tokens, 0);
    assert_eq!(
        gannet_engine_config_t::default().max_undelivered_tokens_per_request,
        0
    );
    assert_eq!(
        gannet_engine_config_t::default().max_prefill_tokens_while_decoding,
        0
    );
    assert!(gannet_engine_config_t::default().draft_model_dir.is_null());
    assert_eq!(gannet_engine_config_t::default().num_speculative_tokens, 0);
    assert_eq!(gannet_engine_config_t::default().tensor_parallel_size, 0);
    assert_eq!(gannet_engine_config_t::default().num_device_ids, 0);
    assert!(gannet_engine_config_t::default().device_ids.is_null());
    assert_eq!(gannet_engine_config_t::default().tp_rank, 0);
    assert!(gannet_engine_config_t::default().tp_id.is_null());
    assert!(gannet_engine_config_t::default().kv_cache_dtype.is_null());
    assert_eq!(gannet_engine_config_t::default().kv_separate_k_eq_v, 0);
    assert!(gannet_engine_config_t::default().compute_dtype.is_null());
    assert_eq!(gannet_engine_config_t::default().startup_warmup, 0);
    assert_eq!(gannet_tp_id_t::default().bytes, [0u8; 128]);
    assert_eq!(gannet_engine_stats_t::default().struct_size, 648);
    assert_eq!(gannet_engine_stats_t::default().kv_cache_dtype, [0; 16]);
    assert_eq!(gannet_engine_stats_t::default().compute_dtype, [0; 8]);
    assert_eq!(gannet_model_info_t::default().struct_size, 496);
    assert_eq!(gannet_tokenizer_info_t::default().struct_size, 32);
}

#[test]
fn the_linked_library_has_this_abi() {
    // SAFETY: plain queries; the version text is static and NUL-terminated.
    let (code, abi, version) = unsafe {
        (
            gannet_version_code(),
            gannet_abi_version(),
            CStr::from_ptr(gannet_version()).to_str().unwrap(),
        )
    };
    assert_eq!(abi, GANNET_ABI_VERSION);
    assert_eq!(code, GANNET_VERSION_CODE);
    assert_eq!(
        version,
        format!("{GANNET_VERSION_MAJOR}.{GANNET_VERSION_MINOR}.{GANNET_VERSION_PATCH}")
    );
}

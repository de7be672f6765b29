"""ctypes mirror of include/gannet/gannet.h (ABI 0.2) and the loading of libgannet.

The structs below copy the header field by field; tests/test_layout.py compares every size and
offset with what the C compiler reports (tests/examples/abi_sizes.c), so a header change that is
not mirrored here fails a test instead of corrupting memory.

ctypes releases the GIL around every foreign call (CDLL, not PyDLL), so a thread blocked in
gannet_engine_poll or gannet_engine_submit never stalls other Python threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path

ABI_VERSION = 2

# Status codes (GANNET_OK, GANNET_ERR_*).
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_NOT_FOUND = 2
ERR_OUT_OF_MEMORY = 3
ERR_RESOURCE_EXHAUSTED = 4
ERR_UNIMPLEMENTED = 5
ERR_DATA_LOSS = 6
ERR_DEVICE_LOST = 7
ERR_CANCELLED = 8
ERR_DEADLINE_EXCEEDED = 9
ERR_FAILED_PRECONDITION = 10
ERR_INTERNAL = 11

EVENT_TOKEN = 1
EVENT_FINISH = 2
EVENT_ERROR = 3

FINISH_STOP = 1
FINISH_LENGTH = 2
FINISH_CANCELLED = 3
FINISH_ERROR = 4

SEED_RANDOM = 0
SEED_FIXED = 1
SEED_REQUEST_ID = 2


class Progress(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("stage", c_char_p),
        ("fraction", c_double),
        ("bytes_done", c_int64),
        ("bytes_total", c_int64),
        ("elapsed_s", c_double),
        ("bytes_per_s", c_double),
        ("eta_s", c_double),
    ]


PROGRESS_FN = CFUNCTYPE(c_int32, c_void_p, POINTER(Progress))


class TpId(Structure):
    _fields_ = [("bytes", c_uint8 * 128)]


class EngineConfig(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("model_dir", c_char_p),
        ("backend", c_char_p),
        ("device_id", c_int32),
        ("max_running_seqs", c_int32),
        ("max_step_tokens", c_int32),
        ("max_model_len", c_int32),
        ("page_size", c_int32),
        ("kv_memory_bytes", c_int64),
        ("kv_sliding_pages", c_int32),
        ("kv_full_pages", c_int32),
        ("disable_prefix_cache", c_int32),
        ("num_threads", c_int32),
        ("max_queued_requests", c_int32),
        ("disable_cuda_graphs", c_int32),
        ("load_format", c_char_p),
        ("progress_callback", PROGRESS_FN),
        ("progress_user_data", c_void_p),
        ("draft_model_dir", c_char_p),
        ("num_speculative_tokens", c_int32),
        ("max_prefill_tokens_while_decoding", c_int64),
        ("tensor_parallel_size", c_int32),
        ("num_device_ids", c_int32),
        ("device_ids", POINTER(c_int32)),
        ("tp_rank", c_int32),
        ("tp_id", POINTER(TpId)),
        ("kv_cache_dtype", c_char_p),
        ("kv_separate_k_eq_v", c_int32),
        ("compute_dtype", c_char_p),
        ("startup_warmup", c_int32),
        ("max_undelivered_tokens", c_int64),
        ("max_undelivered_tokens_per_request", c_int32),
        ("weight_dtype", c_char_p),
    ]


class ChatMessage(Structure):
    _fields_ = [("struct_size", c_uint32), ("role", c_char_p), ("content", c_char_p)]


class Image(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_soft_tokens", c_int32),
        ("data", POINTER(c_uint8)),
        ("size", c_size_t),
        ("rgb", POINTER(c_uint8)),
        ("width", c_int32),
        ("height", c_int32),
    ]


class Request(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("prompt_tokens", POINTER(c_int32)),
        ("num_prompt_tokens", c_size_t),
        ("prompt_text", c_char_p),
        ("messages", POINTER(ChatMessage)),
        ("num_messages", c_size_t),
        ("max_tokens", c_int32),
        ("min_tokens", c_int32),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repetition_penalty", c_float),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("seed_mode", c_int32),
        ("seed", c_uint64),
        ("stop_token_ids", POINTER(c_int32)),
        ("num_stop_token_ids", c_size_t),
        ("ignore_default_stop_tokens", c_int32),
        ("stop_strings", POINTER(c_char_p)),
        ("num_stop_strings", c_size_t),
        ("logprobs", c_int32),
        ("priority", c_int32),
        ("deadline_ms", c_int64),
        ("add_generation_prompt", c_int32),
        ("enable_thinking", c_int32),
        ("disable_speculation", c_int32),
        ("split_special_tokens", c_int64),
        ("chat_json", c_char_p),
        ("reply_prefix", c_char_p),
        ("images", POINTER(Image)),
        ("num_images", c_size_t),
    ]


class Event(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("type", c_int32),
        ("request_id", c_uint64),
        ("token_id", c_int32),
        ("num_top_logprobs", c_int32),
        ("text", c_void_p),  # read with text_len: not c_char_p, which stops at a NUL
        ("text_len", c_size_t),
        ("logprob", c_float),
        ("finish_reason", c_int32),
        ("top_token_ids", POINTER(c_int32)),
        ("top_logprobs", POINTER(c_float)),
        ("status", c_int32),
        ("num_prompt_tokens", c_int32),
        ("message", c_char_p),
        ("num_generated_tokens", c_int32),
        ("num_cached_prompt_tokens", c_int32),
        ("num_draft_tokens", c_int32),
        ("num_accepted_draft_tokens", c_int32),
        ("thinking", c_int32),
    ]


class EngineStats(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_running", c_int32),
        ("num_waiting", c_int32),
        ("kv_pages_total", c_int32 * 2),
        ("kv_pages_used", c_int32 * 2),
        ("kv_pages_cached", c_int32 * 2),
        ("kv_pages_free", c_int32 * 2),
        ("page_size", c_int32),
        ("prefix_cache_hit_tokens", c_int64),
        ("prefix_cache_query_tokens", c_int64),
        ("prefix_cache_hit_rate", c_double),
        ("total_prompt_tokens", c_int64),
        ("total_generated_tokens", c_int64),
        ("num_preemptions", c_int64),
        ("num_steps", c_int64),
        ("prompt_tokens_per_s", c_double),
        ("generated_tokens_per_s", c_double),
        ("weight_bytes", c_int64),
        ("kv_bytes_per_token", c_int64 * 2),
        ("sliding_window", c_int32),
        ("max_model_len", c_int32),
        ("max_running_seqs", c_int32),
        ("device_id", c_int32),
        ("kv_bytes", c_int64),
        ("device_memory_bytes", c_int64),
        ("load_seconds", c_double),
        ("backend", c_char * 16),
        ("device_name", c_char * 96),
        ("backend_fallback", c_char * 256),
        ("num_speculative_tokens", c_int32),
        ("spec_verify_chunks", c_int64),
        ("spec_draft_tokens", c_int64),
        ("spec_accepted_tokens", c_int64),
        ("spec_mean_accepted_length", c_double),
        ("spec_draft_rounds", c_int64),
        ("timed_decode_steps", c_int64),
        ("timed_decode_seconds", c_double),
        ("timed_decode_device_seconds", c_double),
        ("kv_cache_dtype", c_char * 16),
        ("compute_dtype", c_char * 8),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("model_type", c_char * 32),
        ("variant", c_char * 64),
        ("dtypes", c_char * 32),
        ("num_parameters", c_int64),
        ("weight_bytes", c_int64),
        ("skipped_tower_bytes", c_int64),
        ("num_shards", c_int32),
        ("has_tokenizer", c_int32),
        ("num_layers", c_int32),
        ("num_sliding_layers", c_int32),
        ("num_full_layers", c_int32),
        ("num_kv_shared_layers", c_int32),
        ("hidden_size", c_int64),
        ("vocab_size", c_int64),
        ("max_position_embeddings", c_int64),
        ("sliding_window", c_int32),
        ("num_attention_heads", c_int32),
        ("num_kv_heads", c_int32),
        ("num_full_kv_heads", c_int32),
        ("head_dim", c_int32),
        ("full_head_dim", c_int32),
        ("num_experts", c_int32),
        ("top_k_experts", c_int32),
        ("kv_bytes_per_token_sliding", c_int64),
        ("kv_bytes_per_token_full", c_int64),
        ("weight_format", c_char * 64),
        ("weight_bytes_attention", c_int64),
        ("weight_bytes_mlp", c_int64),
        ("weight_bytes_experts", c_int64),
        ("weight_bytes_embeddings", c_int64),
        ("weight_bytes_other", c_int64),
        ("kept_plain", c_char * 128),
        ("has_vision", c_int32),
        ("image_token_id", c_int32),
    ]


class TokenizerInfo(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("vocab_size", c_int32),
        ("bos_id", c_int32),
        ("eos_id", c_int32),
        ("pad_id", c_int32),
        ("unk_id", c_int32),
        ("start_of_turn_id", c_int32),
        ("end_of_turn_id", c_int32),
    ]


# Every struct of the header, by its C name (the layout test walks this table).
STRUCTS = {
    "gannet_progress_t": Progress,
    "gannet_tp_id_t": TpId,
    "gannet_engine_config_t": EngineConfig,
    "gannet_chat_message_t": ChatMessage,
    "gannet_request_t": Request,
    "gannet_image_t": Image,
    "gannet_event_t": Event,
    "gannet_engine_stats_t": EngineStats,
    "gannet_model_info_t": ModelInfo,
    "gannet_tokenizer_info_t": TokenizerInfo,
}

EVENT_THINKING_OFFSET = Event.thinking.offset


def _candidates() -> list[str]:
    """Where libgannet may be, most specific first."""
    out = []
    env = os.environ.get("GANNET_LIBRARY")
    if env:
        return [env]  # an explicit choice is never silently replaced by another library
    here = Path(__file__).resolve().parent
    out += [str(p) for p in sorted(here.glob("libgannet.so*"))]
    found = ctypes.util.find_library("gannet")
    if found:
        out.append(found)
    return out


def _declare(lib: ctypes.CDLL) -> None:
    st = c_int32
    sigs = {
        "gannet_status_string": (c_char_p, [c_int32]),
        "gannet_last_error_message": (c_char_p, []),
        "gannet_version": (c_char_p, []),
        "gannet_version_code": (c_int32, []),
        "gannet_abi_version": (c_int32, []),
        "gannet_set_log_callback": (None, [c_void_p, c_void_p, c_int32]),
        "gannet_engine_create": (st, [POINTER(EngineConfig), POINTER(c_void_p)]),
        "gannet_engine_destroy": (None, [c_void_p]),
        "gannet_model_info": (st, [c_char_p, POINTER(ModelInfo)]),
        "gannet_engine_submit": (st, [c_void_p, POINTER(Request), POINTER(c_uint64)]),
        "gannet_request_check": (st, [POINTER(Request), POINTER(ModelInfo)]),
        "gannet_engine_cancel": (st, [c_void_p, c_uint64]),
        "gannet_engine_poll": (
            st,
            [c_void_p, c_int32, c_size_t, POINTER(POINTER(POINTER(Event))), POINTER(c_size_t)],
        ),
        "gannet_engine_get_stats": (st, [c_void_p, POINTER(EngineStats)]),
        "gannet_tokenizer_open": (st, [c_char_p, POINTER(c_void_p)]),
        "gannet_tokenizer_close": (None, [c_void_p]),
        "gannet_engine_tokenizer": (st, [c_void_p, POINTER(c_void_p)]),
        "gannet_tokenizer_get_info": (st, [c_void_p, POINTER(TokenizerInfo)]),
        "gannet_tokenize": (
            st,
            [c_void_p, c_char_p, c_size_t, c_int32, POINTER(c_int32), c_size_t, POINTER(c_size_t)],
        ),
        "gannet_detokenize": (
            st,
            [c_void_p, POINTER(c_int32), c_size_t, c_int32, c_void_p, c_size_t, POINTER(c_size_t)],
        ),
        "gannet_token_to_piece": (
            st,
            [c_void_p, c_int32, c_void_p, c_size_t, POINTER(c_size_t)],
        ),
        "gannet_apply_chat_template": (
            st,
            [
                c_void_p,
                POINTER(ChatMessage),
                c_size_t,
                c_int32,
                c_int32,
                c_void_p,
                c_size_t,
                POINTER(c_size_t),
            ],
        ),
        "gannet_apply_chat_template_json": (
            st,
            [c_void_p, c_char_p, c_int32, c_int32, c_void_p, c_size_t, POINTER(c_size_t)],
        ),
        "gannet_tokenizer_has_chat_template": (c_int32, [c_void_p]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """libgannet, loaded on first use: $GANNET_LIBRARY, the copy installed beside this package
    (pip install), or the system's (ld.so's search path)."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for path in _candidates():
        try:
            candidate = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        _declare(candidate)
        abi = candidate.gannet_abi_version()
        if abi != ABI_VERSION:
            raise ImportError(
                f"{path} has gannet ABI version {abi}; this package needs {ABI_VERSION}"
            )
        _lib = candidate
        return _lib
    where = "; ".join(errors) if errors else "none was found"
    raise ImportError(
        "cannot load libgannet (set GANNET_LIBRARY to libgannet.so, or pip install the package "
        f"from the repository's python/ folder): {where}"
    )

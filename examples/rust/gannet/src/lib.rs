//! Safe Rust API for gannet, an embeddable inference engine for Gemma-4 models, over its C ABI
//! 0.2 (`include/gannet/gannet.h`, declared in the `gannet-sys` crate).
//!
//! ```no_run
//! let engine = gannet::Engine::open("/models/gemma-4-e4b-it")?;
//! let request = gannet::Request::chat([gannet::Message::user("Hello!")]).max_tokens(64);
//! for event in engine.stream(&request)? {
//!     print!("{}", event.text);
//! }
//! # Ok::<(), gannet::Error>(())
//! ```
//!
//! Requests are greedy unless they set a temperature; sampled requests draw a fresh random seed
//! unless [`Request::seed`] fixes one (same seed, same request: same output) or
//! [`Request::seeding`] asks for [`Seed::RequestId`]. [`Request::check`] validates a request
//! without an engine. A [`Tokenizer`] renders chat prompts and counts tokens exactly as the engine
//! does: [`Tokenizer::open`] reads a model folder, [`Engine::tokenizer`] borrows the engine's own
//! (it cannot outlive the engine).
//!
//! Speculative decoding: [`EngineBuilder::draft_model`] names the target's Gemma-4 MTP assistant
//! (and [`EngineBuilder::speculative_tokens`] the drafts per round). Greedy output is token for
//! token the same as without it, sampled output has the same distribution;
//! [`Request::speculation`]`(false)` decodes one request without drafts. The counts arrive in the
//! [`Usage`] of the last event and in [`Stats`].
//!
//! Threads follow the ABI's rules. [`Engine`] is `Send + Sync`: submit and cancel from any thread
//! at any time. Only one thread may be inside the C poll call at a time; the engine enforces that
//! itself, so any number of threads may iterate their own [`Stream`] (one request's events) or
//! call [`Engine::poll`]/[`Engine::events`] (the events of requests sent with
//! [`Engine::submit`]) on a shared `&Engine`: whichever thread polls hands the other requests'
//! events to their owners. Dropping the engine destroys it, which the borrow checker makes sure
//! races with nothing.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{c_char, c_void, CStr, CString};
use std::fmt;
use std::ops::ControlFlow;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

pub use gannet_sys as sys;

mod builder;
mod tokenizer;
pub use builder::{EngineBuilder, Progress, ProgressControl, TpId};
pub use tokenizer::{Tokenizer, TokenizerInfo};

/// Events fetched per C poll call.
const POLL_BATCH: usize = 256;
/// How long one C poll call waits; bounds how late a thread notices a dropped stream.
const POLL_SLICE: Duration = Duration::from_millis(100);

// ---- errors ------------------------------------------------------------------------------

/// A failure status of the C ABI (every `GANNET_ERR_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    NotFound,
    OutOfMemory,
    ResourceExhausted,
    Unimplemented,
    DataLoss,
    DeviceLost,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    /// A code this wrapper does not know (from a newer library).
    Other(i32),
}

impl Status {
    /// `None` for `GANNET_OK`.
    pub fn from_raw(code: sys::gannet_status_t) -> Option<Status> {
        Some(match code {
            sys::GANNET_OK => return None,
            sys::GANNET_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::GANNET_ERR_NOT_FOUND => Status::NotFound,
            sys::GANNET_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::GANNET_ERR_RESOURCE_EXHAUSTED => Status::ResourceExhausted,
            sys::GANNET_ERR_UNIMPLEMENTED => Status::Unimplemented,
            sys::GANNET_ERR_DATA_LOSS => Status::DataLoss,
            sys::GANNET_ERR_DEVICE_LOST => Status::DeviceLost,
            sys::GANNET_ERR_CANCELLED => Status::Cancelled,
            sys::GANNET_ERR_DEADLINE_EXCEEDED => Status::DeadlineExceeded,
            sys::GANNET_ERR_FAILED_PRECONDITION => Status::FailedPrecondition,
            sys::GANNET_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        })
    }

    pub fn code(self) -> sys::gannet_status_t {
        match self {
            Status::InvalidArgument => sys::GANNET_ERR_INVALID_ARGUMENT,
            Status::NotFound => sys::GANNET_ERR_NOT_FOUND,
            Status::OutOfMemory => sys::GANNET_ERR_OUT_OF_MEMORY,
            Status::ResourceExhausted => sys::GANNET_ERR_RESOURCE_EXHAUSTED,
            Status::Unimplemented => sys::GANNET_ERR_UNIMPLEMENTED,
            Status::DataLoss => sys::GANNET_ERR_DATA_LOSS,
            Status::DeviceLost => sys::GANNET_ERR_DEVICE_LOST,
            Status::Cancelled => sys::GANNET_ERR_CANCELLED,
            Status::DeadlineExceeded => sys::GANNET_ERR_DEADLINE_EXCEEDED,
            Status::FailedPrecondition => sys::GANNET_ERR_FAILED_PRECONDITION,
            Status::Internal => sys::GANNET_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The library's name for it, e.g. `GANNET_ERR_INVALID_ARGUMENT`.
    pub fn name(self) -> &'static str {
        // SAFETY: gannet_status_string returns static, NUL-terminated text for any code.
        unsafe { CStr::from_ptr(sys::gannet_status_string(self.code())) }
            .to_str()
            .unwrap_or("GANNET_ERR_?")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call or a failed request: the status and the library's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error of a call that just returned `code` on this thread.
    fn last(code: sys::gannet_status_t) -> Error {
        // SAFETY: the message is thread-local, NUL-terminated and valid until this thread's next
        // gannet call; it is copied at once.
        let message = unsafe { CStr::from_ptr(sys::gannet_last_error_message()) };
        Error::new(
            Status::from_raw(code).unwrap_or(Status::Internal),
            message.to_string_lossy(),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn check(code: sys::gannet_status_t) -> Result<()> {
    if code == sys::GANNET_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}

pub(crate) fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{what} contains a NUL byte"),
        )
    })
}

// ---- library-wide ------------------------------------------------------------------------

/// `MAJOR.MINOR.PATCH` of the library actually linked.
pub fn version() -> &'static str {
    // SAFETY: static, NUL-terminated text.
    unsafe { CStr::from_ptr(sys::gannet_version()) }
        .to_str()
        .unwrap_or("?")
}

/// `GANNET_VERSION_CODE` of the library actually linked (`MAJOR * 10000 + MINOR * 100 + PATCH`;
/// [`sys::GANNET_VERSION_CODE`] is the one these bindings were written for).
pub fn version_code() -> i32 {
    // SAFETY: a plain query.
    unsafe { sys::gannet_version_code() }
}

/// `GANNET_ABI_VERSION` of the library actually linked.
pub fn abi_version() -> i32 {
    // SAFETY: a plain query.
    unsafe { sys::gannet_abi_version() }
}

/// `FailedPrecondition` unless the linked library has the ABI these bindings mirror
/// ([`sys::GANNET_ABI_VERSION`]). [`EngineBuilder::build`] and [`Tokenizer::open`] check it.
pub fn check_abi() -> Result<()> {
    let linked = abi_version();
    if linked == sys::GANNET_ABI_VERSION {
        return Ok(());
    }
    Err(Error::new(
        Status::FailedPrecondition,
        format!(
            "libgannet {} has ABI version {linked}; these bindings need {}",
            version(),
            sys::GANNET_ABI_VERSION
        ),
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Debug = sys::GANNET_LOG_LEVEL_DEBUG as isize,
    Info = sys::GANNET_LOG_LEVEL_INFO as isize,
    Warning = sys::GANNET_LOG_LEVEL_WARNING as isize,
    Error = sys::GANNET_LOG_LEVEL_ERROR as isize,
    Off = sys::GANNET_LOG_LEVEL_OFF as isize,
}

impl LogLevel {
    fn from_raw(level: i32) -> LogLevel {
        match level {
            sys::GANNET_LOG_LEVEL_DEBUG => LogLevel::Debug,
            sys::GANNET_LOG_LEVEL_INFO => LogLevel::Info,
            sys::GANNET_LOG_LEVEL_WARNING => LogLevel::Warning,
            sys::GANNET_LOG_LEVEL_ERROR => LogLevel::Error,
            _ => LogLevel::Off,
        }
    }
}

type Logger = Box<dyn Fn(LogLevel, &str) + Send + Sync>;
static LOGGER: RwLock<Option<Logger>> = RwLock::new(None);

unsafe extern "C" fn log_trampoline(_: *mut c_void, level: i32, message: *const c_char) {
    // SAFETY: the library passes NUL-terminated text valid for the call.
    let message = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    let _ = std::panic::catch_unwind(|| {
        if let Ok(logger) = LOGGER.read() {
            if let Some(logger) = logger.as_ref() {
                logger(LogLevel::from_raw(level), &message);
            }
        }
    });
}

/// Process-wide: log to stderr, dropping messages below `min_level`.
pub fn set_log_level(min_level: LogLevel) {
    // SAFETY: a NULL sink restores stderr.
    unsafe { sys::gannet_set_log_callback(None, std::ptr::null_mut(), min_level as i32) };
    *LOGGER.write().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Process-wide: send log messages at or above `min_level` to `logger` (called from gannet's
/// threads, never concurrently; a panic in it is swallowed).
pub fn set_logger(logger: impl Fn(LogLevel, &str) + Send + Sync + 'static, min_level: LogLevel) {
    *LOGGER.write().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(logger));
    // SAFETY: the trampoline is a valid callback for the life of the process.
    unsafe {
        sys::gannet_set_log_callback(Some(log_trampoline), std::ptr::null_mut(), min_level as i32)
    };
}

/// What `gannet_model_info` reads from a checkpoint folder (no weights are read); the fields of
/// `gannet_model_info_t` are reachable through `Deref`.
#[derive(Debug, Clone, Copy)]
pub struct ModelInfo(pub sys::gannet_model_info_t);

impl ModelInfo {
    pub fn model_type(&self) -> &str {
        fixed_str(&self.0.model_type)
    }
    pub fn variant(&self) -> &str {
        fixed_str(&self.0.variant)
    }
    pub fn dtypes(&self) -> &str {
        fixed_str(&self.0.dtypes)
    }
}

impl std::ops::Deref for ModelInfo {
    type Target = sys::gannet_model_info_t;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

pub(crate) fn fixed_str(chars: &[c_char]) -> &str {
    // SAFETY: c_char and u8 have the same size and alignment.
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(chars.as_ptr().cast(), chars.len()) };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    // A name cut at the array's end may end inside a character: keep what is whole.
    match std::str::from_utf8(&bytes[..end]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or(""),
    }
}

pub fn model_info(model_dir: impl AsRef<Path>) -> Result<ModelInfo> {
    let dir = c_string("model_dir", &model_dir.as_ref().to_string_lossy())?;
    let mut info = sys::gannet_model_info_t::default();
    // SAFETY: valid NUL-terminated path and an output struct with struct_size set.
    check(unsafe { sys::gannet_model_info(dir.as_ptr(), &mut info) })?;
    Ok(ModelInfo(info))
}

/// Engine statistics (`gannet_engine_get_stats`): the counters of `gannet_engine_stats_t` through
/// `Deref` (`num_steps`, `kv_pages_used`, `max_running_seqs`, `device_id`, `kv_bytes`,
/// `device_memory_bytes`, `load_seconds`, ...; with a draft model `num_speculative_tokens`,
/// `spec_verify_chunks`, `spec_draft_tokens`, `spec_accepted_tokens`,
/// `spec_mean_accepted_length` and `spec_draft_rounds`, all zero without one) and its text fields
/// as `&str`.
#[derive(Debug, Clone, Copy)]
pub struct Stats(pub sys::gannet_engine_stats_t);

impl Stats {
    /// `"cpu"` or `"cuda"`.
    pub fn backend(&self) -> &str {
        fixed_str(&self.0.backend)
    }
    /// E.g. `"NVIDIA H100 80GB HBM3 (sm_90)"` or `"16 threads"`.
    pub fn device_name(&self) -> &str {
        fixed_str(&self.0.device_name)
    }
    /// Why an automatic backend choice ran on the CPU; empty otherwise.
    pub fn backend_fallback(&self) -> &str {
        fixed_str(&self.0.backend_fallback)
    }
    /// What the KV cache stores: `"bf16"`, `"f32"` (CPU backend) or `"fp8_e4m3"`.
    pub fn kv_cache_dtype(&self) -> &str {
        fixed_str(&self.0.kv_cache_dtype)
    }
    /// What activations and weights are: `"bf16"`, `"f16"` or `"f32"` (CPU backend).
    pub fn compute_dtype(&self) -> &str {
        fixed_str(&self.0.compute_dtype)
    }
    /// `gannet_engine_create`, start to ready.
    pub fn load_time(&self) -> Duration {
        Duration::try_from_secs_f64(self.0.load_seconds).unwrap_or_default()
    }
    /// Whether the engine decodes speculatively (it was built with a draft model).
    pub fn speculative(&self) -> bool {
        self.0.num_speculative_tokens > 0
    }
    /// Drafts accepted / drafts verified; 0 before any draft was verified.
    pub fn spec_acceptance_rate(&self) -> f64 {
        if self.0.spec_draft_tokens > 0 {
            self.0.spec_accepted_tokens as f64 / self.0.spec_draft_tokens as f64
        } else {
            0.0
        }
    }
}

impl std::ops::Deref for Stats {
    type Target = sys::gannet_engine_stats_t;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

// ---- requests ----------------------------------------------------------------------------

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Prompt {
    Tokens(Vec<i32>),
    Text(String),
    Chat(Vec<Message>),
}

/// C views of chat messages (`gannet_chat_message_t`, `struct_size` set) and the strings they
/// point to; valid while this value lives.
pub(crate) struct RawMessages {
    _strings: Vec<CString>,
    messages: Vec<sys::gannet_chat_message_t>,
}

impl RawMessages {
    pub(crate) fn new(list: &[Message]) -> Result<RawMessages> {
        let mut strings = Vec::with_capacity(2 * list.len());
        for m in list {
            strings.push(c_string("a message role", &m.role)?);
            strings.push(c_string("a message", &m.content)?);
        }
        // The CStrings' buffers do not move when `strings` is moved into the result.
        let messages = strings
            .chunks(2)
            .map(|pair| sys::gannet_chat_message_t {
                role: pair[0].as_ptr(),
                content: pair[1].as_ptr(),
                ..Default::default()
            })
            .collect();
        Ok(RawMessages {
            _strings: strings,
            messages,
        })
    }

    pub(crate) fn as_slice(&self) -> &[sys::gannet_chat_message_t] {
        &self.messages
    }
}

/// How a sampled request's seed is chosen (`gannet_request_t.seed_mode`). Greedy requests do not
/// draw random numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Seed {
    /// Fresh entropy from the OS for every request (the default).
    #[default]
    Random,
    /// This seed: same seed and same request give the same output, whatever else is running.
    Fixed(u64),
    /// Derived from the request id: repeatable runs of one engine without choosing seeds.
    RequestId,
}

/// Sampling settings of a request (flattened into `gannet_request_t`); zero means off.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Sampling {
    temperature: f32,
    top_k: i32,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    presence_penalty: f32,
    frequency_penalty: f32,
    seed: Seed,
}

/// One image of a request ([`Request::image`]): encoded bytes (PNG, JPEG or WebP) or raw 8-bit
/// RGB. The prompt marks where it goes: `<|image|>` in text or a message, the model's
/// `image_token_id` in token ids; the k-th placeholder is the k-th image.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    data: ImageData,
    max_soft_tokens: i32,
}

#[derive(Debug, Clone, PartialEq)]
enum ImageData {
    Encoded(Vec<u8>),
    Rgb {
        pixels: Vec<u8>,
        width: u32,
        height: u32,
    },
}

impl Image {
    /// PNG, JPEG or WebP bytes (told apart by their signature).
    pub fn encoded(bytes: impl Into<Vec<u8>>) -> Image {
        Image {
            data: ImageData::Encoded(bytes.into()),
            max_soft_tokens: 0,
        }
    }
    /// `width * height * 3` bytes of RGB, rows top down.
    pub fn rgb(pixels: impl Into<Vec<u8>>, width: u32, height: u32) -> Image {
        Image {
            data: ImageData::Rgb {
                pixels: pixels.into(),
                width,
                height,
            },
            max_soft_tokens: 0,
        }
    }
    /// The image's soft-token budget: 70, 140, 280 (the default), 560 or 1120.
    pub fn max_soft_tokens(mut self, n: u32) -> Self {
        self.max_soft_tokens = clamp_i32(n);
        self
    }

    /// The C view; points into `self`.
    fn raw(&self) -> Result<sys::gannet_image_t> {
        let mut raw = sys::gannet_image_t {
            max_soft_tokens: self.max_soft_tokens,
            ..Default::default()
        };
        match &self.data {
            ImageData::Encoded(bytes) => {
                raw.data = bytes.as_ptr();
                raw.size = bytes.len();
            }
            ImageData::Rgb {
                pixels,
                width,
                height,
            } => {
                // The library reads width * height * 3 bytes: a shorter buffer must not reach it.
                let need = (*width as u64) * (*height as u64) * 3;
                if pixels.len() as u64 != need {
                    return Err(Error::new(
                        Status::InvalidArgument,
                        format!(
                            "an RGB image of {width} x {height} needs {need} bytes, got {}",
                            pixels.len()
                        ),
                    ));
                }
                raw.rgb = pixels.as_ptr();
                raw.width = clamp_i32(*width);
                raw.height = clamp_i32(*height);
            }
        }
        Ok(raw)
    }
}

/// A generation request: one prompt (token ids, text or chat messages) and its options. It
/// owns its data and can be submitted any number of times. Greedy unless `temperature` is set;
/// sampled requests are seeded randomly unless [`Request::seed`] or [`Request::seeding`] say
/// otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    prompt: Prompt,
    sampling: Sampling,
    max_tokens: i32,
    min_tokens: i32,
    stop_token_ids: Option<Vec<i32>>,
    ignore_default_stop_tokens: bool,
    stop_strings: Vec<String>,
    logprobs: i32,
    priority: i32,
    deadline: Option<Duration>,
    generation_prompt: bool,
    thinking: bool,
    speculation: bool,
    images: Vec<Image>,
}

fn clamp_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Request {
    fn with_prompt(prompt: Prompt) -> Request {
        Request {
            prompt,
            sampling: Sampling::default(),
            max_tokens: 0,
            min_tokens: 0,
            stop_token_ids: None,
            ignore_default_stop_tokens: false,
            stop_strings: Vec::new(),
            logprobs: 0,
            priority: 0,
            deadline: None,
            generation_prompt: true,
            thinking: false,
            speculation: true,
            images: Vec::new(),
        }
    }

    /// A prompt of token ids, used as given (no BOS is added).
    pub fn tokens(ids: impl Into<Vec<i32>>) -> Request {
        Request::with_prompt(Prompt::Tokens(ids.into()))
    }
    /// A UTF-8 text prompt, tokenized by the engine.
    pub fn text(prompt: impl Into<String>) -> Request {
        Request::with_prompt(Prompt::Text(prompt.into()))
    }
    /// Chat messages, rendered with the model's chat template.
    pub fn chat(messages: impl IntoIterator<Item = Message>) -> Request {
        Request::with_prompt(Prompt::Chat(messages.into_iter().collect()))
    }

    /// Tokens to generate at most (default: until the context is full).
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = clamp_i32(n);
        self
    }
    /// Stop tokens and strings are ignored before this many tokens.
    pub fn min_tokens(mut self, n: u32) -> Self {
        self.min_tokens = clamp_i32(n);
        self
    }
    /// 0 is greedy (the default).
    pub fn temperature(mut self, t: f32) -> Self {
        self.sampling.temperature = t;
        self
    }
    pub fn top_k(mut self, k: u32) -> Self {
        self.sampling.top_k = clamp_i32(k);
        self
    }
    pub fn top_p(mut self, p: f32) -> Self {
        self.sampling.top_p = p;
        self
    }
    pub fn min_p(mut self, p: f32) -> Self {
        self.sampling.min_p = p;
        self
    }
    pub fn repetition_penalty(mut self, r: f32) -> Self {
        self.sampling.repetition_penalty = r;
        self
    }
    pub fn presence_penalty(mut self, x: f32) -> Self {
        self.sampling.presence_penalty = x;
        self
    }
    pub fn frequency_penalty(mut self, x: f32) -> Self {
        self.sampling.frequency_penalty = x;
        self
    }
    /// A fixed seed ([`Seed::Fixed`]): same seed, same request: same output, whatever else the
    /// engine runs.
    pub fn seed(self, seed: u64) -> Self {
        self.seeding(Seed::Fixed(seed))
    }
    /// How the sampling seed is chosen (default [`Seed::Random`]).
    pub fn seeding(mut self, seed: Seed) -> Self {
        self.sampling.seed = seed;
        self
    }
    /// Replaces the default stop tokens (`<eos>`, `<turn|>`, `<|tool_response>`).
    pub fn stop_token_ids(mut self, ids: impl Into<Vec<i32>>) -> Self {
        self.stop_token_ids = Some(ids.into());
        self
    }
    /// Only `stop_token_ids` stop, not the defaults.
    pub fn ignore_default_stop_tokens(mut self, ignore: bool) -> Self {
        self.ignore_default_stop_tokens = ignore;
        self
    }
    /// Adds a stop string (may span tokens; not part of the output).
    pub fn stop_string(mut self, s: impl Into<String>) -> Self {
        self.stop_strings.push(s.into());
        self
    }
    /// Report the chosen token's logprob and the `n` most likely tokens' logprobs.
    pub fn logprobs(mut self, n: u32) -> Self {
        self.logprobs = clamp_i32(n);
        self
    }
    /// Higher is scheduled first.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Fail with `DeadlineExceeded` this long after submission.
    pub fn deadline(mut self, after: Duration) -> Self {
        self.deadline = Some(after);
        self
    }
    /// Chat: end the prompt with the model's turn opener (the default), or not (to continue the
    /// last message).
    pub fn generation_prompt(mut self, add: bool) -> Self {
        self.generation_prompt = add;
        self
    }
    /// Chat: enable thinking mode.
    pub fn thinking(mut self, enable: bool) -> Self {
        self.thinking = enable;
        self
    }
    /// On an engine with a draft model ([`EngineBuilder::draft_model`]): `false` decodes this
    /// request without drafts. The default is `true`; without a draft model it changes nothing.
    pub fn speculation(mut self, enable: bool) -> Self {
        self.speculation = enable;
        self
    }

    /// Adds an image, for the prompt's next image placeholder (models with a vision tower).
    pub fn image(mut self, image: Image) -> Self {
        self.images.push(image);
        self
    }

    /// Validates this request as submit would, without an engine (`gannet_request_check`):
    /// against a model's info when given (token ids against the vocabulary, text needs a
    /// tokenizer), else only the checks that need no model.
    pub fn check(&self, model: Option<&ModelInfo>) -> Result<()> {
        let model = model.map_or(std::ptr::null(), |m| {
            &m.0 as *const sys::gannet_model_info_t
        });
        self.with_raw(|raw| {
            // SAFETY: `raw` and what it points to live for this call; `model` is NULL or valid.
            check(unsafe { sys::gannet_request_check(raw, model) })
        })?
    }

    /// Calls `f` with the C view of this request; the view points into locals of this call.
    pub(crate) fn with_raw<T>(&self, f: impl FnOnce(&sys::gannet_request_t) -> T) -> Result<T> {
        let s = &self.sampling;
        let (seed_mode, seed) = match s.seed {
            Seed::Random => (sys::GANNET_SEED_RANDOM, 0),
            Seed::Fixed(seed) => (sys::GANNET_SEED_FIXED, seed),
            Seed::RequestId => (sys::GANNET_SEED_REQUEST_ID, 0),
        };
        let mut raw = sys::gannet_request_t {
            max_tokens: self.max_tokens,
            min_tokens: self.min_tokens,
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            repetition_penalty: s.repetition_penalty,
            presence_penalty: s.presence_penalty,
            frequency_penalty: s.frequency_penalty,
            seed_mode,
            seed,
            ignore_default_stop_tokens: self.ignore_default_stop_tokens as i32,
            logprobs: self.logprobs,
            priority: self.priority,
            deadline_ms: self.deadline.map_or(0, |d| {
                i64::try_from(d.as_millis().max(1)).unwrap_or(i64::MAX)
            }),
            add_generation_prompt: if self.generation_prompt { 1 } else { 2 },
            enable_thinking: self.thinking as i32,
            disable_speculation: (!self.speculation) as i32,
            ..Default::default()
        };
        // Owners of what `raw` points to; they live until this function returns.
        let text;
        let messages;
        match &self.prompt {
            Prompt::Tokens(ids) => {
                raw.prompt_tokens = ids.as_ptr();
                raw.num_prompt_tokens = ids.len();
            }
            Prompt::Text(t) => {
                text = c_string("the prompt", t)?;
                raw.prompt_text = text.as_ptr();
            }
            Prompt::Chat(list) => {
                messages = RawMessages::new(list)?;
                raw.messages = messages.as_slice().as_ptr();
                raw.num_messages = messages.as_slice().len();
            }
        }
        if let Some(ids) = &self.stop_token_ids {
            raw.stop_token_ids = ids.as_ptr();
            raw.num_stop_token_ids = ids.len();
        }
        let stops = self
            .stop_strings
            .iter()
            .map(|s| c_string("a stop string", s))
            .collect::<Result<Vec<_>>>()?;
        let stop_ptrs: Vec<*const c_char> = stops.iter().map(|s| s.as_ptr()).collect();
        if !stop_ptrs.is_empty() {
            raw.stop_strings = stop_ptrs.as_ptr();
            raw.num_stop_strings = stop_ptrs.len();
        }
        let images = self
            .images
            .iter()
            .map(Image::raw)
            .collect::<Result<Vec<_>>>()?;
        if !images.is_empty() {
            raw.images = images.as_ptr();
            raw.num_images = images.len();
        }
        Ok(f(&raw))
    }
}

// ---- events ------------------------------------------------------------------------------

/// The id the engine gave a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// A stop token or stop string.
    Stop,
    /// `max_tokens` or the context length.
    Length,
    Cancelled,
    /// A reason this wrapper does not know (from a newer library).
    Other(i32),
}

impl FinishReason {
    fn from_raw(reason: i32) -> FinishReason {
        match reason {
            sys::GANNET_FINISH_STOP => FinishReason::Stop,
            sys::GANNET_FINISH_LENGTH => FinishReason::Length,
            sys::GANNET_FINISH_CANCELLED => FinishReason::Cancelled,
            other => FinishReason::Other(other),
        }
    }
}

/// Token counts reported with a request's last event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: i32,
    pub generated_tokens: i32,
    /// Prompt tokens served from the prefix cache.
    pub cached_prompt_tokens: i32,
    /// Drafts verified for this request (speculative decoding; 0 without a draft model).
    pub draft_tokens: i32,
    /// Of which accepted.
    pub accepted_draft_tokens: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// One generated token. `logprob` and `top_logprobs` (most likely first) are filled when
    /// the request asked for logprobs.
    Token {
        token_id: i32,
        logprob: f32,
        top_logprobs: Vec<(i32, f32)>,
    },
    /// The request is done; no more events follow.
    Finish { reason: FinishReason, usage: Usage },
    /// The request failed; no more events follow.
    Error { error: Error, usage: Usage },
}

/// One event of one request, copied out of the library's buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub request_id: RequestId,
    /// UTF-8 text completed by this event (may be empty; text that could start a stop string is
    /// held back and arrives with a later event).
    pub text: String,
    /// `text` is the model's thinking (its `<|channel>thought ... <channel|>` block), not the
    /// answer.
    pub thinking: bool,
    pub kind: EventKind,
}

impl Event {
    /// The last event of its request.
    pub fn is_terminal(&self) -> bool {
        !matches!(self.kind, EventKind::Token { .. })
    }

    pub fn token_id(&self) -> Option<i32> {
        match self.kind {
            EventKind::Token { token_id, .. } => Some(token_id),
            _ => None,
        }
    }

    /// # Safety
    /// `e` must be an event of the current poll batch (its pointers valid). Its `struct_size`
    /// may exceed `size_of::<gannet_event_t>()` (fields of a later library, ignored here); ABI 2
    /// guarantees every field declared here.
    unsafe fn from_raw(e: &sys::gannet_event_t) -> Event {
        let text = if e.text.is_null() || e.text_len == 0 {
            String::new()
        } else {
            // SAFETY: the library guarantees `text_len` bytes at `text`.
            let bytes = unsafe { std::slice::from_raw_parts(e.text.cast::<u8>(), e.text_len) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        let usage = Usage {
            prompt_tokens: e.num_prompt_tokens,
            generated_tokens: e.num_generated_tokens,
            cached_prompt_tokens: e.num_cached_prompt_tokens,
            draft_tokens: e.num_draft_tokens,
            accepted_draft_tokens: e.num_accepted_draft_tokens,
        };
        let kind = match e.r#type {
            sys::GANNET_EVENT_TOKEN => {
                let n = usize::try_from(e.num_top_logprobs).unwrap_or(0);
                let top_logprobs =
                    if n == 0 || e.top_token_ids.is_null() || e.top_logprobs.is_null() {
                        Vec::new()
                    } else {
                        // SAFETY: both arrays hold num_top_logprobs entries.
                        let ids = unsafe { std::slice::from_raw_parts(e.top_token_ids, n) };
                        let lps = unsafe { std::slice::from_raw_parts(e.top_logprobs, n) };
                        ids.iter().copied().zip(lps.iter().copied()).collect()
                    };
                EventKind::Token {
                    token_id: e.token_id,
                    logprob: e.logprob,
                    top_logprobs,
                }
            }
            sys::GANNET_EVENT_FINISH => EventKind::Finish {
                reason: FinishReason::from_raw(e.finish_reason),
                usage,
            },
            _ => {
                let message = if e.message.is_null() {
                    String::new()
                } else {
                    // SAFETY: NUL-terminated, valid until the next poll.
                    unsafe { CStr::from_ptr(e.message) }
                        .to_string_lossy()
                        .into_owned()
                };
                let status = Status::from_raw(e.status).unwrap_or(Status::Internal);
                EventKind::Error {
                    error: Error::new(status, message),
                    usage,
                }
            }
        };
        // An event of a library older than the `thinking` field ends before it.
        let has_thinking =
            e.struct_size as usize > std::mem::offset_of!(sys::gannet_event_t, thinking);
        Event {
            request_id: RequestId(e.request_id),
            text,
            thinking: has_thinking && e.thinking != 0,
            kind,
        }
    }
}

/// The whole result of one request (see [`Stream::wait`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tokens: Vec<i32>,
    pub finish: FinishReason,
    pub usage: Usage,
}

// ---- engine ------------------------------------------------------------------------------

#[derive(Default)]
struct Inbox {
    /// A thread is inside gannet_engine_poll (the ABI allows one at a time).
    polling: bool,
    /// Events of requests owned by a live `Stream`.
    streams: HashMap<u64, VecDeque<Event>>,
    /// Requests whose `Stream` was dropped early: their remaining events are discarded.
    abandoned: HashSet<u64>,
    /// Events of requests sent with `submit`, for `poll`/`events`.
    unclaimed: VecDeque<Event>,
    /// Requests sent with `submit` whose last event has not been polled yet.
    in_flight: HashSet<u64>,
}

impl Inbox {
    fn deliver(&mut self, event: Event) {
        let id = event.request_id.0;
        if let Some(queue) = self.streams.get_mut(&id) {
            queue.push_back(event);
        } else if self.abandoned.contains(&id) {
            if event.is_terminal() {
                self.abandoned.remove(&id);
            }
        } else {
            if event.is_terminal() {
                self.in_flight.remove(&id);
            }
            self.unclaimed.push_back(event);
        }
    }
}

/// A loaded model and its engine thread. See the crate docs for the threading rules.
pub struct Engine {
    raw: NonNull<sys::gannet_engine_t>,
    inbox: Mutex<Inbox>,
    wake: Condvar,
    /// Held during [`Engine::serve`] (the ABI allows one serve call at a time).
    serving: Mutex<()>,
}

// SAFETY: the C ABI allows submit and cancel from any thread at any time and poll from one thread
// at a time, which `Inbox::polling` enforces; destroy runs in Drop, which has exclusive access.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

impl Engine {
    pub fn builder<'a>(model_dir: impl AsRef<Path>) -> EngineBuilder<'a> {
        EngineBuilder::new(model_dir.as_ref())
    }

    /// Loads a checkpoint folder with the library's defaults.
    pub fn open(model_dir: impl AsRef<Path>) -> Result<Engine> {
        Engine::builder(model_dir).build()
    }

    pub fn as_raw(&self) -> *mut sys::gannet_engine_t {
        self.raw.as_ptr()
    }

    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit_raw(&self, request: &Request) -> Result<u64> {
        request.with_raw(|raw| {
            let mut id = 0u64;
            // SAFETY: `raw` and everything it points to live for this call.
            check(unsafe { sys::gannet_engine_submit(self.raw.as_ptr(), raw, &mut id) })?;
            Ok(id)
        })?
    }

    /// Queues a request; its events come from [`Engine::poll`] or [`Engine::events`].
    pub fn submit(&self, request: &Request) -> Result<RequestId> {
        // The inbox stays locked until the id is recorded, so a concurrent poll cannot hand out
        // the request's events before it is known.
        let mut inbox = self.lock();
        let id = self.submit_raw(request)?;
        inbox.in_flight.insert(id);
        Ok(RequestId(id))
    }

    /// Queues a request and returns the iterator of its own events.
    pub fn stream(&self, request: &Request) -> Result<Stream<'_>> {
        let mut inbox = self.lock();
        let id = self.submit_raw(request)?;
        inbox.streams.insert(id, VecDeque::new());
        Ok(Stream {
            engine: self,
            id: RequestId(id),
            done: false,
        })
    }

    /// Cancels a request at any moment; a FINISH event with reason `Cancelled` follows unless it
    /// already finished (then: `NotFound`).
    pub fn cancel(&self, id: RequestId) -> Result<()> {
        // SAFETY: a live engine; any id is allowed.
        check(unsafe { sys::gannet_engine_cancel(self.raw.as_ptr(), id.0) })
    }

    /// On a rank other than 0 of a multi-process tensor-parallel group (see
    /// [`EngineBuilder::tp_rank`]; its submit fails with `FailedPrecondition`): waits until the
    /// group ends, at most `timeout` (`None` = no limit). `Ok` once rank 0's engine was dropped,
    /// then drop this one; `DeviceLost` when a rank died (or did not answer in time);
    /// `DeadlineExceeded` when the timeout passed while the group still serves.
    /// `FailedPrecondition` on an engine that serves requests itself. Calls from several threads
    /// take turns.
    pub fn serve(&self, timeout: Option<Duration>) -> Result<()> {
        let timeout_ms = match timeout {
            None => -1,
            // Rounded up: never shorter than asked.
            Some(t) => i32::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX),
        };
        let _turn = self.serving.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a live engine; one serve call at a time (`serving`).
        check(unsafe { sys::gannet_engine_serve(self.raw.as_ptr(), timeout_ms) })
    }

    pub fn stats(&self) -> Result<Stats> {
        let mut stats = sys::gannet_engine_stats_t::default();
        // SAFETY: a live engine and an output struct with struct_size set.
        check(unsafe { sys::gannet_engine_get_stats(self.raw.as_ptr(), &mut stats) })?;
        Ok(Stats(stats))
    }

    /// The engine's own tokenizer, borrowed from the engine (it cannot outlive it). `NotFound`
    /// when the model has none (dummy models, folders without tokenizer.json).
    ///
    /// ```compile_fail,E0505
    /// let engine = gannet::Engine::open("/models/gemma-4-e4b-it").unwrap();
    /// let tokenizer = engine.tokenizer().unwrap();
    /// drop(engine); // error: `engine` is still borrowed by `tokenizer`
    /// tokenizer.tokenize("hello", false).unwrap();
    /// ```
    pub fn tokenizer(&self) -> Result<Tokenizer<'_>> {
        let mut raw = std::ptr::null();
        // SAFETY: a live engine; the tokenizer lives until the engine is destroyed, which the
        // returned borrow of `self` prevents while it exists.
        check(unsafe { sys::gannet_engine_tokenizer(self.raw.as_ptr(), &mut raw) })?;
        // SAFETY: owned by the engine: never closed by the Tokenizer.
        unsafe { Tokenizer::borrowed(raw) }
    }

    /// Waits up to `timeout` for events of requests sent with [`Engine::submit`]; empty on
    /// timeout.
    pub fn poll(&self, timeout: Duration) -> Result<Vec<Event>> {
        let deadline = Instant::now() + timeout;
        let mut inbox = self.lock();
        loop {
            if !inbox.unclaimed.is_empty() {
                return Ok(inbox.unclaimed.drain(..).collect());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            inbox = self.pump(inbox, left.min(POLL_SLICE))?;
        }
    }

    /// Iterates the events of requests sent with [`Engine::submit`] until none of them is left
    /// unfinished.
    pub fn events(&self) -> Events<'_> {
        Events { engine: self }
    }

    /// Makes progress on the event queue: polls the C ABI for up to `wait` if no other thread is
    /// polling, else waits (up to `wait`) for that thread to hand out what it got.
    fn pump<'g>(
        &'g self,
        mut inbox: MutexGuard<'g, Inbox>,
        wait: Duration,
    ) -> Result<MutexGuard<'g, Inbox>> {
        if inbox.polling {
            let (guard, _) = self
                .wake
                .wait_timeout(inbox, wait)
                .unwrap_or_else(|e| e.into_inner());
            return Ok(guard);
        }
        inbox.polling = true;
        drop(inbox);
        let timeout_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        let mut events: *const *const sys::gannet_event_t = std::ptr::null();
        let mut n = 0usize;
        // SAFETY: only this thread is polling (the `polling` flag).
        let code = unsafe {
            sys::gannet_engine_poll(
                self.raw.as_ptr(),
                timeout_ms,
                POLL_BATCH,
                &mut events,
                &mut n,
            )
        };
        let result = check(code).map(|()| {
            if n == 0 || events.is_null() {
                Vec::new()
            } else {
                // SAFETY: `n` pointers to events, valid until the next poll, which cannot start
                // before `polling` is cleared below.
                unsafe { std::slice::from_raw_parts(events, n) }
                    .iter()
                    .map(|&e| unsafe { Event::from_raw(&*e) })
                    .collect()
            }
        });
        let mut inbox = self.lock();
        inbox.polling = false;
        self.wake.notify_all();
        for event in result? {
            inbox.deliver(event);
        }
        Ok(inbox)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: no borrow of the engine (streams and tokenizers included) outlives it.
        unsafe { sys::gannet_engine_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

/// The events of one request, ending with its FINISH or ERROR event. Dropping it before the end
/// cancels the request. It is `Send`: it may be consumed on another thread than the one that
/// submitted it.
pub struct Stream<'e> {
    engine: &'e Engine,
    id: RequestId,
    done: bool,
}

impl Stream<'_> {
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// Asks the engine to stop the request; the stream then ends with a `Cancelled` finish.
    pub fn cancel(&self) -> Result<()> {
        match self.engine.cancel(self.id) {
            Err(e) if e.status() == Status::NotFound => Ok(()), // finished already
            other => other,
        }
    }

    /// Consumes the stream: the whole text and tokens, or the request's error.
    pub fn wait(self) -> Result<Completion> {
        let mut text = String::new();
        let mut tokens = Vec::new();
        for event in self {
            text.push_str(&event.text);
            match event.kind {
                EventKind::Token { token_id, .. } => tokens.push(token_id),
                EventKind::Finish { reason, usage } => {
                    return Ok(Completion {
                        text,
                        tokens,
                        finish: reason,
                        usage,
                    })
                }
                EventKind::Error { error, .. } => return Err(error),
            }
        }
        Err(Error::new(
            Status::Internal,
            "the event stream ended without a FINISH event",
        ))
    }
}

impl Iterator for Stream<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.done {
            return None;
        }
        let mut inbox = self.engine.lock();
        loop {
            let queue = inbox
                .streams
                .get_mut(&self.id.0)
                .expect("a live stream is registered");
            if let Some(event) = queue.pop_front() {
                if event.is_terminal() {
                    self.done = true;
                    inbox.streams.remove(&self.id.0);
                }
                return Some(event);
            }
            inbox = match self.engine.pump(inbox, POLL_SLICE) {
                Ok(guard) => guard,
                Err(error) => {
                    // A failed poll ends this request's stream as its error.
                    self.done = true;
                    self.engine.lock().streams.remove(&self.id.0);
                    let usage = Usage::default();
                    return Some(Event {
                        request_id: self.id,
                        text: String::new(),
                        thinking: false,
                        kind: EventKind::Error { error, usage },
                    });
                }
            };
        }
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inbox = self.engine.lock();
        let finished = inbox
            .streams
            .remove(&self.id.0)
            .is_some_and(|queue| queue.iter().any(Event::is_terminal));
        if !finished {
            inbox.abandoned.insert(self.id.0);
            drop(inbox);
            let _ = self.engine.cancel(self.id);
        }
    }
}

/// Events of the requests sent with [`Engine::submit`], from [`Engine::events`].
pub struct Events<'e> {
    engine: &'e Engine,
}

impl Iterator for Events<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        let mut inbox = self.engine.lock();
        loop {
            if let Some(event) = inbox.unclaimed.pop_front() {
                return Some(Ok(event));
            }
            if inbox.in_flight.is_empty() {
                return None;
            }
            inbox = match self.engine.pump(inbox, POLL_SLICE) {
                Ok(guard) => guard,
                Err(error) => return Some(Err(error)),
            };
        }
    }
}

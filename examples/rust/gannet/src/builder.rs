//! Engine options ([`EngineBuilder`]), loading progress ([`Progress`]) and the id of a
//! multi-process tensor-parallel group ([`TpId`]); split from lib.rs to keep files small.
use super::*;

/// Loading progress of one stage, handed to the callback of [`EngineBuilder::progress`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress<'s> {
    /// A static label such as `"weights"`.
    pub stage: &'s str,
    /// 0 ..= 1.
    pub fraction: f64,
    pub bytes_done: i64,
    pub bytes_total: i64,
    /// Since the load began.
    pub elapsed: Duration,
    /// The average rate of this stage so far.
    pub bytes_per_s: f64,
    /// Estimated time left in this stage; `None` while unknown.
    pub eta: Option<Duration>,
}

impl<'s> Progress<'s> {
    /// # Safety
    /// `p` must point to a valid `gannet_progress_t` (during the callback).
    unsafe fn from_raw(p: &'s sys::gannet_progress_t) -> Progress<'s> {
        let stage = if p.stage.is_null() {
            ""
        } else {
            // SAFETY: a static NUL-terminated label.
            unsafe { CStr::from_ptr(p.stage) }.to_str().unwrap_or("")
        };
        let secs = |s: f64| Duration::try_from_secs_f64(s).ok();
        Progress {
            stage,
            fraction: p.fraction,
            bytes_done: p.bytes_done,
            bytes_total: p.bytes_total,
            elapsed: secs(p.elapsed_s).unwrap_or_default(),
            bytes_per_s: p.bytes_per_s,
            eta: if p.eta_s < 0.0 { None } else { secs(p.eta_s) },
        }
    }
}

/// What a progress callback returns: `()` always continues; `ControlFlow::Break(())` aborts the
/// load (then [`EngineBuilder::build`] fails with [`Status::Cancelled`]).
pub trait ProgressControl {
    fn should_continue(self) -> bool;
}

impl ProgressControl for () {
    fn should_continue(self) -> bool {
        true
    }
}

impl ProgressControl for ControlFlow<()> {
    fn should_continue(self) -> bool {
        self.is_continue()
    }
}

type ProgressFn<'a> = dyn FnMut(&Progress<'_>) -> bool + 'a;

/// The id that joins the processes of a multi-process tensor-parallel group (NCCL's unique id,
/// 128 bytes). Rank 0's process makes it with [`TpId::create`] (the group's bootstrap then
/// listens in that process until every rank has joined); the application hands
/// [`as_bytes`](TpId::as_bytes) to the other ranks' processes (a file, a socket, MPI: any way),
/// which rebuild it with [`from_bytes`](TpId::from_bytes) and pass it to
/// [`EngineBuilder::tp_id`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TpId(sys::gannet_tp_id_t);

impl TpId {
    /// The number of bytes of an id.
    pub const LEN: usize = 128;

    /// A new group id. Fails with [`Status::Unimplemented`] in a build without NCCL.
    pub fn create() -> Result<TpId> {
        let mut id = sys::gannet_tp_id_t::default();
        // SAFETY: a valid output struct.
        check(unsafe { sys::gannet_tp_create_id(&mut id) })?;
        Ok(TpId(id))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    /// An id from the bytes [`as_bytes`](TpId::as_bytes) gave in rank 0's process;
    /// [`Status::InvalidArgument`] unless there are exactly [`TpId::LEN`] of them.
    pub fn from_bytes(bytes: &[u8]) -> Result<TpId> {
        let bytes: [u8; TpId::LEN] = bytes.try_into().map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "a tensor-parallel group id is {} bytes, got {}",
                    TpId::LEN,
                    bytes.len()
                ),
            )
        })?;
        Ok(TpId(sys::gannet_tp_id_t { bytes }))
    }
}

impl fmt::Debug for TpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TpId(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// Options for [`Engine::builder`]; unset values are the library's defaults.
pub struct EngineBuilder<'a> {
    model_dir: String,
    backend: Option<String>,
    load_format: Option<String>,
    kv_cache_dtype: Option<String>,
    compute_dtype: Option<String>,
    draft_model: Option<String>,
    device_ids: Vec<i32>,
    tp_id: Option<TpId>,
    config: sys::gannet_engine_config_t,
    progress: Option<Box<ProgressFn<'a>>>,
}

impl<'a> EngineBuilder<'a> {
    pub(crate) fn new(model_dir: &Path) -> Self {
        EngineBuilder {
            model_dir: model_dir.to_string_lossy().into_owned(),
            backend: None,
            load_format: None,
            kv_cache_dtype: None,
            compute_dtype: None,
            draft_model: None,
            device_ids: Vec::new(),
            tp_id: None,
            config: sys::gannet_engine_config_t::default(),
            progress: None,
        }
    }

    /// `"cpu"` or `"cuda"`; default: CUDA when a GPU is usable, else the CPU.
    pub fn backend(mut self, name: impl Into<String>) -> Self {
        self.backend = Some(name.into());
        self
    }
    pub fn device_id(mut self, id: u32) -> Self {
        self.config.device_id = clamp_i32(id);
        self
    }
    /// Tensor parallelism in this process: the model split over `n` CUDA devices, 1 to 8
    /// (default: one device), one worker thread per device. Heads, the MLP and the vocabulary
    /// are split: a dimension that `n` does not divide is an error naming it. Not with a
    /// [`draft_model`](EngineBuilder::draft_model) yet. On the CPU backend the ranks are threads
    /// (for tests).
    pub fn tensor_parallel_size(mut self, n: u32) -> Self {
        self.config.tensor_parallel_size = clamp_i32(n);
        self
    }
    /// The CUDA devices of the [`tensor_parallel_size`](EngineBuilder::tensor_parallel_size)
    /// ranks, rank 0 first, at most 8 (default: devices 0 to size - 1). Given the ids, the size
    /// may be left unset: it is then their number.
    pub fn device_ids(mut self, ids: &[i32]) -> Self {
        self.device_ids = ids.to_vec();
        self
    }
    /// One process per GPU (on one host or several): every rank's process builds its engine with
    /// the same [`tp_id`](EngineBuilder::tp_id),
    /// [`tensor_parallel_size`](EngineBuilder::tensor_parallel_size) = the number of ranks, its
    /// own rank (0 to size - 1, default 0) and its device; [`build`](EngineBuilder::build)
    /// returns once every rank has joined. Rank 0 accepts requests; the others call
    /// [`Engine::serve`] until rank 0's engine is dropped. Only with `tp_id`.
    pub fn tp_rank(mut self, rank: u32) -> Self {
        self.config.tp_rank = clamp_i32(rank);
        self
    }
    /// The group of a multi-process tensor-parallel engine (see
    /// [`tp_rank`](EngineBuilder::tp_rank)); default: one process.
    pub fn tp_id(mut self, id: TpId) -> Self {
        self.tp_id = Some(id);
        self
    }
    /// CPU backend threads (default: hardware concurrency).
    pub fn threads(mut self, n: u32) -> Self {
        self.config.num_threads = clamp_i32(n);
        self
    }
    pub fn max_running_seqs(mut self, n: u32) -> Self {
        self.config.max_running_seqs = clamp_i32(n);
        self
    }
    pub fn max_step_tokens(mut self, n: u32) -> Self {
        self.config.max_step_tokens = clamp_i32(n);
        self
    }
    /// The most prompt tokens a step carries while it decodes (0 = no limit beyond
    /// `max_step_tokens`): smaller keeps decoding fast while prompts arrive, at the price of
    /// time to first token and, under full load, throughput.
    pub fn max_prefill_tokens_while_decoding(mut self, n: u32) -> Self {
        self.config.max_prefill_tokens_while_decoding = i64::from(n);
        self
    }
    pub fn max_model_len(mut self, n: u32) -> Self {
        self.config.max_model_len = clamp_i32(n);
        self
    }
    pub fn page_size(mut self, tokens: u32) -> Self {
        self.config.page_size = clamp_i32(tokens);
        self
    }
    pub fn kv_memory_bytes(mut self, bytes: u64) -> Self {
        self.config.kv_memory_bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self
    }
    pub fn kv_pages(mut self, sliding: u32, full: u32) -> Self {
        self.config.kv_sliding_pages = clamp_i32(sliding);
        self.config.kv_full_pages = clamp_i32(full);
        self
    }
    pub fn prefix_cache(mut self, enable: bool) -> Self {
        self.config.disable_prefix_cache = (!enable) as i32;
        self
    }
    pub fn max_queued_requests(mut self, n: u32) -> Self {
        self.config.max_queued_requests = clamp_i32(n);
        self
    }
    pub fn cuda_graphs(mut self, enable: bool) -> Self {
        self.config.disable_cuda_graphs = (!enable) as i32;
        self
    }
    /// `"auto"` (safetensors) or `"dummy"` (random weights, for benchmarks).
    pub fn load_format(mut self, format: impl Into<String>) -> Self {
        self.load_format = Some(format.into());
        self
    }
    /// How the KV cache stores keys and values: `"bf16"` (default: the model's precision; the CPU
    /// backend keeps f32) or `"fp8"` (`"fp8_e4m3"`): FP8 E4M3 with one scale per token and KV
    /// head, about half the bytes, at a small accuracy cost.
    pub fn kv_cache_dtype(mut self, dtype: impl Into<String>) -> Self {
        self.kv_cache_dtype = Some(dtype.into());
        self
    }
    /// Keeps K and V apart on the K=V full layers of 31B and 26B-A4B (two arrays) instead of the
    /// default one array attention derives K from (half those layers' KV bytes).
    pub fn kv_separate_k_eq_v(mut self, separate: bool) -> Self {
        self.config.kv_separate_k_eq_v = i32::from(separate);
        self
    }
    /// What the CUDA backend computes in: `"auto"` (default: bf16, except on GPUs older than
    /// sm_75, such as V100, where f16), `"bf16"` or `"f16"` (weights converted to fp16 at load,
    /// activations fp16; the residual stream, norm inputs and logits stay f32). The CPU backend
    /// computes in f32 and takes only `"auto"`.
    pub fn compute_dtype(mut self, dtype: impl Into<String>) -> Self {
        self.compute_dtype = Some(dtype.into());
        self
    }
    /// Runs one step of every shape the limits allow before the engine is returned, so the CUDA
    /// linear layers' tuning and the decode graphs' recording happen at start, not in the first
    /// requests of each shape (the start takes seconds longer). Default: off.
    pub fn startup_warmup(mut self, warm: bool) -> Self {
        self.config.startup_warmup = if warm { 1 } else { -1 };
        self
    }
    /// Speculative decoding with the target's Gemma-4 MTP assistant: its checkpoint folder, or
    /// `"dummy:<variant>-assistant"` (random weights, for benchmarks). Default: off. Greedy
    /// output is token for token the same as without it; sampled output has the same
    /// distribution.
    pub fn draft_model(mut self, dir: impl AsRef<Path>) -> Self {
        self.draft_model = Some(dir.as_ref().to_string_lossy().into_owned());
        self
    }
    /// Drafts per round with a [`draft_model`](EngineBuilder::draft_model), 1 to 8 (default 3).
    pub fn speculative_tokens(mut self, k: u32) -> Self {
        self.config.num_speculative_tokens = clamp_i32(k);
        self
    }
    /// Called on this thread while the model loads. Return `()` or `ControlFlow::Continue(())`
    /// to go on, `ControlFlow::Break(())` to abort: [`EngineBuilder::build`] then fails with
    /// [`Status::Cancelled`] and everything loaded so far is freed. A panic in `f` aborts the
    /// load too and resumes after it.
    pub fn progress<R: ProgressControl>(
        mut self,
        mut f: impl FnMut(&Progress<'_>) -> R + 'a,
    ) -> Self {
        self.progress = Some(Box::new(move |p: &Progress<'_>| f(p).should_continue()));
        self
    }

    /// Loads the model and starts the engine thread. Fails with `FailedPrecondition` if the
    /// linked library has another ABI than these bindings (see [`check_abi`]).
    pub fn build(mut self) -> Result<Engine> {
        check_abi()?;
        let model_dir = c_string("model_dir", &self.model_dir)?;
        let backend = self
            .backend
            .as_deref()
            .map(|b| c_string("backend", b))
            .transpose()?;
        let format = self
            .load_format
            .as_deref()
            .map(|f| c_string("load_format", f))
            .transpose()?;
        let kv_dtype = self
            .kv_cache_dtype
            .as_deref()
            .map(|d| c_string("kv_cache_dtype", d))
            .transpose()?;
        let compute_dtype = self
            .compute_dtype
            .as_deref()
            .map(|d| c_string("compute_dtype", d))
            .transpose()?;
        let draft = self
            .draft_model
            .as_deref()
            .map(|d| c_string("draft_model_dir", d))
            .transpose()?;
        let mut config = self.config;
        config.model_dir = model_dir.as_ptr();
        config.backend = backend.as_ref().map_or(std::ptr::null(), |b| b.as_ptr());
        config.load_format = format.as_ref().map_or(std::ptr::null(), |f| f.as_ptr());
        config.kv_cache_dtype = kv_dtype.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
        config.compute_dtype = compute_dtype
            .as_ref()
            .map_or(std::ptr::null(), |d| d.as_ptr());
        config.draft_model_dir = draft.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
        // The ids stay in self, which lives until the end of this call.
        config.num_device_ids = i32::try_from(self.device_ids.len()).unwrap_or(i32::MAX);
        config.device_ids = if self.device_ids.is_empty() {
            std::ptr::null()
        } else {
            self.device_ids.as_ptr()
        };
        // Like the ids, the group id stays in self.
        config.tp_id = self.tp_id.as_ref().map_or(std::ptr::null(), |id| &id.0);

        struct ProgressState<'p, 'a> {
            f: &'p mut ProgressFn<'a>,
            panic: Option<Box<dyn std::any::Any + Send>>,
        }
        unsafe extern "C" fn trampoline(
            user: *mut c_void,
            progress: *const sys::gannet_progress_t,
        ) -> i32 {
            // SAFETY: `user` is the ProgressState below, alive for the create call on this
            // thread; `progress` is valid during this call.
            let state = unsafe { &mut *user.cast::<ProgressState>() };
            if state.panic.is_some() || progress.is_null() {
                return i32::from(state.panic.is_some());
            }
            let progress = unsafe { Progress::from_raw(&*progress) };
            let f = &mut state.f;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&progress))) {
                Ok(true) => 0,
                Ok(false) => 1,
                Err(panic) => {
                    state.panic = Some(panic);
                    1 // abort the load; the panic resumes when create returns
                }
            }
        }
        let mut progress = self
            .progress
            .as_deref_mut()
            .map(|f| ProgressState { f, panic: None });
        if let Some(p) = progress.as_mut() {
            config.progress_callback = Some(trampoline);
            config.progress_user_data = (p as *mut ProgressState).cast();
        }

        let mut raw = std::ptr::null_mut();
        // SAFETY: config and the strings and ids it points to outlive the call.
        let code = unsafe { sys::gannet_engine_create(&config, &mut raw) };
        let result = check(code);
        if let Some(panic) = progress.and_then(|p| p.panic) {
            // SAFETY: NULL is a no-op; otherwise the engine was created and is dropped here.
            unsafe { sys::gannet_engine_destroy(raw) };
            std::panic::resume_unwind(panic);
        }
        result?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "gannet_engine_create returned NULL"))?;
        Ok(Engine {
            raw,
            inbox: Mutex::new(Inbox::default()),
            wake: Condvar::new(),
            serving: Mutex::new(()),
        })
    }
}

// Package gannet runs Gemma-4 models through gannet's C ABI 0.2 (include/gannet/gannet.h).
//
//	engine, err := gannet.Open(gannet.Config{ModelDir: "/models/gemma-4-e4b-it"})
//	...
//	defer engine.Close()
//	_, events, err := engine.Submit(ctx, &gannet.Request{
//		Messages: []gannet.Message{{Role: "user", Content: "Hello!"}}, MaxTokens: 64})
//	for ev := range events {
//		fmt.Print(ev.Text)
//	}
//
// One goroutine per engine owns gannet_engine_poll (the ABI allows one poller at a time) and
// hands each event to the channel of its request; Submit and Cancel may be called from any
// goroutine. Requests are greedy unless they set a Temperature; sampled requests get a fresh
// random seed unless Seed fixes one or SeedMode asks for SeedRequestID. Request.Check validates a
// request without an engine, and a Tokenizer (OpenTokenizer, or Engine.Tokenizer) tokenizes and
// renders chat prompts exactly as the engine does.
//
// Speculative decoding: Config.DraftModelDir names the target's Gemma-4 MTP assistant (and
// Config.SpeculativeTokens the drafts per round). Greedy output is token for token the same as
// without it, sampled output has the same distribution; Request.DisableSpeculation decodes one
// request without drafts. The counts arrive on a request's last event (DraftTokens,
// AcceptedDraftTokens) and in Stats.
//
// Build: go get github.com/gannet-ai/gannet/examples/go links an installed gannet through
// pkg-config (link_pkgconfig.go); the repository's CMake build links its own libgannet.so with
// the tag gannet_no_pkgconfig (link_in_tree.go).
package gannet

/*
// In the repository the header next door is used (it matches the library CMake builds there);
// elsewhere this folder does not exist and pkg-config's Cflags find the installed header.
#cgo CFLAGS: -I${SRCDIR}/../../include
#include <stdlib.h>
#include "gannet/gannet.h"

// cgo cannot expand the *_INIT macros.
static gannet_engine_config_t gannet_go_config_init(void) {
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  return c;
}
static gannet_request_t gannet_go_request_init(void) {
  gannet_request_t r = GANNET_REQUEST_INIT;
  return r;
}
static gannet_engine_stats_t gannet_go_stats_init(void) {
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  return s;
}
static gannet_model_info_t gannet_go_model_info_init(void) {
  gannet_model_info_t i = GANNET_MODEL_INFO_INIT;
  return i;
}
// An array of n chat messages in C memory (free it with free), each initialised by
// GANNET_CHAT_MESSAGE_INIT: the library reads the array with the stride of the first element's
// struct_size, so every element must carry this header's size.
static gannet_chat_message_t* gannet_go_messages(size_t n) {
  gannet_chat_message_t* m = (gannet_chat_message_t*)calloc(n ? n : 1, sizeof(*m));
  if (m == NULL) return NULL;
  for (size_t i = 0; i < n; ++i) {
    gannet_chat_message_t init = GANNET_CHAT_MESSAGE_INIT;
    m[i] = init;
  }
  return m;
}
static void gannet_go_set_message(gannet_chat_message_t* m, size_t i, const char* role,
                                  const char* content) {
  m[i].role = role;
  m[i].content = content;
}
// The progress callback: gannetGoProgress (progress.go) as a gannet_progress_fn (cgo's
// prototype of an exported function drops the const).
extern int32_t gannetGoProgress(void* user, gannet_progress_t* progress);
static int32_t gannet_go_progress(void* user, const gannet_progress_t* progress) {
  return gannetGoProgress(user, (gannet_progress_t*)progress);
}
static void gannet_go_set_progress(gannet_engine_config_t* c, void* user) {
  c->progress_callback = gannet_go_progress;
  c->progress_user_data = user;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// pollTimeoutMs bounds how long Close waits for the polling goroutine to notice it.
const pollTimeoutMs = 100

// pollBatch is the most events one gannet_engine_poll call returns.
const pollBatch = 256

// Status is a gannet_status_t failure code.
type Status int32

const (
	StatusInvalidArgument    Status = C.GANNET_ERR_INVALID_ARGUMENT
	StatusNotFound           Status = C.GANNET_ERR_NOT_FOUND
	StatusOutOfMemory        Status = C.GANNET_ERR_OUT_OF_MEMORY
	StatusResourceExhausted  Status = C.GANNET_ERR_RESOURCE_EXHAUSTED
	StatusUnimplemented      Status = C.GANNET_ERR_UNIMPLEMENTED
	StatusDataLoss           Status = C.GANNET_ERR_DATA_LOSS
	StatusDeviceLost         Status = C.GANNET_ERR_DEVICE_LOST
	StatusCancelled          Status = C.GANNET_ERR_CANCELLED
	StatusDeadlineExceeded   Status = C.GANNET_ERR_DEADLINE_EXCEEDED
	StatusFailedPrecondition Status = C.GANNET_ERR_FAILED_PRECONDITION
	StatusInternal           Status = C.GANNET_ERR_INTERNAL
)

// String is the library's name for the status, e.g. "GANNET_ERR_NOT_FOUND".
func (s Status) String() string {
	return C.GoString(C.gannet_status_string(C.gannet_status_t(s)))
}

// Error is a failed call or a failed request: the status and the library's message.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Status.String() + ": " + e.Message
}

// call runs a fallible C call and reads the thread-local error message on the same OS thread.
func call(f func() C.gannet_status_t) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := f(); st != C.GANNET_OK {
		return &Error{Status: Status(st), Message: C.GoString(C.gannet_last_error_message())}
	}
	return nil
}

// ---- versions -------------------------------------------------------------------------------

// The version and ABI of the header this package was built with.
const (
	HeaderVersionCode = C.GANNET_VERSION_CODE // MAJOR*10000 + MINOR*100 + PATCH
	HeaderABIVersion  = C.GANNET_ABI_VERSION
)

// Version is "MAJOR.MINOR.PATCH" of the library actually linked.
func Version() string { return C.GoString(C.gannet_version()) }

// VersionCode is GANNET_VERSION_CODE of the library actually linked.
func VersionCode() int { return int(C.gannet_version_code()) }

// ABIVersion is GANNET_ABI_VERSION of the library actually linked.
func ABIVersion() int { return int(C.gannet_abi_version()) }

// CheckABI fails with StatusFailedPrecondition unless the linked library has the ABI of the
// header this package was built with. Open and OpenTokenizer check it.
func CheckABI() error {
	if abi := ABIVersion(); abi != HeaderABIVersion {
		return &Error{Status: StatusFailedPrecondition, Message: fmt.Sprintf(
			"libgannet %s has ABI version %d; this package was built for %d", Version(), abi,
			HeaderABIVersion)}
	}
	return nil
}

// ---- logging --------------------------------------------------------------------------------

// Log levels for SetLogLevel.
const (
	LogDebug   = C.GANNET_LOG_LEVEL_DEBUG
	LogInfo    = C.GANNET_LOG_LEVEL_INFO
	LogWarning = C.GANNET_LOG_LEVEL_WARNING
	LogError   = C.GANNET_LOG_LEVEL_ERROR
	LogOff     = C.GANNET_LOG_LEVEL_OFF
)

// SetLogLevel sends the library's log messages at or above level to stderr (process-wide).
func SetLogLevel(level int) { C.gannet_set_log_callback(nil, nil, C.int32_t(level)) }

// ---- model information ----------------------------------------------------------------------

// ModelInfo is what gannet_model_info reads from a checkpoint folder (no weights are read).
type ModelInfo struct {
	ModelType              string // "gemma4", "gemma4_text", "gemma4_assistant"
	Variant                string // e.g. "gemma4-e4b (ple, kv-sharing)"
	Dtypes                 string // e.g. "BF16"
	NumParameters          int64
	WeightBytes            int64
	SkippedTowerBytes      int64
	NumShards              int
	HasTokenizer           bool
	NumLayers              int
	NumSlidingLayers       int
	NumFullLayers          int
	NumKVSharedLayers      int
	HiddenSize             int64
	VocabSize              int64
	MaxPositionEmbeddings  int64
	SlidingWindow          int
	NumAttentionHeads      int
	NumKVHeads             int
	NumFullKVHeads         int
	HeadDim                int
	FullHeadDim            int
	NumExperts             int
	TopKExperts            int
	KVBytesPerTokenSliding int64
	KVBytesPerTokenFull    int64
	raw                    C.gannet_model_info_t // for Request.Check
}

// ReadModelInfo describes a checkpoint folder or "dummy:<variant>".
func ReadModelInfo(modelDir string) (*ModelInfo, error) {
	dir := C.CString(modelDir)
	defer C.free(unsafe.Pointer(dir))
	i := C.gannet_go_model_info_init()
	if err := call(func() C.gannet_status_t { return C.gannet_model_info(dir, &i) }); err != nil {
		return nil, err
	}
	return &ModelInfo{
		ModelType:              fixedString(i.model_type[:]),
		Variant:                fixedString(i.variant[:]),
		Dtypes:                 fixedString(i.dtypes[:]),
		NumParameters:          int64(i.num_parameters),
		WeightBytes:            int64(i.weight_bytes),
		SkippedTowerBytes:      int64(i.skipped_tower_bytes),
		NumShards:              int(i.num_shards),
		HasTokenizer:           i.has_tokenizer != 0,
		NumLayers:              int(i.num_layers),
		NumSlidingLayers:       int(i.num_sliding_layers),
		NumFullLayers:          int(i.num_full_layers),
		NumKVSharedLayers:      int(i.num_kv_shared_layers),
		HiddenSize:             int64(i.hidden_size),
		VocabSize:              int64(i.vocab_size),
		MaxPositionEmbeddings:  int64(i.max_position_embeddings),
		SlidingWindow:          int(i.sliding_window),
		NumAttentionHeads:      int(i.num_attention_heads),
		NumKVHeads:             int(i.num_kv_heads),
		NumFullKVHeads:         int(i.num_full_kv_heads),
		HeadDim:                int(i.head_dim),
		FullHeadDim:            int(i.full_head_dim),
		NumExperts:             int(i.num_experts),
		TopKExperts:            int(i.top_k_experts),
		KVBytesPerTokenSliding: int64(i.kv_bytes_per_token_sliding),
		KVBytesPerTokenFull:    int64(i.kv_bytes_per_token_full),
		raw:                    i,
	}, nil
}

// fixedString reads a NUL-terminated string from a fixed-size char array of a C struct.
func fixedString(chars []C.char) string {
	b := make([]byte, 0, len(chars))
	for _, c := range chars {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// ---- engine configuration -------------------------------------------------------------------

// Progress is the loading progress of one stage, given to Config.Progress.
type Progress struct {
	Stage          string // a label such as "weights"
	Fraction       float64
	BytesDone      int64
	BytesTotal     int64
	Elapsed        time.Duration // since the load began
	BytesPerSecond float64       // the average rate of this stage so far
	ETA            time.Duration // time left in this stage; < 0 while unknown
}

// Config selects the model and the engine's limits; zero values are the library's defaults.
type Config struct {
	ModelDir       string // Hugging Face checkpoint folder, or "dummy:e4b" etc.
	Backend        string // "cpu" or "cuda"; "" = cuda if a GPU is usable, else cpu
	DeviceID       int
	MaxRunningSeqs int
	MaxStepTokens  int
	// MaxPrefillTokensWhileDecoding: the most prompt tokens a step carries while it decodes;
	// 0 = no limit beyond MaxStepTokens.
	MaxPrefillTokensWhileDecoding int
	MaxModelLen                   int
	PageSize                      int
	KVMemoryBytes                 int64
	KVSlidingPages                int
	KVFullPages                   int
	DisablePrefixCache            bool
	Threads                       int // CPU backend threads
	MaxQueuedRequests             int
	DisableCUDAGraphs             bool
	LoadFormat                    string // "" or "auto" = safetensors, "dummy" = random weights
	// KVCacheDtype is how the KV cache stores keys and values: "" or "bf16" = the model's
	// precision (the CPU backend keeps f32); "fp8" (or "fp8_e4m3") = FP8 E4M3 with one scale per
	// token and KV head: about half the bytes, at a small accuracy cost.
	KVCacheDtype string
	// KVSeparateKEqV keeps K and V apart on the K=V full layers of 31B and 26B-A4B (two arrays)
	// instead of the default one array K is derived from (half those layers' KV bytes).
	KVSeparateKEqV bool
	// ComputeDtype is what the CUDA backend computes in: "" or "auto" = bf16, except on GPUs
	// older than sm_75 (V100), where f16; "bf16"; or "f16" (weights converted to fp16 at load,
	// activations fp16; the residual stream, norm inputs and logits stay f32). The CPU backend
	// computes in f32 and takes only "auto".
	ComputeDtype string
	// StartupWarmup runs one step of every shape the limits allow before NewEngine returns, so
	// the CUDA linear layers' tuning and the decode graphs' recording happen at start, not in the
	// first requests of each shape (the start takes seconds longer).
	StartupWarmup bool
	// TensorParallelSize splits the model over this many CUDA devices in this process (0 or 1 =
	// one device; at most 8), one worker thread per device. Heads, the MLP and the vocabulary are
	// split: a dimension it does not divide is an error naming it. Not with DraftModelDir yet.
	// On the CPU backend the ranks are threads (tests).
	TensorParallelSize int
	// DeviceIDs names the ranks' CUDA devices, rank 0 first (at most 8); nil = devices 0 ..
	// TensorParallelSize - 1. With DeviceIDs, TensorParallelSize may be left 0.
	DeviceIDs []int
	// TPID joins a multi-process tensor-parallel group, one process per GPU (on one host or
	// several): every rank's process opens its engine with the same TPID (TPIDSize bytes, made
	// by CreateTPID in rank 0's process and handed to the others any way the application likes),
	// TensorParallelSize = the number of ranks, its own TPRank (0 .. TensorParallelSize - 1) and
	// its device (DeviceID, or one entry of DeviceIDs); Open returns once every rank has joined.
	// Rank 0 accepts requests; the others call Engine.Serve until rank 0's engine is closed.
	// nil = one process.
	TPID   []byte
	TPRank int
	// DraftModelDir turns on speculative decoding with the target's Gemma-4 MTP assistant: its
	// folder, or "dummy:<variant>-assistant" (random weights); "" = off.
	DraftModelDir     string
	SpeculativeTokens int // drafts per round, 1..8; 0 = 3 (needs DraftModelDir)
	// Progress, if set, is called on the goroutine calling Open while the model loads. Return
	// true to go on, false to abort the load: Open then fails with StatusCancelled and frees
	// everything. A panic in it aborts the load too and is re-raised by Open.
	Progress func(Progress) bool
}

// ---- requests -------------------------------------------------------------------------------

// Message is one chat message.
type Message struct {
	Role    string // "system", "developer", "user", "assistant"
	Content string
}

// SeedMode chooses how a sampled request's seed is picked (gannet_request_t.seed_mode).
type SeedMode int32

const (
	SeedRandom    SeedMode = C.GANNET_SEED_RANDOM     // fresh OS entropy per request (default)
	SeedFixed     SeedMode = C.GANNET_SEED_FIXED      // Request.Seed (set Seed instead)
	SeedRequestID SeedMode = C.GANNET_SEED_REQUEST_ID // derived from the request id
)

// Request is one generation request: exactly one of PromptTokens, PromptText and Messages.
// Zero values are the library's defaults (greedy sampling, random seeds when sampling, the
// default stop tokens).
type Request struct {
	PromptTokens []int32
	PromptText   string
	Messages     []Message

	MaxTokens         int // 0 = until the context is full
	MinTokens         int
	Temperature       float32 // 0 = greedy
	TopK              int
	TopP              float32
	MinP              float32
	RepetitionPenalty float32
	PresencePenalty   float32
	FrequencyPenalty  float32
	// Seed, when set, fixes the seed (SeedFixed): same seed and same request give the same
	// output. Otherwise SeedMode applies: SeedRandom (the default) or SeedRequestID.
	Seed     *uint64
	SeedMode SeedMode

	StopTokenIDs            []int32 // nil = the defaults
	IgnoreDefaultStopTokens bool
	StopStrings             []string
	Logprobs                int // > 0: the chosen token's logprob and this many top logprobs
	Priority                int
	Deadline                time.Duration // > 0: fail with DEADLINE_EXCEEDED after this long
	NoGenerationPrompt      bool          // chat: don't end with the model's turn opener
	Thinking                bool          // chat: thinking mode
	DisableSpeculation      bool          // decode without drafts (engines with a draft model)
	// Images in prompt order: the k-th image placeholder of the prompt (`<|image|>` in text or a
	// message, the model's image_token_id in PromptTokens) is Images[k].
	Images []Image
}

// Image is one image of a request: encoded PNG, JPEG or WebP bytes (Data), or raw 8-bit RGB
// (RGB, Width x Height x 3 bytes, rows top down).
type Image struct {
	Data          []byte
	RGB           []byte
	Width, Height int
	MaxSoftTokens int // 0 = 280; else 70, 140, 280, 560 or 1120
}

// Check validates the request as Submit would, without an engine (gannet_request_check):
// against a model's info when model is not nil (ids against the vocabulary, text needs a
// tokenizer), else only the checks that need no model.
func (r *Request) Check(model *ModelInfo) error {
	var mem cMemory
	defer mem.free()
	c, err := r.toC(&mem)
	if err != nil {
		return err
	}
	var info *C.gannet_model_info_t
	if model != nil {
		info = (*C.gannet_model_info_t)(mem.alloc(unsafe.Sizeof(C.gannet_model_info_t{})))
		*info = model.raw
	}
	return call(func() C.gannet_status_t { return C.gannet_request_check(c, info) })
}

// ---- events ---------------------------------------------------------------------------------

// EventType tells what an Event carries.
type EventType int32

const (
	EventToken  EventType = C.GANNET_EVENT_TOKEN
	EventFinish EventType = C.GANNET_EVENT_FINISH
	EventError  EventType = C.GANNET_EVENT_ERROR
)

// FinishReason is why a request ended.
type FinishReason int32

const (
	FinishStop      FinishReason = C.GANNET_FINISH_STOP
	FinishLength    FinishReason = C.GANNET_FINISH_LENGTH
	FinishCancelled FinishReason = C.GANNET_FINISH_CANCELLED
	FinishError     FinishReason = C.GANNET_FINISH_ERROR
)

// TokenLogprob is one entry of an event's top logprobs.
type TokenLogprob struct {
	TokenID int32
	Logprob float32
}

// Event is one event of one request, copied out of the library's buffer.
type Event struct {
	RequestID    uint64
	Type         EventType
	TokenID      int32  // EventToken
	Text         string // UTF-8 completed by this event; may be empty
	Thinking     bool   // Text is the model's thinking (<|channel>thought ... <channel|>), not the answer
	Logprob      float32
	TopLogprobs  []TokenLogprob
	FinishReason FinishReason // EventFinish, EventError
	Err          *Error       // EventError
	// Set on the last event (EventFinish, EventError).
	PromptTokens        int
	GeneratedTokens     int
	CachedPromptTokens  int
	DraftTokens         int // drafts verified for this request (speculative decoding)
	AcceptedDraftTokens int // of which accepted
}

// Terminal reports whether this is its request's last event.
func (e *Event) Terminal() bool { return e.Type != EventToken }

// eventFromC copies one event. Its struct_size may exceed this header's (fields a later library
// appended, ignored here); ABI 2 guarantees every field read here.
func eventFromC(e *C.gannet_event_t) Event {
	ev := Event{
		RequestID:           uint64(e.request_id),
		Type:                EventType(e._type),
		TokenID:             int32(e.token_id),
		Logprob:             float32(e.logprob),
		FinishReason:        FinishReason(e.finish_reason),
		PromptTokens:        int(e.num_prompt_tokens),
		GeneratedTokens:     int(e.num_generated_tokens),
		CachedPromptTokens:  int(e.num_cached_prompt_tokens),
		DraftTokens:         int(e.num_draft_tokens),
		AcceptedDraftTokens: int(e.num_accepted_draft_tokens),
	}
	if e.text != nil && e.text_len > 0 {
		ev.Text = C.GoStringN(e.text, C.int(e.text_len))
	}
	// An event of a library older than the thinking field ends before it.
	if uintptr(e.struct_size) > unsafe.Offsetof(e.thinking) {
		ev.Thinking = e.thinking != 0
	}
	if n := int(e.num_top_logprobs); n > 0 && e.top_token_ids != nil && e.top_logprobs != nil {
		ids := unsafe.Slice((*int32)(unsafe.Pointer(e.top_token_ids)), n)
		lps := unsafe.Slice((*float32)(unsafe.Pointer(e.top_logprobs)), n)
		ev.TopLogprobs = make([]TokenLogprob, n)
		for i := range ids {
			ev.TopLogprobs[i] = TokenLogprob{ids[i], lps[i]}
		}
	}
	if ev.Type == EventError {
		ev.Err = &Error{Status: Status(e.status), Message: C.GoString(e.message)}
	}
	return ev
}

// mailbox buffers one request's events between the polling goroutine, which must never block
// on a slow reader, and the goroutine that feeds the request's channel.
type mailbox struct {
	mu     sync.Mutex
	queue  []Event
	notify chan struct{} // capacity 1: "the queue changed"
}

func (m *mailbox) push(ev Event) {
	m.mu.Lock()
	m.queue = append(m.queue, ev)
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

func (m *mailbox) take() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queue
	m.queue = nil
	return q
}

// ---- engine ---------------------------------------------------------------------------------

// lifeGuard keeps a C object alive while calls use it: calls hold the read lock, closing takes
// the write lock, so the object is freed only when no call is inside it.
type lifeGuard struct {
	mu     sync.RWMutex
	closed bool
}

// enter returns false (and holds nothing) once the object is closed; else call leave after.
func (g *lifeGuard) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *lifeGuard) leave() { g.mu.RUnlock() }

// close marks the object closed once no call is inside; it reports whether this call did.
func (g *lifeGuard) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.closed
	g.closed = true
	return !was
}

// Engine is a loaded model with its engine thread and the goroutine that polls it.
type Engine struct {
	raw *C.gannet_engine_t

	mu     sync.Mutex // guards the fields below and every C call but poll
	boxes  map[uint64]*mailbox
	closed bool
	failed error // the poll error that stopped the polling goroutine

	tokenizerLife lifeGuard // the engine's tokenizer: usable until Close

	serveMu   sync.Mutex // one Serve at a time (the ABI's rule)
	serveLife lifeGuard  // Serve's calls into the engine: Close waits for the current one

	stop    chan struct{} // closed by Close: the polling goroutine exits
	stopped chan struct{} // closed by the polling goroutine when it exits
	gone    chan struct{} // closed by Close after destroy: feeders give up on slow readers
}

// TPIDSize is the length of a tensor-parallel group id (Config.TPID, CreateTPID).
const TPIDSize = int(unsafe.Sizeof(C.gannet_tp_id_t{}))

// CreateTPID makes the id of a new multi-process tensor-parallel group (see Config.TPID), in
// rank 0's process: the group's bootstrap then listens in this process until every rank has
// joined. StatusUnimplemented in a build without NCCL.
func CreateTPID() ([]byte, error) {
	var id C.gannet_tp_id_t
	if err := call(func() C.gannet_status_t { return C.gannet_tp_create_id(&id) }); err != nil {
		return nil, err
	}
	return C.GoBytes(unsafe.Pointer(&id.bytes[0]), C.int(TPIDSize)), nil
}

// progressState is what the progress callback reaches through its cgo.Handle.
type progressState struct {
	f     func(Progress) bool
	panic interface{}
}

// Open loads the model and starts the engine.
func Open(cfg Config) (*Engine, error) {
	if err := CheckABI(); err != nil {
		return nil, err
	}
	var mem cMemory
	defer mem.free()
	cstr := func(s string) *C.char {
		if s == "" {
			return nil
		}
		return mem.str(s)
	}
	c := (*C.gannet_engine_config_t)(mem.alloc(unsafe.Sizeof(C.gannet_engine_config_t{})))
	*c = C.gannet_go_config_init()
	c.model_dir = cstr(cfg.ModelDir)
	c.backend = cstr(cfg.Backend)
	c.load_format = cstr(cfg.LoadFormat)
	c.kv_cache_dtype = cstr(cfg.KVCacheDtype)
	if cfg.KVSeparateKEqV {
		c.kv_separate_k_eq_v = 1
	}
	c.compute_dtype = cstr(cfg.ComputeDtype)
	if cfg.StartupWarmup {
		c.startup_warmup = 1
	}
	c.device_id = C.int32_t(cfg.DeviceID)
	c.tensor_parallel_size = C.int32_t(cfg.TensorParallelSize)
	if len(cfg.DeviceIDs) > 0 {
		ids := make([]int32, len(cfg.DeviceIDs))
		for i, id := range cfg.DeviceIDs {
			if id != int(int32(id)) {
				return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
					"DeviceIDs[%d] is %d", i, id)}
			}
			ids[i] = int32(id)
		}
		c.num_device_ids = C.int32_t(len(ids))
		c.device_ids = mem.int32s(ids)
	}
	if cfg.TPID != nil {
		if len(cfg.TPID) != TPIDSize {
			return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
				"TPID has %d bytes; a tensor-parallel group id has %d", len(cfg.TPID), TPIDSize)}
		}
		id := (*C.gannet_tp_id_t)(mem.alloc(unsafe.Sizeof(C.gannet_tp_id_t{})))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&id.bytes[0])), TPIDSize), cfg.TPID)
		c.tp_id = id
	}
	if cfg.TPRank != int(int32(cfg.TPRank)) {
		return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
			"TPRank is %d", cfg.TPRank)}
	}
	c.tp_rank = C.int32_t(cfg.TPRank)
	c.max_running_seqs = C.int32_t(cfg.MaxRunningSeqs)
	c.max_step_tokens = C.int32_t(cfg.MaxStepTokens)
	c.max_prefill_tokens_while_decoding = C.int64_t(cfg.MaxPrefillTokensWhileDecoding)
	c.max_model_len = C.int32_t(cfg.MaxModelLen)
	c.page_size = C.int32_t(cfg.PageSize)
	c.kv_memory_bytes = C.int64_t(cfg.KVMemoryBytes)
	c.kv_sliding_pages = C.int32_t(cfg.KVSlidingPages)
	c.kv_full_pages = C.int32_t(cfg.KVFullPages)
	c.disable_prefix_cache = cbool(cfg.DisablePrefixCache)
	c.num_threads = C.int32_t(cfg.Threads)
	c.max_queued_requests = C.int32_t(cfg.MaxQueuedRequests)
	c.disable_cuda_graphs = cbool(cfg.DisableCUDAGraphs)
	c.draft_model_dir = cstr(cfg.DraftModelDir)
	c.num_speculative_tokens = C.int32_t(cfg.SpeculativeTokens)
	var progress *progressState
	if cfg.Progress != nil {
		// C memory may not hold Go pointers: the callback gets a handle, stored in C memory.
		progress = &progressState{f: cfg.Progress}
		h := cgo.NewHandle(progress)
		defer h.Delete()
		user := (*C.uintptr_t)(mem.alloc(unsafe.Sizeof(C.uintptr_t(0))))
		*user = C.uintptr_t(h)
		C.gannet_go_set_progress(c, unsafe.Pointer(user))
	}
	var raw *C.gannet_engine_t
	err := call(func() C.gannet_status_t { return C.gannet_engine_create(c, &raw) })
	if progress != nil && progress.panic != nil {
		C.gannet_engine_destroy(raw) // NULL (the load was aborted) is a no-op
		panic(progress.panic)
	}
	if err != nil {
		return nil, err
	}
	e := &Engine{
		raw:     raw,
		boxes:   make(map[uint64]*mailbox),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		gone:    make(chan struct{}),
	}
	go e.pollLoop()
	return e, nil
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// pollLoop is the only caller of gannet_engine_poll for this engine.
func (e *Engine) pollLoop() {
	defer close(e.stopped)
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		var events **C.gannet_event_t // an array of event pointers
		var n C.size_t
		err := call(func() C.gannet_status_t {
			return C.gannet_engine_poll(e.raw, pollTimeoutMs, pollBatch, &events, &n)
		})
		if err != nil {
			e.mu.Lock()
			e.failed = err
			e.mu.Unlock()
			e.failAll(err.(*Error))
			return
		}
		if n == 0 {
			continue
		}
		// Copy out before the next poll reuses the library's storage.
		batch := make([]Event, int(n))
		for i, ce := range unsafe.Slice(events, int(n)) {
			batch[i] = eventFromC(ce)
		}
		e.mu.Lock()
		for _, ev := range batch {
			if box := e.boxes[ev.RequestID]; box != nil {
				box.push(ev)
				if ev.Terminal() {
					delete(e.boxes, ev.RequestID)
				}
			}
		}
		e.mu.Unlock()
	}
}

// failAll ends every open request with an error event.
func (e *Engine) failAll(err *Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, box := range e.boxes {
		box.push(Event{RequestID: id, Type: EventError, FinishReason: FinishError, Err: err})
		delete(e.boxes, id)
	}
}

// Submit queues a request and returns its id and the channel of its events, which ends with
// its EventFinish or EventError event and is then closed. Read it to the end or cancel ctx:
// cancelling ctx cancels the request, after which the remaining events are delivered only as
// far as the reader keeps up, and the channel is closed when the request has ended.
func (e *Engine) Submit(ctx context.Context, req *Request) (uint64, <-chan Event, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var mem cMemory
	defer mem.free()
	c, err := req.toC(&mem)
	if err != nil {
		return 0, nil, err
	}
	// Registered under e.mu, which the polling goroutine needs to dispatch, so no event of
	// the new request can arrive before its mailbox exists.
	e.mu.Lock()
	if e.closed || e.failed != nil {
		failed := e.failed
		e.mu.Unlock()
		if failed != nil {
			return 0, nil, failed
		}
		return 0, nil, &Error{Status: StatusFailedPrecondition, Message: "the engine is closed"}
	}
	var id C.uint64_t
	err = call(func() C.gannet_status_t { return C.gannet_engine_submit(e.raw, c, &id) })
	if err != nil {
		e.mu.Unlock()
		return 0, nil, err
	}
	box := &mailbox{notify: make(chan struct{}, 1)}
	e.boxes[uint64(id)] = box
	e.mu.Unlock()

	out := make(chan Event, 16)
	go e.feed(ctx, uint64(id), box, out)
	return uint64(id), out, nil
}

// feed moves one request's events from its mailbox to its channel.
func (e *Engine) feed(ctx context.Context, id uint64, box *mailbox, out chan<- Event) {
	defer close(out)
	done := ctx.Done()
	abandoned := false // ctx was cancelled: never block on the reader again
	for {
		select {
		case <-box.notify:
		case <-done:
			done = nil
			abandoned = true
			_ = e.Cancel(id) // NOT_FOUND if it has just finished
			continue
		case <-e.gone:
			for _, ev := range box.take() {
				select {
				case out <- ev:
				default:
				}
			}
			return
		}
		for _, ev := range box.take() {
			if abandoned {
				select {
				case out <- ev:
				default:
				}
			} else {
				select {
				case out <- ev:
				case <-done:
					done = nil
					abandoned = true
					_ = e.Cancel(id)
				case <-e.gone:
					return
				}
			}
			if ev.Terminal() {
				return
			}
		}
	}
}

// Cancel stops a request at any moment; its channel then ends with FinishCancelled (unless it
// had already finished: then a StatusNotFound error).
func (e *Engine) Cancel(id uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return &Error{Status: StatusFailedPrecondition, Message: "the engine is closed"}
	}
	return call(func() C.gannet_status_t { return C.gannet_engine_cancel(e.raw, C.uint64_t(id)) })
}

// serveSliceMs bounds one gannet_engine_serve call, so that Close never waits long for Serve.
const serveSliceMs = 100

// Serve is for a rank other than 0 of a multi-process tensor-parallel group (Config.TPID; its
// Submit fails with StatusFailedPrecondition): it waits until the group ends, at most timeout
// (negative = no limit). nil once rank 0's engine was closed: then Close this one.
// StatusDeviceLost when a rank died (or did not answer in time); StatusDeadlineExceeded when the
// timeout passed while the group still serves; StatusFailedPrecondition on an engine that serves
// requests itself, or once the engine is closed (Close ends a Serve in progress). Calls from
// several goroutines take turns.
func (e *Engine) Serve(timeout time.Duration) error {
	e.serveMu.Lock()
	defer e.serveMu.Unlock()
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		slice := C.int32_t(serveSliceMs)
		if timeout >= 0 {
			left := time.Until(deadline)
			if left < 0 {
				left = 0
			}
			// Rounded up: never shorter than asked.
			if ms := (left + time.Millisecond - 1) / time.Millisecond; ms < serveSliceMs {
				slice = C.int32_t(ms)
			}
		}
		if !e.serveLife.enter() {
			return &Error{Status: StatusFailedPrecondition, Message: "the engine is closed"}
		}
		err := call(func() C.gannet_status_t { return C.gannet_engine_serve(e.raw, slice) })
		e.serveLife.leave()
		var gerr *Error
		if err == nil || !errors.As(err, &gerr) || gerr.Status != StatusDeadlineExceeded ||
			(timeout >= 0 && !time.Now().Before(deadline)) {
			return err
		}
	}
}

// Stats is a snapshot of the engine's counters and where it runs.
type Stats struct {
	NumRunning, NumWaiting int
	KVPagesTotal           [2]int // [0] sliding-window pool, [1] full-attention pool
	KVPagesUsed            [2]int // held by running sequences
	KVPagesCached          [2]int // free but holding reusable prefix-cache blocks
	KVPagesFree            [2]int
	PageSize               int
	PrefixCacheHitTokens   int64
	PrefixCacheQueryTokens int64
	PrefixCacheHitRate     float64
	TotalPromptTokens      int64
	TotalGeneratedTokens   int64
	NumPreemptions         int64
	NumSteps               int64
	PromptTokensPerSecond  float64 // over the last few seconds
	GeneratedTokensPerSec  float64
	WeightBytes            int64    // model weights in backend memory
	KVBytesPerToken        [2]int64 // [0] sliding-window layers, [1] full-attention layers
	SlidingWindow          int
	MaxModelLen            int
	MaxRunningSeqs         int           // after any lowering to what the memory holds
	DeviceID               int           // CUDA ordinal; -1 on the CPU
	KVBytes                int64         // KV cache arrays in backend memory
	DeviceMemoryBytes      int64         // of the device (cpu: the host's RAM)
	LoadTime               time.Duration // Open, start to ready
	Backend                string        // "cpu", "cuda"
	DeviceName             string        // "NVIDIA H100 80GB HBM3 (sm_90)", "16 threads"
	BackendFallback        string        // why an automatic backend choice ran on the CPU
	// Speculative decoding (zeros without a draft model).
	SpeculativeTokens      int     // drafts per round (K)
	SpecVerifyChunks       int64   // steps' chunks that verified drafts
	SpecDraftTokens        int64   // drafts verified
	SpecAcceptedTokens     int64   // drafts accepted
	SpecMeanAcceptedLength float64 // tokens emitted per verify chunk (accepted + 1)
	SpecDraftRounds        int64   // drafter rounds (one per step with proposing requests)
	// Decode steps run back to back: count, wall seconds, and device seconds from each step's first
	// device op to its last (the rest is host work on the critical path; 0 on the CPU backend).
	TimedDecodeSteps         int64
	TimedDecodeSeconds       float64
	TimedDecodeDeviceSeconds float64
	KVCacheDtype             string // what the KV cache stores: "bf16", "f32" (cpu), "fp8_e4m3"
	ComputeDtype             string // what activations and weights are: "bf16", "f16", "f32" (cpu)
}

// Stats reads the engine's counters.
func (e *Engine) Stats() (Stats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Stats{}, &Error{Status: StatusFailedPrecondition, Message: "the engine is closed"}
	}
	s := C.gannet_go_stats_init()
	if err := call(func() C.gannet_status_t { return C.gannet_engine_get_stats(e.raw, &s) }); err != nil {
		return Stats{}, err
	}
	pair := func(a [2]C.int32_t) [2]int { return [2]int{int(a[0]), int(a[1])} }
	return Stats{
		NumRunning:               int(s.num_running),
		NumWaiting:               int(s.num_waiting),
		KVPagesTotal:             pair(s.kv_pages_total),
		KVPagesUsed:              pair(s.kv_pages_used),
		KVPagesCached:            pair(s.kv_pages_cached),
		KVPagesFree:              pair(s.kv_pages_free),
		PageSize:                 int(s.page_size),
		PrefixCacheHitTokens:     int64(s.prefix_cache_hit_tokens),
		PrefixCacheQueryTokens:   int64(s.prefix_cache_query_tokens),
		PrefixCacheHitRate:       float64(s.prefix_cache_hit_rate),
		TotalPromptTokens:        int64(s.total_prompt_tokens),
		TotalGeneratedTokens:     int64(s.total_generated_tokens),
		NumPreemptions:           int64(s.num_preemptions),
		NumSteps:                 int64(s.num_steps),
		PromptTokensPerSecond:    float64(s.prompt_tokens_per_s),
		GeneratedTokensPerSec:    float64(s.generated_tokens_per_s),
		WeightBytes:              int64(s.weight_bytes),
		KVBytesPerToken:          [2]int64{int64(s.kv_bytes_per_token[0]), int64(s.kv_bytes_per_token[1])},
		SlidingWindow:            int(s.sliding_window),
		MaxModelLen:              int(s.max_model_len),
		MaxRunningSeqs:           int(s.max_running_seqs),
		DeviceID:                 int(s.device_id),
		KVBytes:                  int64(s.kv_bytes),
		DeviceMemoryBytes:        int64(s.device_memory_bytes),
		LoadTime:                 seconds(float64(s.load_seconds)),
		Backend:                  fixedString(s.backend[:]),
		DeviceName:               fixedString(s.device_name[:]),
		BackendFallback:          fixedString(s.backend_fallback[:]),
		SpeculativeTokens:        int(s.num_speculative_tokens),
		SpecVerifyChunks:         int64(s.spec_verify_chunks),
		SpecDraftTokens:          int64(s.spec_draft_tokens),
		SpecAcceptedTokens:       int64(s.spec_accepted_tokens),
		SpecMeanAcceptedLength:   float64(s.spec_mean_accepted_length),
		SpecDraftRounds:          int64(s.spec_draft_rounds),
		TimedDecodeSteps:         int64(s.timed_decode_steps),
		TimedDecodeSeconds:       float64(s.timed_decode_seconds),
		TimedDecodeDeviceSeconds: float64(s.timed_decode_device_seconds),
		KVCacheDtype:             fixedString(s.kv_cache_dtype[:]),
		ComputeDtype:             fixedString(s.compute_dtype[:]),
	}, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Close stops the polling goroutine and destroys the engine. Requests still running end with
// an EventError (StatusFailedPrecondition) where their reader keeps up, and their channels are
// closed; the engine's Tokenizer fails from then on. Close is idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	close(e.stop)
	<-e.stopped             // now nothing else calls into the engine: destroy cannot race
	e.tokenizerLife.close() // waits for tokenizer calls inside the engine's tokenizer
	e.serveLife.close()     // waits for a serve call inside the engine (at most serveSliceMs)
	C.gannet_engine_destroy(e.raw)
	e.raw = nil
	e.failAll(&Error{Status: StatusFailedPrecondition, Message: "the engine was closed"})
	close(e.gone)
	return nil
}

// ---- C memory -------------------------------------------------------------------------------

// cMemory owns the C allocations a request or config points into, until the call has copied
// them (cgo forbids passing Go pointers inside C structs).
type cMemory []unsafe.Pointer

func (m *cMemory) str(s string) *C.char {
	p := C.CString(s)
	*m = append(*m, unsafe.Pointer(p))
	return p
}

func (m *cMemory) alloc(size uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(size))
	if p == nil {
		panic("gannet: out of C memory")
	}
	*m = append(*m, p)
	return p
}

func (m *cMemory) free() {
	for _, p := range *m {
		C.free(p)
	}
}

func (m *cMemory) int32s(v []int32) *C.int32_t {
	p := (*C.int32_t)(m.alloc(uintptr(len(v)) * 4))
	copy(unsafe.Slice((*int32)(unsafe.Pointer(p)), len(v)), v)
	return p
}

// messages builds chat messages in C memory with GANNET_CHAT_MESSAGE_INIT's struct_size.
func (m *cMemory) messages(msgs []Message) (*C.gannet_chat_message_t, error) {
	for _, msg := range msgs {
		if strings.IndexByte(msg.Role, 0) >= 0 || strings.IndexByte(msg.Content, 0) >= 0 {
			return nil, &Error{Status: StatusInvalidArgument, Message: "a chat message contains a NUL byte"}
		}
	}
	p := C.gannet_go_messages(C.size_t(len(msgs)))
	if p == nil {
		panic("gannet: out of C memory")
	}
	*m = append(*m, unsafe.Pointer(p))
	for i, msg := range msgs {
		C.gannet_go_set_message(p, C.size_t(i), m.str(msg.Role), m.str(msg.Content))
	}
	return p, nil
}

// toC builds the C request in C memory.
func (r *Request) toC(m *cMemory) (*C.gannet_request_t, error) {
	c := (*C.gannet_request_t)(m.alloc(unsafe.Sizeof(C.gannet_request_t{})))
	*c = C.gannet_go_request_init()
	texts := append([]string{r.PromptText}, r.StopStrings...)
	for _, s := range texts {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, &Error{Status: StatusInvalidArgument, Message: "a prompt or stop string contains a NUL byte"}
		}
	}
	if len(r.PromptTokens) > 0 {
		c.prompt_tokens = m.int32s(r.PromptTokens)
		c.num_prompt_tokens = C.size_t(len(r.PromptTokens))
	}
	if r.PromptText != "" {
		c.prompt_text = m.str(r.PromptText)
	}
	if len(r.Messages) > 0 {
		msgs, err := m.messages(r.Messages)
		if err != nil {
			return nil, err
		}
		c.messages = msgs
		c.num_messages = C.size_t(len(r.Messages))
	}
	c.temperature = C.float(r.Temperature)
	c.top_k = C.int32_t(r.TopK)
	c.top_p = C.float(r.TopP)
	c.min_p = C.float(r.MinP)
	c.repetition_penalty = C.float(r.RepetitionPenalty)
	c.presence_penalty = C.float(r.PresencePenalty)
	c.frequency_penalty = C.float(r.FrequencyPenalty)
	if r.Seed != nil {
		c.seed_mode = C.GANNET_SEED_FIXED
		c.seed = C.uint64_t(*r.Seed)
	} else {
		c.seed_mode = C.int32_t(r.SeedMode)
	}
	c.max_tokens = C.int32_t(r.MaxTokens)
	c.min_tokens = C.int32_t(r.MinTokens)
	if r.StopTokenIDs != nil {
		c.stop_token_ids = m.int32s(r.StopTokenIDs)
		c.num_stop_token_ids = C.size_t(len(r.StopTokenIDs))
	}
	c.ignore_default_stop_tokens = cbool(r.IgnoreDefaultStopTokens)
	if len(r.StopStrings) > 0 {
		size := uintptr(len(r.StopStrings)) * unsafe.Sizeof((*C.char)(nil))
		ptrs := unsafe.Slice((**C.char)(m.alloc(size)), len(r.StopStrings))
		for i, str := range r.StopStrings {
			ptrs[i] = m.str(str)
		}
		c.stop_strings = &ptrs[0]
		c.num_stop_strings = C.size_t(len(r.StopStrings))
	}
	c.logprobs = C.int32_t(r.Logprobs)
	c.priority = C.int32_t(r.Priority)
	if r.Deadline > 0 {
		ms := r.Deadline.Milliseconds()
		if ms == 0 {
			ms = 1
		}
		c.deadline_ms = C.int64_t(ms)
	}
	if r.NoGenerationPrompt {
		c.add_generation_prompt = 2
	}
	c.enable_thinking = cbool(r.Thinking)
	c.disable_speculation = cbool(r.DisableSpeculation)
	if len(r.Images) > 0 {
		imgs, err := m.images(r.Images)
		if err != nil {
			return nil, err
		}
		c.images = imgs
		c.num_images = C.size_t(len(r.Images))
	}
	return c, nil
}

// images builds the request's images in C memory, each with GANNET_IMAGE_INIT's struct_size
// and its bytes copied.
func (m *cMemory) images(imgs []Image) (*C.gannet_image_t, error) {
	arr := unsafe.Slice((*C.gannet_image_t)(m.alloc(uintptr(len(imgs))*unsafe.Sizeof(C.gannet_image_t{}))), len(imgs))
	for i, img := range imgs {
		c := &arr[i]
		c.struct_size = C.uint32_t(unsafe.Sizeof(C.gannet_image_t{}))
		c.max_soft_tokens = C.int32_t(img.MaxSoftTokens)
		if img.RGB != nil {
			// The library reads Width * Height * 3 bytes: a shorter slice must not reach it.
			if img.Width < 0 || img.Height < 0 || len(img.RGB) != img.Width*img.Height*3 {
				return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
					"image %d: %d x %d RGB needs %d bytes, got %d", i, img.Width, img.Height,
					img.Width*img.Height*3, len(img.RGB))}
			}
			c.rgb = (*C.uint8_t)(m.bytes(img.RGB))
			c.width = C.int32_t(img.Width)
			c.height = C.int32_t(img.Height)
		}
		if img.Data != nil {
			c.data = (*C.uint8_t)(m.bytes(img.Data))
			c.size = C.size_t(len(img.Data))
		}
	}
	return &arr[0], nil
}

func (m *cMemory) bytes(b []byte) unsafe.Pointer {
	p := m.alloc(uintptr(len(b)) + 1) // + 1: a valid pointer for an empty slice
	copy(unsafe.Slice((*byte)(p), len(b)), b)
	return p
}

// Package gannet runs Gemma-4 models through gannet's C ABI (include/gannet/gannet.h).
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
// goroutine. Build: the package finds gannet.h in the repository; point the linker at
// libgannet, e.g. CGO_LDFLAGS="-L$LIBDIR -Wl,-rpath,$LIBDIR" or `pkg-config --libs gannet`.
package gannet

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -lgannet
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
*/
import "C"

import (
	"context"
	"runtime"
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

// Version is "MAJOR.MINOR.PATCH" of the library actually linked.
func Version() string { return C.GoString(C.gannet_version()) }

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

// Config selects the model and the engine's limits; zero values are the library's defaults.
type Config struct {
	ModelDir           string // Hugging Face checkpoint folder, or "dummy:e4b" etc.
	Backend            string // "cpu" or "cuda"; "" = cuda if a GPU is usable, else cpu
	DeviceID           int
	MaxRunningSeqs     int
	MaxStepTokens      int
	MaxModelLen        int
	PageSize           int
	KVMemoryBytes      int64
	KVSlidingPages     int
	KVFullPages        int
	DisablePrefixCache bool
	Threads            int // CPU backend threads
	MaxQueuedRequests  int
	DisableCUDAGraphs  bool
	LoadFormat         string // "" or "auto" = safetensors, "dummy" = random weights
}

// Message is one chat message.
type Message struct {
	Role    string // "system", "user", "assistant"
	Content string
}

// Request is one generation request: exactly one of PromptTokens, PromptText and Messages.
// Zero values are the library's defaults (greedy sampling, the default stop tokens).
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
	Seed              *uint64 // nil = derived from the request id

	StopTokenIDs            []int32 // nil = the defaults
	IgnoreDefaultStopTokens bool
	StopStrings             []string
	Logprobs                int // > 0: the chosen token's logprob and this many top logprobs
	Priority                int
	Deadline                time.Duration // > 0: fail with DEADLINE_EXCEEDED after this long
	Thinking                bool          // chat: thinking mode
}

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
	Logprob      float32
	TopLogprobs  []TokenLogprob
	FinishReason FinishReason // EventFinish, EventError
	Err          *Error       // EventError
	// Set on the last event (EventFinish, EventError).
	PromptTokens       int
	GeneratedTokens    int
	CachedPromptTokens int
}

// Terminal reports whether this is its request's last event.
func (e *Event) Terminal() bool { return e.Type != EventToken }

func eventFromC(e *C.gannet_event_t) Event {
	ev := Event{
		RequestID:          uint64(e.request_id),
		Type:               EventType(e._type),
		TokenID:            int32(e.token_id),
		Logprob:            float32(e.logprob),
		FinishReason:       FinishReason(e.finish_reason),
		PromptTokens:       int(e.num_prompt_tokens),
		GeneratedTokens:    int(e.num_generated_tokens),
		CachedPromptTokens: int(e.num_cached_prompt_tokens),
	}
	if e.text != nil && e.text_len > 0 {
		ev.Text = C.GoStringN(e.text, C.int(e.text_len))
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

// Engine is a loaded model with its engine thread and the goroutine that polls it.
type Engine struct {
	raw *C.gannet_engine_t

	mu     sync.Mutex // guards the fields below and every C call but poll
	boxes  map[uint64]*mailbox
	closed bool
	failed error // the poll error that stopped the polling goroutine

	stop    chan struct{} // closed by Close: the polling goroutine exits
	stopped chan struct{} // closed by the polling goroutine when it exits
	gone    chan struct{} // closed by Close after destroy: feeders give up on slow readers
}

// Open loads the model and starts the engine.
func Open(cfg Config) (*Engine, error) {
	c := C.gannet_go_config_init()
	var strs []*C.char
	defer func() {
		for _, s := range strs {
			C.free(unsafe.Pointer(s))
		}
	}()
	cstr := func(s string) *C.char {
		if s == "" {
			return nil
		}
		p := C.CString(s)
		strs = append(strs, p)
		return p
	}
	c.model_dir = cstr(cfg.ModelDir)
	c.backend = cstr(cfg.Backend)
	c.load_format = cstr(cfg.LoadFormat)
	c.device_id = C.int32_t(cfg.DeviceID)
	c.max_running_seqs = C.int32_t(cfg.MaxRunningSeqs)
	c.max_step_tokens = C.int32_t(cfg.MaxStepTokens)
	c.max_model_len = C.int32_t(cfg.MaxModelLen)
	c.page_size = C.int32_t(cfg.PageSize)
	c.kv_memory_bytes = C.int64_t(cfg.KVMemoryBytes)
	c.kv_sliding_pages = C.int32_t(cfg.KVSlidingPages)
	c.kv_full_pages = C.int32_t(cfg.KVFullPages)
	c.disable_prefix_cache = cbool(cfg.DisablePrefixCache)
	c.num_threads = C.int32_t(cfg.Threads)
	c.max_queued_requests = C.int32_t(cfg.MaxQueuedRequests)
	c.disable_cuda_graphs = cbool(cfg.DisableCUDAGraphs)
	var raw *C.gannet_engine_t
	if err := call(func() C.gannet_status_t { return C.gannet_engine_create(&c, &raw) }); err != nil {
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
		var events *C.gannet_event_t
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
		// Copy out before the next poll reuses the library's buffer.
		batch := make([]Event, int(n))
		for i, ce := range unsafe.Slice(events, int(n)) {
			batch[i] = eventFromC(&ce)
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

// Stats is a snapshot of the engine's counters.
type Stats struct {
	NumRunning, NumWaiting int
	KVPagesTotal           [2]int // [0] sliding-window pool, [1] full-attention pool
	KVPagesUsed            [2]int
	PageSize               int
	PrefixCacheHitRate     float64
	TotalPromptTokens      int64
	TotalGeneratedTokens   int64
	NumPreemptions         int64
	NumSteps               int64
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
	return Stats{
		NumRunning:           int(s.num_running),
		NumWaiting:           int(s.num_waiting),
		KVPagesTotal:         [2]int{int(s.kv_pages_total[0]), int(s.kv_pages_total[1])},
		KVPagesUsed:          [2]int{int(s.kv_pages_used[0]), int(s.kv_pages_used[1])},
		PageSize:             int(s.page_size),
		PrefixCacheHitRate:   float64(s.prefix_cache_hit_rate),
		TotalPromptTokens:    int64(s.total_prompt_tokens),
		TotalGeneratedTokens: int64(s.total_generated_tokens),
		NumPreemptions:       int64(s.num_preemptions),
		NumSteps:             int64(s.num_steps),
	}, nil
}

// Close stops the polling goroutine and destroys the engine. Requests still running end with
// an EventError (StatusFailedPrecondition) where their reader keeps up, and their channels are
// closed. Close is idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	close(e.stop)
	<-e.stopped // now nothing else calls into the engine: destroy cannot race
	C.gannet_engine_destroy(e.raw)
	e.raw = nil
	e.failAll(&Error{Status: StatusFailedPrecondition, Message: "the engine was closed"})
	close(e.gone)
	return nil
}

// cMemory owns the C allocations a request points into, until submit has copied them.
type cMemory []unsafe.Pointer

func (m *cMemory) str(s string) *C.char {
	p := C.CString(s)
	*m = append(*m, unsafe.Pointer(p))
	return p
}

func (m *cMemory) alloc(size uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(size))
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

// toC builds the C request in C memory (cgo forbids passing Go pointers inside C structs).
func (r *Request) toC(m *cMemory) (*C.gannet_request_t, error) {
	c := (*C.gannet_request_t)(m.alloc(unsafe.Sizeof(C.gannet_request_t{})))
	*c = C.gannet_go_request_init()
	texts := append(append([]string{r.PromptText}, r.StopStrings...), flatten(r.Messages)...)
	for _, s := range texts {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, &Error{Status: StatusInvalidArgument, Message: "a prompt, message or stop string contains a NUL byte"}
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
		size := uintptr(len(r.Messages)) * unsafe.Sizeof(C.gannet_chat_message_t{})
		msgs := unsafe.Slice((*C.gannet_chat_message_t)(m.alloc(size)), len(r.Messages))
		for i, msg := range r.Messages {
			msgs[i].role = m.str(msg.Role)
			msgs[i].content = m.str(msg.Content)
		}
		c.messages = &msgs[0]
		c.num_messages = C.size_t(len(r.Messages))
	}
	s := &c.sampling
	s.temperature = C.float(r.Temperature)
	s.top_k = C.int32_t(r.TopK)
	s.top_p = C.float(r.TopP)
	s.min_p = C.float(r.MinP)
	s.repetition_penalty = C.float(r.RepetitionPenalty)
	s.presence_penalty = C.float(r.PresencePenalty)
	s.frequency_penalty = C.float(r.FrequencyPenalty)
	if r.Seed != nil {
		s.has_seed = 1
		s.seed = C.uint64_t(*r.Seed)
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
	c.enable_thinking = cbool(r.Thinking)
	return c, nil
}

func flatten(msgs []Message) []string {
	out := make([]string, 0, 2*len(msgs))
	for _, m := range msgs {
		out = append(out, m.Role, m.Content)
	}
	return out
}

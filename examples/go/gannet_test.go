package gannet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The library logs loading details at info level; keep test output to problems.
	if os.Getenv("GANNET_LOG_LEVEL") == "" {
		SetLogLevel(LogWarning)
	}
	os.Exit(m.Run())
}

// tiny returns a tiny checkpoint of tests/data/tiny (random weights).
func tiny(variant string) string {
	data := os.Getenv("GANNET_TEST_DATA")
	if data == "" {
		data = filepath.Join("..", "..", "tests", "data")
	}
	return filepath.Join(data, "tiny", variant)
}

func openTiny(t *testing.T, variant string) *Engine {
	t.Helper()
	e, err := Open(Config{ModelDir: tiny(variant), Backend: "cpu", Threads: 1, MaxModelLen: 256})
	if err != nil {
		t.Fatalf("open %s: %v", variant, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func greedy(n int) *Request {
	return &Request{PromptTokens: []int32{2, 120, 130, 140, 150, 160}, MaxTokens: n,
		IgnoreDefaultStopTokens: true}
}

type result struct {
	tokens []int32
	last   Event
	count  int // events after the terminal one (must stay 0)
}

func drain(events <-chan Event) result {
	var r result
	done := false
	for ev := range events {
		if done {
			r.count++
			continue
		}
		if ev.Type == EventToken {
			r.tokens = append(r.tokens, ev.TokenID)
		} else {
			r.last = ev
			done = true
		}
	}
	return r
}

func TestConcurrentSubmitsMatchOneAlone(t *testing.T) {
	e := openTiny(t, "e4b")
	_, events, err := e.Submit(context.Background(), greedy(8))
	if err != nil {
		t.Fatal(err)
	}
	alone := drain(events)
	if len(alone.tokens) != 8 || alone.last.Type != EventFinish || alone.last.FinishReason != FinishLength {
		t.Fatalf("alone: %d tokens, last %+v", len(alone.tokens), alone.last)
	}
	if alone.last.PromptTokens != 6 || alone.last.GeneratedTokens != 8 {
		t.Fatalf("usage: %+v", alone.last)
	}
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, events, err := e.Submit(context.Background(), greedy(8))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = drain(events)
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if !reflect.DeepEqual(r.tokens, alone.tokens) || r.count != 0 {
			t.Errorf("request %d: %v (+%d after the end), want %v", i, r.tokens, r.count, alone.tokens)
		}
	}
}

func TestCancelByContextAndByID(t *testing.T) {
	e := openTiny(t, "31b")
	ctx, cancel := context.WithCancel(context.Background())
	_, events, err := e.Submit(ctx, greedy(200))
	if err != nil {
		t.Fatal(err)
	}
	<-events
	cancel()
	r := drain(events) // closed once the request ends, whether or not we keep up
	if len(r.tokens) >= 199 {
		t.Fatalf("context cancellation did not stop the request (%d tokens)", len(r.tokens))
	}

	id, events, err := e.Submit(context.Background(), greedy(200))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Cancel(id); err != nil {
		t.Fatal(err)
	}
	r = drain(events)
	if r.last.Type != EventFinish || r.last.FinishReason != FinishCancelled {
		t.Fatalf("cancelled request ended with %+v", r.last)
	}
	var gerr *Error
	if err := e.Cancel(id); !errors.As(err, &gerr) || gerr.Status != StatusNotFound {
		t.Fatalf("cancelling a finished request: %v", err)
	}
}

func TestErrors(t *testing.T) {
	_, err := Open(Config{ModelDir: tiny("does-not-exist"), Backend: "cpu"})
	var gerr *Error
	if !errors.As(err, &gerr) || gerr.Status != StatusNotFound || gerr.Message == "" {
		t.Fatalf("open of a missing folder: %v", err)
	}
	if gerr.Error() != "GANNET_ERR_NOT_FOUND: "+gerr.Message {
		t.Fatalf("Error() = %q", gerr.Error())
	}

	e := openTiny(t, "31b")
	bad := greedy(4)
	bad.Temperature = -1
	if _, _, err := e.Submit(context.Background(), bad); !errors.As(err, &gerr) ||
		gerr.Status != StatusInvalidArgument {
		t.Fatalf("negative temperature: %v", err)
	}
	if _, _, err := e.Submit(context.Background(), &Request{PromptText: "a\x00b"}); !errors.As(err, &gerr) ||
		gerr.Status != StatusInvalidArgument {
		t.Fatalf("NUL in the prompt: %v", err)
	}
	// A token outside the vocabulary fails that request only, as an event.
	_, events, err := e.Submit(context.Background(), &Request{PromptTokens: []int32{2, 1 << 30}, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	r := drain(events)
	if r.last.Type != EventError || r.last.Err == nil || r.last.Err.Status != StatusInvalidArgument {
		t.Fatalf("out-of-vocabulary token: %+v", r.last)
	}
	_, events, err = e.Submit(context.Background(), &Request{
		Messages: []Message{{"system", "Be brief."}, {"user", "Hello there"}}, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r := drain(events); r.last.Type != EventFinish || len(r.tokens) == 0 {
		t.Fatalf("chat after an error: %+v", r)
	}
	st, err := e.Stats()
	if err != nil || st.TotalGeneratedTokens == 0 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	// The fields ABI 0.2 added.
	if st.Backend != "cpu" || st.DeviceID != -1 || st.DeviceName == "" || st.BackendFallback != "" {
		t.Fatalf("stats: backend %q, device %d %q, fallback %q", st.Backend, st.DeviceID,
			st.DeviceName, st.BackendFallback)
	}
	if st.MaxRunningSeqs <= 0 || st.KVBytes <= 0 || st.DeviceMemoryBytes <= st.KVBytes ||
		st.LoadTime <= 0 || st.MaxModelLen != 256 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestVersionQueries(t *testing.T) {
	if ABIVersion() != HeaderABIVersion || VersionCode() != HeaderVersionCode || Version() != "0.2.0" {
		t.Fatalf("linked %s (code %d, ABI %d); header code %d, ABI %d", Version(), VersionCode(),
			ABIVersion(), HeaderVersionCode, HeaderABIVersion)
	}
	if err := CheckABI(); err != nil {
		t.Fatal(err)
	}
}

func TestProgressCanAbortTheLoad(t *testing.T) {
	calls := 0
	_, err := Open(Config{ModelDir: tiny("e2b"), Backend: "cpu", Threads: 1, MaxModelLen: 256,
		Progress: func(Progress) bool { calls++; return false }})
	var gerr *Error
	if !errors.As(err, &gerr) || gerr.Status != StatusCancelled || calls != 1 {
		t.Fatalf("aborted load: %v after %d calls", err, calls)
	}
	var last Progress
	e, err := Open(Config{ModelDir: tiny("e2b"), Backend: "cpu", Threads: 1, MaxModelLen: 256,
		Progress: func(p Progress) bool { last = p; return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if last.Stage == "" || last.BytesTotal <= 0 || last.BytesDone > last.BytesTotal ||
		last.Fraction < 0 || last.Fraction > 1 {
		t.Fatalf("progress: %+v", last)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("a panic in the progress callback: recovered %v", r)
			}
		}()
		Open(Config{ModelDir: tiny("e2b"), Backend: "cpu", Threads: 1, MaxModelLen: 256,
			Progress: func(Progress) bool { panic("boom") }})
	}()
}

func TestRequestCheckNeedsNoEngine(t *testing.T) {
	info, err := ReadModelInfo(tiny("31b"))
	if err != nil || info.VocabSize <= 0 || !info.HasTokenizer || info.NumLayers <= 0 {
		t.Fatalf("model info: %+v, %v", info, err)
	}
	for _, ok := range []*Request{greedy(4), {PromptText: "hello"}} {
		if err := ok.Check(info); err != nil {
			t.Fatalf("%+v: %v", ok, err)
		}
		if err := ok.Check(nil); err != nil {
			t.Fatalf("%+v without a model: %v", ok, err)
		}
	}
	var gerr *Error
	bad := greedy(4)
	bad.Temperature = -1
	if err := bad.Check(nil); !errors.As(err, &gerr) || gerr.Status != StatusInvalidArgument {
		t.Fatalf("negative temperature: %v", err)
	}
	if err := (&Request{}).Check(nil); !errors.As(err, &gerr) || gerr.Status != StatusInvalidArgument {
		t.Fatalf("no prompt: %v", err)
	}
	outside := &Request{PromptTokens: []int32{2, 1 << 30}, MaxTokens: 4}
	if err := outside.Check(nil); err != nil {
		t.Fatalf("without a model the vocabulary is unknown: %v", err)
	}
	if err := outside.Check(info); !errors.As(err, &gerr) || gerr.Status != StatusInvalidArgument {
		t.Fatalf("a token outside the vocabulary: %v", err)
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	tok, err := OpenTokenizer(tiny("e4b"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	info, err := tok.Info()
	if err != nil || info.VocabSize <= 0 || info.BOSID < 0 || info.EOSID < 0 || info.EndOfTurnID < 0 {
		t.Fatalf("info: %+v, %v", info, err)
	}
	text := "The quick brown fox jumps over the lazy dog. Grüße, 世界!"
	ids, err := tok.Tokenize(text, false)
	if err != nil || len(ids) == 0 || len(ids) > len(text) {
		t.Fatalf("tokenize: %v, %v", ids, err)
	}
	if back, err := tok.Detokenize(ids, false); err != nil || back != text {
		t.Fatalf("detokenize: %q, %v", back, err)
	}
	withBOS, err := tok.Tokenize(text, true)
	if err != nil || withBOS[0] != info.BOSID || !reflect.DeepEqual(withBOS[1:], ids) {
		t.Fatalf("with <bos>: %v, %v", withBOS, err)
	}
	if back, err := tok.Detokenize(withBOS, true); err != nil || back != text {
		t.Fatalf("skipping special tokens: %q, %v", back, err)
	}
	var pieces []byte
	for _, id := range ids {
		p, err := tok.TokenToPiece(id)
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p...)
	}
	if string(pieces) != text {
		t.Fatalf("pieces: %q", pieces)
	}
	// Longer than the first buffer guess.
	long := strings.Repeat("ab ", 5000)
	if ids, err := tok.Tokenize(long, false); err != nil {
		t.Fatal(err)
	} else if back, err := tok.Detokenize(ids, false); err != nil || back != long {
		t.Fatalf("long text: %v", err)
	}
	if ids, err := tok.Tokenize("", false); err != nil || len(ids) != 0 {
		t.Fatalf("empty text: %v, %v", ids, err)
	}
	var gerr *Error
	if _, err := OpenTokenizer(tiny("does-not-exist")); !errors.As(err, &gerr) || gerr.Status != StatusNotFound {
		t.Fatalf("missing folder: %v", err)
	}
	tok.Close()
	if _, err := tok.Tokenize(text, false); !errors.As(err, &gerr) || gerr.Status != StatusFailedPrecondition {
		t.Fatalf("after Close: %v", err)
	}
}

func TestChatTemplateIsWhatTheEngineRuns(t *testing.T) {
	e := openTiny(t, "e4b")
	msgs := []Message{{"system", "Be brief."}, {"user", "Hello there, who are you?"}}
	tok, err := e.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := tok.ApplyChatTemplate(msgs, true, false)
	if err != nil || !strings.HasPrefix(prompt, "<bos>") || !strings.Contains(prompt, msgs[1].Content) {
		t.Fatalf("template: %q, %v", prompt, err)
	}
	ids, err := tok.Tokenize(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	_, events, err := e.Submit(context.Background(), &Request{Messages: msgs, MaxTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := drain(events); r.last.Type != EventFinish || r.last.PromptTokens != len(ids) {
		t.Fatalf("the engine ran %d prompt tokens, the template has %d (%+v)", r.last.PromptTokens,
			len(ids), r.last)
	}
	open, err := tok.ApplyChatTemplate(msgs, false, false)
	if err != nil || !strings.HasPrefix(prompt, open) || len(open) >= len(prompt) {
		t.Fatalf("without the generation prompt: %q, %v", open, err)
	}
	_, events, err = e.Submit(context.Background(), &Request{Messages: msgs, MaxTokens: 1, NoGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	openIDs, _ := tok.Tokenize(open, false)
	if r := drain(events); r.last.PromptTokens != len(openIDs) {
		t.Fatalf("no generation prompt: the engine ran %d prompt tokens, the template has %d",
			r.last.PromptTokens, len(openIDs))
	}
	// The engine's tokenizer dies with the engine.
	e.Close()
	var gerr *Error
	if _, err := tok.Tokenize("hello", false); !errors.As(err, &gerr) || gerr.Status != StatusFailedPrecondition {
		t.Fatalf("the tokenizer of a closed engine: %v", err)
	}
	if _, err := e.Tokenizer(); err == nil {
		t.Fatal("Tokenizer of a closed engine succeeded")
	}
}

func TestSeeds(t *testing.T) {
	e := openTiny(t, "e2b")
	run := func(seed *uint64, mode SeedMode) []int32 {
		r := greedy(12)
		r.Temperature = 1
		r.Seed = seed
		r.SeedMode = mode
		_, events, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		res := drain(events)
		if len(res.tokens) != 12 {
			t.Fatalf("%d tokens, last %+v", len(res.tokens), res.last)
		}
		return res.tokens
	}
	s1, s2 := uint64(1234), uint64(4321)
	a := run(&s1, SeedRandom)
	if b := run(&s1, SeedRandom); !reflect.DeepEqual(a, b) {
		t.Fatalf("one seed, two outputs: %v, %v", a, b)
	}
	if b := run(&s2, SeedRandom); reflect.DeepEqual(a, b) {
		t.Fatalf("two seeds, one output: %v", a)
	}
	run(nil, SeedRequestID)
	r1, r2, r3 := run(nil, SeedRandom), run(nil, SeedRandom), run(nil, SeedRandom)
	if reflect.DeepEqual(r1, r2) && reflect.DeepEqual(r2, r3) {
		t.Fatalf("unseeded sampling repeated itself: %v", r1)
	}
}

func TestCloseEndsOpenRequests(t *testing.T) {
	e, err := Open(Config{ModelDir: tiny("31b"), Backend: "cpu", Threads: 1, MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	_, events, err := e.Submit(context.Background(), greedy(10000))
	if err != nil {
		t.Fatal(err)
	}
	<-events
	e.Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				if _, _, err := e.Submit(context.Background(), greedy(1)); err == nil {
					t.Fatal("submit after Close succeeded")
				}
				return
			}
		case <-timeout:
			t.Fatal("the channel of a running request stayed open after Close")
		}
	}
}

func TestSpeculativeDecoding(t *testing.T) {
	plain := drain(mustSubmit(t, openTiny(t, "e4b"), greedy(12)))
	if plain.last.DraftTokens != 0 || plain.last.AcceptedDraftTokens != 0 {
		t.Fatalf("drafts without a draft model: %+v", plain.last)
	}
	e, err := Open(Config{ModelDir: tiny("e4b"), Backend: "cpu", Threads: 1, MaxModelLen: 256,
		DraftModelDir: tiny("e4b-assistant"), SpeculativeTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Greedy output is token for token the same as without drafts.
	spec := drain(mustSubmit(t, e, greedy(12)))
	if !reflect.DeepEqual(spec.tokens, plain.tokens) || spec.last.FinishReason != FinishLength {
		t.Fatalf("speculative: %v (%+v), plain: %v", spec.tokens, spec.last, plain.tokens)
	}
	if spec.last.DraftTokens <= 0 || spec.last.AcceptedDraftTokens > spec.last.DraftTokens {
		t.Fatalf("draft counts: %+v", spec.last)
	}
	// A request may opt out.
	req := greedy(12)
	req.DisableSpeculation = true
	off := drain(mustSubmit(t, e, req))
	if !reflect.DeepEqual(off.tokens, plain.tokens) || off.last.DraftTokens != 0 ||
		off.last.AcceptedDraftTokens != 0 {
		t.Fatalf("without speculation: %v (%+v)", off.tokens, off.last)
	}
	st, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.SpeculativeTokens != 2 || st.SpecDraftTokens < int64(spec.last.DraftTokens) ||
		st.SpecAcceptedTokens > st.SpecDraftTokens || st.SpecVerifyChunks <= 0 ||
		st.SpecDraftRounds <= 0 || st.SpecMeanAcceptedLength < 1 {
		t.Fatalf("stats: %+v", st)
	}
	// Without a draft model the counters are zero.
	if st, err := openTiny(t, "e2b").Stats(); err != nil || st.SpeculativeTokens != 0 ||
		st.SpecDraftTokens != 0 || st.SpecDraftRounds != 0 {
		t.Fatalf("stats without a draft model: %+v, %v", st, err)
	}
	// K outside 1..8 is refused at Open.
	var gerr *Error
	if _, err := Open(Config{ModelDir: tiny("e4b"), Backend: "cpu", Threads: 1,
		DraftModelDir: tiny("e4b-assistant"), SpeculativeTokens: 9}); !errors.As(err, &gerr) ||
		gerr.Status != StatusInvalidArgument {
		t.Fatalf("9 drafts per round: %v", err)
	}
	// A prompt budget while decoding above the step budget is refused, naming the setting.
	if _, err := Open(Config{ModelDir: tiny("e4b"), Backend: "cpu", Threads: 1, MaxStepTokens: 64,
		MaxPrefillTokensWhileDecoding: 65}); !errors.As(err, &gerr) ||
		gerr.Status != StatusInvalidArgument ||
		!strings.Contains(gerr.Message, "max_prefill_tokens_while_decoding (65)") {
		t.Fatalf("prefill budget above the step budget: %v", err)
	}
}

func TestTensorParallelOnCPUThreads(t *testing.T) {
	// The tiny 31b model has 4 attention heads: 3 ranks cannot split them.
	var gerr *Error
	if _, err := Open(Config{ModelDir: tiny("31b"), Backend: "cpu", Threads: 1, MaxModelLen: 256,
		TensorParallelSize: 3}); !errors.As(err, &gerr) || gerr.Status != StatusInvalidArgument ||
		!strings.Contains(gerr.Message, "num_attention_heads") {
		t.Fatalf("3 ranks over 4 heads: %v", err)
	}
	// 2 ranks (threads on the CPU backend) load it and generate.
	e, err := Open(Config{ModelDir: tiny("31b"), Backend: "cpu", Threads: 1, MaxModelLen: 256,
		TensorParallelSize: 2})
	if err != nil {
		t.Fatalf("open over 2 ranks: %v", err)
	}
	defer e.Close()
	r := drain(mustSubmit(t, e, greedy(8)))
	if len(r.tokens) != 8 || r.last.Type != EventFinish || r.last.FinishReason != FinishLength ||
		r.count != 0 {
		t.Fatalf("2 ranks: %d tokens, last %+v", len(r.tokens), r.last)
	}
}

func TestMultiProcessTensorParallelArguments(t *testing.T) {
	// A normal engine serves requests itself: Serve has nothing to wait for.
	e := openTiny(t, "31b")
	var gerr *Error
	for _, timeout := range []time.Duration{-1, 0, 10 * time.Millisecond} {
		if err := e.Serve(timeout); !errors.As(err, &gerr) || gerr.Status != StatusFailedPrecondition {
			t.Fatalf("Serve(%v) on a normal engine: %v", timeout, err)
		}
	}
	// ... and still does.
	if r := drain(mustSubmit(t, e, greedy(4))); len(r.tokens) != 4 || r.last.Type != EventFinish {
		t.Fatalf("after Serve: %d tokens, last %+v", len(r.tokens), r.last)
	}

	if _, err := Open(Config{ModelDir: tiny("31b"), Backend: "cpu", TensorParallelSize: 2,
		TPID: []byte{1, 2, 3, 4, 5}}); !errors.As(err, &gerr) || gerr.Status != StatusInvalidArgument ||
		!strings.Contains(gerr.Message, "TPID") {
		t.Fatalf("a 5-byte TPID: %v", err)
	}
	// A real id needs NCCL; a build without it says so.
	id, err := CreateTPID()
	if err == nil {
		nonzero := false
		for _, b := range id {
			nonzero = nonzero || b != 0
		}
		if len(id) != TPIDSize || !nonzero {
			t.Fatalf("CreateTPID: %x", id)
		}
	} else if !errors.As(err, &gerr) || gerr.Status != StatusUnimplemented {
		t.Fatalf("CreateTPID: %v", err)
	} else {
		id = make([]byte, TPIDSize)
	}
	// A rank outside the group is refused before anything loads.
	if _, err := Open(Config{ModelDir: tiny("31b"), Backend: "cpu", TensorParallelSize: 2,
		TPID: id, TPRank: 2}); !errors.As(err, &gerr) || gerr.Status != StatusInvalidArgument ||
		!strings.Contains(gerr.Message, "tp_rank") {
		t.Fatalf("rank 2 of 2: %v", err)
	}
	// Serve after Close fails instead of touching a destroyed engine.
	e.Close()
	if err := e.Serve(-1); !errors.As(err, &gerr) || gerr.Status != StatusFailedPrecondition ||
		!strings.Contains(gerr.Message, "closed") {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func mustSubmit(t *testing.T, e *Engine, r *Request) <-chan Event {
	t.Helper()
	_, events, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// An image in a chat message gives HF's greedy tokens (tests/data/golden/mm-api.json, from
// tools/golden/mm_api_golden.py); a truncated one is refused naming it.
func TestImageInAChat(t *testing.T) {
	png, err := os.ReadFile(filepath.Join(tiny("mm-api"), "..", "..", "images", "palette_50x30.png"))
	if err != nil {
		t.Fatal(err)
	}
	e := openTiny(t, "mm-api")
	req := func(data []byte) *Request {
		return &Request{Messages: []Message{{Role: "user", Content: "<|image|>What is in this picture?"}},
			Images: []Image{{Data: data, MaxSoftTokens: 70}}, MaxTokens: 16, IgnoreDefaultStopTokens: true}
	}
	_, events, err := e.Submit(context.Background(), req(png))
	if err != nil {
		t.Fatal(err)
	}
	r := drain(events)
	want := []int32{476, 73, 490, 461, 461, 429, 369, 392, 418, 413, 369, 272, 424, 484, 57, 57}
	if fmt.Sprint(r.tokens) != fmt.Sprint(want) || r.last.PromptTokens != 102 {
		t.Fatalf("tokens %v (want %v), prompt tokens %d (want 102)", r.tokens, want, r.last.PromptTokens)
	}
	var gerr *Error
	if _, _, err := e.Submit(context.Background(), req(png[:100])); !errors.As(err, &gerr) ||
		gerr.Status != StatusInvalidArgument || !strings.Contains(gerr.Message, "images[0]") {
		t.Fatalf("truncated PNG: %v", err)
	}
}

package gannet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
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

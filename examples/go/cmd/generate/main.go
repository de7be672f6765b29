// Command generate runs one request through the gannet Go package and streams the text to
// stdout. It takes the flags of `gannet generate` that shape a request, spelled and range-checked
// as the CLI does (Go's flag package also accepts a single dash before long names), and its
// stdout is the CLI's with -q, e.g.
//
//	generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids
//	gannet generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids -q
//
// Like the CLI it checks the request against the model before loading any weight. Ctrl-C
// cancels the request.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"

	gannet "github.com/gannet-ai/gannet/examples/go"
)

// once is a flag that may be given once (the CLI rejects repeats), checked by parse.
type once[T any] struct {
	v     T
	set   bool
	parse func(string) (T, error)
}

func (f *once[T]) String() string {
	if f == nil || !f.set {
		return ""
	}
	return fmt.Sprint(f.v)
}

func (f *once[T]) Set(s string) error {
	if f.set {
		return errors.New("given twice")
	}
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	f.v, f.set = v, true
	return nil
}

// boolFlag is a switch (no value), given once.
type boolFlag struct{ once[bool] }

func (f *boolFlag) IsBoolFlag() bool { return true }

// list is a repeatable flag.
type list struct {
	v     []string
	check func(string) error
}

func (l *list) String() string { return "" }
func (l *list) Set(s string) error {
	if l.check != nil {
		if err := l.check(s); err != nil {
			return err
		}
	}
	l.v = append(l.v, s)
	return nil
}

func str() *once[string] {
	return &once[string]{parse: func(s string) (string, error) { return s, nil }}
}

// integer accepts an optional '-' and digits only, within [min, max] (the CLI's ParseInt64).
func integer(min, max int64) *once[int64] {
	return &once[int64]{parse: func(s string) (int64, error) {
		digits := strings.TrimPrefix(s, "-")
		if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
			return 0, fmt.Errorf("expects an integer in [%d, %d]", min, max)
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < min || v > max {
			return 0, fmt.Errorf("expects an integer in [%d, %d]", min, max)
		}
		return v, nil
	}}
}

func number(min, max float64) *once[float64] {
	return &once[float64]{parse: func(s string) (float64, error) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < min || v > max {
			return 0, fmt.Errorf("expects a number in [%g, %g]", min, max)
		}
		return v, nil
	}}
}

func unsigned() *once[uint64] {
	return &once[uint64]{parse: func(s string) (uint64, error) {
		if s == "" || strings.TrimLeft(s, "0123456789") != "" {
			return 0, errors.New("expects an integer in [0, 18446744073709551615]")
		}
		return strconv.ParseUint(s, 10, 64)
	}}
}

func switchFlag() *boolFlag {
	return &boolFlag{once[bool]{parse: strconv.ParseBool}}
}

// parseIDs: "2,108,109", ids in [0, 2^31 - 1].
func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, item := range strings.Split(s, ",") {
		if item == "" || strings.TrimLeft(item, "0123456789") != "" {
			return nil, errors.New("expects comma-separated ids in [0, 2147483647] like 2,108,109")
		}
		v, err := strconv.ParseInt(item, 10, 32)
		if err != nil {
			return nil, errors.New("expects comma-separated ids in [0, 2147483647] like 2,108,109")
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

func main() {
	const i32max = math.MaxInt32
	var (
		model       = str()
		backend     = str()
		device      = integer(0, 1023)
		threads     = integer(1, 1024)
		ctxSize     = integer(2, i32max)
		draft       = str()
		specTokens  = integer(1, 8)
		noSpec      = switchFlag()
		maxTokens   = integer(0, i32max)
		minTokens   = integer(0, i32max)
		temperature = number(0, 100)
		topK        = integer(0, i32max)
		topP        = number(0, 1)
		minP        = number(0, 1)
		repetition  = number(0, 100)
		presence    = number(-100, 100)
		frequency   = number(-100, 100)
		seed        = unsigned()
		stops       = &list{}
		stopIDs     = &list{check: func(s string) error {
			ids, err := parseIDs(s)
			if err != nil || len(ids) != 1 {
				return errors.New("expects a token id in [0, 2147483647]")
			}
			return nil
		}}
		ignoreEOS = switchFlag()
		prompt    = str()
		promptIDs = &once[[]int32]{parse: parseIDs}
		chat      = switchFlag()
		system    = str()
		thinking  = switchFlag()
		ids       = switchFlag()
		quiet     = switchFlag()
	)
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, in the CLI's words
	var help strings.Builder
	def := func(v flag.Value, usage string, names ...string) {
		spelled := make([]string, len(names))
		for i, n := range names {
			fs.Var(v, n, usage)
			spelled[i] = "--" + n
			if len(n) == 1 {
				spelled[i] = "-" + n
			}
		}
		fmt.Fprintf(&help, "  %-34s %s\n", strings.Join(spelled, ", "), usage)
	}
	def(model, "checkpoint folder (config.json, safetensors, tokenizer.json) or dummy:VARIANT", "m", "model")
	def(backend, "cpu or cuda (default: cuda when a GPU is usable)", "backend")
	def(device, "CUDA device ordinal (default 0)", "device")
	def(threads, "CPU backend threads (default: all cores; at most 1024)", "t", "threads")
	def(ctxSize, "longest sequence in tokens", "c", "ctx-size", "max-model-len")
	def(draft, "speculative decoding with this MTP assistant (folder or dummy:VARIANT-assistant)", "draft", "draft-model")
	def(specTokens, "drafts per round with --draft, 1 to 8 (default 3)", "spec-tokens")
	def(noSpec, "decode this request without drafts (with --draft)", "no-spec")
	def(maxTokens, "tokens to generate (default 128; 0 = until the context is full)", "n", "max-tokens", "n-predict")
	def(minTokens, "generate at least N tokens before stopping", "min-tokens")
	def(temperature, "0 = greedy (default), else sample", "temperature", "temp")
	def(topK, "sample from the K most likely tokens (0 = off)", "top-k")
	def(topP, "nucleus sampling threshold in (0, 1] (0 or 1 = off)", "top-p")
	def(minP, "drop tokens below P x the top probability", "min-p")
	def(repetition, "penalise tokens seen in prompt and output", "repetition-penalty", "repeat-penalty")
	def(presence, "subtract X from seen output tokens", "presence-penalty")
	def(frequency, "subtract X per occurrence in the output", "frequency-penalty")
	def(seed, "sampling seed: repeatable output (default: random)", "s", "seed")
	def(stops, "stop when STR appears (repeatable)", "stop")
	def(stopIDs, "stop at this token id (repeatable)", "stop-id")
	def(ignoreEOS, "do not stop at <eos>/<turn|>", "ignore-eos")
	def(prompt, "the prompt (UTF-8)", "p", "prompt")
	def(promptIDs, "the prompt as comma-separated token ids", "prompt-ids")
	def(chat, "treat the prompt as a user message (Gemma-4 chat template)", "chat")
	def(system, "system message (implies --chat)", "sys", "system", "system-prompt")
	def(thinking, "chat: enable thinking mode", "thinking")
	def(ids, "also print the generated token ids (one line)", "ids")
	def(quiet, "accepted for the CLI's sake (this example prints no statistics)", "q", "quiet")
	usageError := func(format string, args ...interface{}) {
		fmt.Fprintf(os.Stderr, "generate: "+format+"\n(try `generate --help`)\n", args...)
		os.Exit(2)
	}
	if err := fs.Parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		fmt.Printf("usage: generate -m MODEL_DIR (-p PROMPT | --prompt-ids IDS) [options]\n\noptions:\n%s",
			help.String())
		os.Exit(0)
	} else if err != nil {
		usageError("%v", err)
	}
	if fs.NArg() > 0 {
		usageError("unexpected argument '%s' (every value follows its flag; quote a prompt and pass it with -p)", fs.Arg(0))
	}
	if !model.set {
		usageError("no model: pass -m MODEL_DIR")
	}
	if backend.set && backend.v != "cpu" && backend.v != "cuda" {
		usageError("option --backend expects cpu or cuda, got '%s'", backend.v)
	}
	if specTokens.set && draft.v == "" { // an empty --draft is no draft, as in the CLI
		usageError("option --spec-tokens needs --draft DIR")
	}
	if prompt.set && promptIDs.set {
		usageError("give the prompt once: -p TEXT or --prompt-ids IDS, not both")
	}
	isChat := chat.set || system.set
	if promptIDs.set && isChat {
		usageError("--chat and --system need a text prompt, not --prompt-ids")
	}
	if !prompt.set && !promptIDs.set {
		usageError("no prompt: pass -p PROMPT or --prompt-ids IDS")
	}

	req := &gannet.Request{
		MaxTokens:               128,
		MinTokens:               int(minTokens.v),
		Temperature:             float32(temperature.v),
		TopK:                    int(topK.v),
		TopP:                    float32(topP.v),
		MinP:                    float32(minP.v),
		RepetitionPenalty:       float32(repetition.v),
		PresencePenalty:         float32(presence.v),
		FrequencyPenalty:        float32(frequency.v),
		IgnoreDefaultStopTokens: ignoreEOS.v,
		StopStrings:             stops.v,
		DisableSpeculation:      noSpec.v,
	}
	if maxTokens.set {
		req.MaxTokens = int(maxTokens.v)
	}
	if seed.set { // no --seed: a random seed for every run, as the CLI does
		req.Seed = &seed.v
	}
	for _, s := range stopIDs.v {
		id, _ := parseIDs(s)
		req.StopTokenIDs = append(req.StopTokenIDs, id...)
	}
	switch {
	case promptIDs.set:
		req.PromptTokens = promptIDs.v
	case isChat:
		if system.v != "" {
			req.Messages = append(req.Messages, gannet.Message{Role: "system", Content: system.v})
		}
		req.Messages = append(req.Messages, gannet.Message{Role: "user", Content: prompt.v})
		req.Thinking = thinking.v
	default:
		req.PromptText = prompt.v
	}

	// The library logs to stderr; keep it to warnings and errors unless asked, like the CLI.
	if os.Getenv("GANNET_LOG_LEVEL") == "" {
		gannet.SetLogLevel(gannet.LogWarning)
	}
	// Everything about the request is checked before any weight loads.
	info, err := gannet.ReadModelInfo(model.v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate: cannot read the model:", err)
		os.Exit(1)
	}
	if err := req.Check(info); err != nil {
		var gerr *gannet.Error
		if errors.As(err, &gerr) {
			err = errors.New(gerr.Message)
		}
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(2)
	}

	engine, err := gannet.Open(gannet.Config{ModelDir: model.v, Backend: backend.v,
		DeviceID: int(device.v), Threads: int(threads.v), MaxModelLen: int(ctxSize.v),
		DraftModelDir: draft.v, SpeculativeTokens: int(specTokens.v)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate: cannot load the model:", err)
		os.Exit(1)
	}
	defer engine.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, events, err := engine.Submit(ctx, req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		engine.Close()
		os.Exit(1)
	}

	out := bufio.NewWriter(os.Stdout)
	var tokens []string
	printed := false
	for ev := range events {
		out.WriteString(ev.Text)
		out.Flush()
		printed = printed || ev.Text != ""
		switch ev.Type {
		case gannet.EventToken:
			tokens = append(tokens, strconv.Itoa(int(ev.TokenID)))
		case gannet.EventError:
			if printed {
				fmt.Fprintln(out)
				out.Flush()
			}
			fmt.Fprintln(os.Stderr, "generate:", ev.Err)
			engine.Close()
			os.Exit(1)
		}
	}
	fmt.Fprintln(out)
	if ids.v {
		fmt.Fprintln(out, strings.Join(tokens, " "))
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		engine.Close()
		os.Exit(1)
	}
}

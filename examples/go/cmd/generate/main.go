// Command generate runs one greedy request through the gannet Go package and streams the text
// to stdout. Its stdout is the same as the CLI's for the same flags with -q, e.g.
//
//	generate -m tests/data/tiny/e4b -chat -p "Hello" -n 16 -ids
//	gannet generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids -q
//
// Ctrl-C cancels the request.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"gannet"
)

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, item := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(item), 10, 32)
		if err != nil {
			return nil, errors.New("-prompt-ids expects ids like 2,108,109")
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

func main() {
	var (
		model, prompt, promptIDs, system, backend string
		chat, ids, ignoreEOS                      bool
		maxTokens, threads                        int
	)
	flag.StringVar(&model, "m", "", "checkpoint folder (config.json, safetensors, tokenizer.json)")
	flag.StringVar(&prompt, "p", "", "the prompt (UTF-8)")
	flag.StringVar(&promptIDs, "prompt-ids", "", "the prompt as comma-separated token ids")
	flag.BoolVar(&chat, "chat", false, "treat the prompt as a user message (Gemma-4 chat template)")
	flag.StringVar(&system, "s", "", "system message (implies -chat)")
	flag.IntVar(&maxTokens, "n", 128, "tokens to generate")
	flag.BoolVar(&ignoreEOS, "ignore-eos", false, "do not stop at <eos>/<turn|>")
	flag.BoolVar(&ids, "ids", false, "also print the generated token ids (one line)")
	flag.StringVar(&backend, "backend", "", "cpu or cuda (default: cuda when a GPU is usable)")
	flag.IntVar(&threads, "threads", 0, "CPU backend threads (default: all cores)")
	flag.Parse()
	if model == "" || (prompt == "") == (promptIDs == "") {
		fmt.Fprintln(os.Stderr, "usage: generate -m MODEL_DIR (-p PROMPT | -prompt-ids IDS) [options]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	// The library logs to stderr; keep it to warnings and errors unless asked, like the CLI.
	if os.Getenv("GANNET_LOG_LEVEL") == "" {
		gannet.SetLogLevel(gannet.LogWarning)
	}

	req := &gannet.Request{MaxTokens: maxTokens, IgnoreDefaultStopTokens: ignoreEOS}
	switch {
	case promptIDs != "":
		tokens, err := parseIDs(promptIDs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "generate:", err)
			os.Exit(2)
		}
		req.PromptTokens = tokens
	case chat || system != "":
		if system != "" {
			req.Messages = append(req.Messages, gannet.Message{Role: "system", Content: system})
		}
		req.Messages = append(req.Messages, gannet.Message{Role: "user", Content: prompt})
	default:
		req.PromptText = prompt
	}

	engine, err := gannet.Open(gannet.Config{ModelDir: model, Backend: backend, Threads: threads})
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
	if ids {
		fmt.Fprintln(out, strings.Join(tokens, " "))
	}
	out.Flush()
}

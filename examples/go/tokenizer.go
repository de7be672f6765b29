package gannet

/*
#include <stdlib.h>
#include "gannet/gannet.h"

static gannet_tokenizer_info_t gannet_go_tokenizer_info(void) {
  gannet_tokenizer_info_t i = GANNET_TOKENIZER_INFO_INIT;
  return i;
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Tokenizer is a model's tokenizer and chat template, to count, trim and render prompts exactly
// as the engine does. It is immutable: its methods may run concurrently on any goroutine.
//
// One from OpenTokenizer is the caller's: Close frees it (a finalizer does so if it is
// forgotten). One from Engine.Tokenizer belongs to the engine: Close is a no-op and its methods
// fail with StatusFailedPrecondition once the engine is closed.
type Tokenizer struct {
	raw   *C.gannet_tokenizer_t
	owned bool
	life  *lifeGuard // its own, or the engine's
}

// TokenizerInfo names the special tokens of a vocabulary; an id is -1 where the vocabulary
// lacks the token.
type TokenizerInfo struct {
	VocabSize     int // one past the largest id
	BOSID         int32
	EOSID         int32
	PadID         int32
	UnkID         int32
	StartOfTurnID int32 // <|turn>
	EndOfTurnID   int32 // <turn|>
}

// OpenTokenizer loads <modelDir>/tokenizer.json (and config.json, for the chat template's
// variant) without a model; StatusNotFound when the folder has none.
func OpenTokenizer(modelDir string) (*Tokenizer, error) {
	if err := CheckABI(); err != nil {
		return nil, err
	}
	dir := C.CString(modelDir)
	defer C.free(unsafe.Pointer(dir))
	var raw *C.gannet_tokenizer_t
	if err := call(func() C.gannet_status_t { return C.gannet_tokenizer_open(dir, &raw) }); err != nil {
		return nil, err
	}
	t := &Tokenizer{raw: raw, owned: true, life: &lifeGuard{}}
	runtime.SetFinalizer(t, (*Tokenizer).Close)
	return t, nil
}

// Tokenizer is the engine's own tokenizer, usable until the engine is closed; StatusNotFound
// when the model has none (dummy models, folders without tokenizer.json).
func (e *Engine) Tokenizer() (*Tokenizer, error) {
	if !e.tokenizerLife.enter() {
		return nil, closedError("the engine is closed")
	}
	defer e.tokenizerLife.leave()
	var raw *C.gannet_tokenizer_t
	err := call(func() C.gannet_status_t {
		return C.gannet_engine_tokenizer(e.raw, &raw)
	})
	if err != nil {
		return nil, err
	}
	return &Tokenizer{raw: raw, life: &e.tokenizerLife}, nil
}

func closedError(what string) error {
	return &Error{Status: StatusFailedPrecondition, Message: what}
}

// Close frees a tokenizer from OpenTokenizer once no call is inside it; calls then fail. It is
// idempotent, and a no-op for an engine's tokenizer.
func (t *Tokenizer) Close() error {
	if t.owned && t.life.close() {
		runtime.SetFinalizer(t, nil)
		C.gannet_tokenizer_close(t.raw)
	}
	return nil
}

// use runs f while the tokenizer is alive.
func (t *Tokenizer) use(f func() error) error {
	if !t.life.enter() {
		if t.owned {
			return closedError("the tokenizer is closed")
		}
		return closedError("the engine of this tokenizer is closed")
	}
	defer t.life.leave()
	defer runtime.KeepAlive(t)
	return f()
}

// Info reads the vocabulary size and the special tokens.
func (t *Tokenizer) Info() (TokenizerInfo, error) {
	i := C.gannet_go_tokenizer_info()
	err := t.use(func() error {
		return call(func() C.gannet_status_t { return C.gannet_tokenizer_get_info(t.raw, &i) })
	})
	if err != nil {
		return TokenizerInfo{}, err
	}
	return TokenizerInfo{
		VocabSize:     int(i.vocab_size),
		BOSID:         int32(i.bos_id),
		EOSID:         int32(i.eos_id),
		PadID:         int32(i.pad_id),
		UnkID:         int32(i.unk_id),
		StartOfTurnID: int32(i.start_of_turn_id),
		EndOfTurnID:   int32(i.end_of_turn_id),
	}, nil
}

// fill runs a buffer call (gannet.h's rule: a buffer too small gets nothing, the size needed is
// set and RESOURCE_EXHAUSTED returned) until the result fits; guess is the first capacity.
func fill[T any](guess int, f func(buf *T, capacity C.size_t, n *C.size_t) C.gannet_status_t) ([]T, error) {
	if guess < 1 {
		guess = 1
	}
	buf := make([]T, guess)
	for {
		var n C.size_t
		var st C.gannet_status_t
		err := call(func() C.gannet_status_t {
			st = f(&buf[0], C.size_t(len(buf)), &n)
			return st
		})
		if st == C.GANNET_ERR_RESOURCE_EXHAUSTED && int(n) > len(buf) {
			buf = make([]T, int(n)+1) // text gets a NUL when one more byte fits
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:int(n)], nil
	}
}

// cText is text as a pointer the C call may read (Go memory without Go pointers) and a length.
func cText(s []byte) *C.char {
	if len(s) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(&s[0]))
}

// Tokenize turns UTF-8 text into token ids. addSpecialTokens prepends what the tokenizer's
// post-processor adds (Gemma: <bos>); a rendered chat template already starts with <bos>.
func (t *Tokenizer) Tokenize(text string, addSpecialTokens bool) ([]int32, error) {
	var ids []C.int32_t
	b := []byte(text)
	err := t.use(func() (err error) {
		ids, err = fill(len(b)+8, func(buf *C.int32_t, capacity C.size_t, n *C.size_t) C.gannet_status_t {
			return C.gannet_tokenize(t.raw, cText(b), C.size_t(len(b)), cbool(addSpecialTokens), buf, capacity, n)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

func bytesOf(chars []C.char) []byte {
	if len(chars) == 0 {
		return []byte{}
	}
	return C.GoBytes(unsafe.Pointer(&chars[0]), C.int(len(chars)))
}

// Detokenize turns token ids into text; skipSpecialTokens drops <bos>, <|turn> and the like. A
// sequence cut inside a character gives bytes that are not valid UTF-8.
func (t *Tokenizer) Detokenize(ids []int32, skipSpecialTokens bool) (string, error) {
	var text []C.char
	err := t.use(func() (err error) {
		var p *C.int32_t
		if len(ids) > 0 {
			p = (*C.int32_t)(unsafe.Pointer(&ids[0]))
		}
		text, err = fill(8*len(ids)+16, func(buf *C.char, capacity C.size_t, n *C.size_t) C.gannet_status_t {
			return C.gannet_detokenize(t.raw, p, C.size_t(len(ids)), cbool(skipSpecialTokens), buf, capacity, n)
		})
		return err
	})
	if err != nil {
		return "", err
	}
	return string(bytesOf(text)), nil
}

// TokenToPiece is the bytes one token contributes when decoded alone (a byte token gives its
// raw byte, which alone may not be valid UTF-8).
func (t *Tokenizer) TokenToPiece(id int32) ([]byte, error) {
	var text []C.char
	err := t.use(func() (err error) {
		text, err = fill(32, func(buf *C.char, capacity C.size_t, n *C.size_t) C.gannet_status_t {
			return C.gannet_token_to_piece(t.raw, C.int32_t(id), buf, capacity, n)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return bytesOf(text), nil
}

// ApplyChatTemplate renders chat messages into the prompt text the engine would build for them
// (Gemma-4's template for this model's size class). It starts with "<bos>": tokenize it with
// addSpecialTokens false to get the ids the engine would run.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, addGenerationPrompt, thinking bool) (string, error) {
	var mem cMemory
	defer mem.free()
	cmsgs, err := mem.messages(msgs)
	if err != nil {
		return "", err
	}
	guess := 64
	for _, m := range msgs {
		guess += len(m.Role) + len(m.Content) + 32
	}
	var text []C.char
	err = t.use(func() (err error) {
		text, err = fill(guess, func(buf *C.char, capacity C.size_t, n *C.size_t) C.gannet_status_t {
			return C.gannet_apply_chat_template(t.raw, cmsgs, C.size_t(len(msgs)),
				cbool(addGenerationPrompt), cbool(thinking), buf, capacity, n)
		})
		return err
	})
	if err != nil {
		return "", err
	}
	return string(bytesOf(text)), nil
}

//! A model's tokenizer and chat template (`gannet_tokenizer_*`), to count, trim and render
//! prompts exactly as the engine does.
use std::ffi::c_char;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::NonNull;

use crate::{c_string, check, check_abi, sys, Error, Message, RawMessages, Result, Status};

/// A model's tokenizer: opened from a model folder ([`Tokenizer::open`], `Tokenizer<'static>`,
/// closed on drop) or borrowed from an engine ([`crate::Engine::tokenizer`], `Tokenizer<'e>`,
/// which the borrow checker keeps from outliving the engine). Immutable: `Send + Sync`, every
/// method may run on any thread concurrently.
pub struct Tokenizer<'e> {
    raw: NonNull<sys::gannet_tokenizer_t>,
    /// Opened by us (closed on drop), or the engine's (never closed).
    owned: bool,
    _engine: PhantomData<&'e crate::Engine>,
}

// SAFETY: the C tokenizer is immutable and all its calls may run concurrently; close runs in
// Drop, which has exclusive access; an engine's tokenizer lives as long as the borrowed engine.
unsafe impl Send for Tokenizer<'_> {}
unsafe impl Sync for Tokenizer<'_> {}

/// The special tokens of a vocabulary (`gannet_tokenizer_info_t`); `None` where the vocabulary
/// lacks the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenizerInfo {
    /// One past the largest id.
    pub vocab_size: i32,
    pub bos_id: Option<i32>,
    pub eos_id: Option<i32>,
    pub pad_id: Option<i32>,
    pub unk_id: Option<i32>,
    /// `<|turn>`
    pub start_of_turn_id: Option<i32>,
    /// `<turn|>`
    pub end_of_turn_id: Option<i32>,
}

fn id(raw: i32) -> Option<i32> {
    (raw >= 0).then_some(raw)
}

/// Runs a buffer call of the C ABI (gannet.h's rule: a buffer too small gets nothing, the size
/// needed is set and RESOURCE_EXHAUSTED returned) until the result fits; `guess` is the first
/// capacity tried.
fn fill<T: Copy + Default>(
    guess: usize,
    mut call: impl FnMut(*mut T, usize, &mut usize) -> sys::gannet_status_t,
) -> Result<Vec<T>> {
    let mut buf = vec![T::default(); guess.max(1)];
    loop {
        let mut n = 0usize;
        let code = call(buf.as_mut_ptr(), buf.len(), &mut n);
        if code == sys::GANNET_ERR_RESOURCE_EXHAUSTED && n > buf.len() {
            // Text outputs get a NUL when one more byte fits: harmless, and avoids a third call.
            buf.resize(n + 1, T::default());
            continue;
        }
        check(code)?;
        buf.truncate(n);
        return Ok(buf);
    }
}

fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl Tokenizer<'static> {
    /// Loads `<model_dir>/tokenizer.json` (and config.json, for the chat template's variant)
    /// without a model. `NotFound` when the folder has no tokenizer.json.
    pub fn open(model_dir: impl AsRef<Path>) -> Result<Tokenizer<'static>> {
        check_abi()?;
        let dir = c_string("model_dir", &model_dir.as_ref().to_string_lossy())?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid NUL-terminated path and an output pointer.
        check(unsafe { sys::gannet_tokenizer_open(dir.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "gannet_tokenizer_open returned NULL"))?;
        Ok(Tokenizer {
            raw,
            owned: true,
            _engine: PhantomData,
        })
    }
}

impl<'e> Tokenizer<'e> {
    /// # Safety
    /// `raw` must stay valid for `'e` and must not be closed by anyone while it is in use.
    pub(crate) unsafe fn borrowed(raw: *const sys::gannet_tokenizer_t) -> Result<Tokenizer<'e>> {
        let raw = NonNull::new(raw.cast_mut())
            .ok_or_else(|| Error::new(Status::Internal, "gannet_engine_tokenizer returned NULL"))?;
        Ok(Tokenizer {
            raw,
            owned: false,
            _engine: PhantomData,
        })
    }

    pub fn as_raw(&self) -> *const sys::gannet_tokenizer_t {
        self.raw.as_ptr()
    }

    pub fn info(&self) -> Result<TokenizerInfo> {
        let mut info = sys::gannet_tokenizer_info_t::default();
        // SAFETY: a live tokenizer and an output struct with struct_size set.
        check(unsafe { sys::gannet_tokenizer_get_info(self.as_raw(), &mut info) })?;
        Ok(TokenizerInfo {
            vocab_size: info.vocab_size,
            bos_id: id(info.bos_id),
            eos_id: id(info.eos_id),
            pad_id: id(info.pad_id),
            unk_id: id(info.unk_id),
            start_of_turn_id: id(info.start_of_turn_id),
            end_of_turn_id: id(info.end_of_turn_id),
        })
    }

    /// Text to token ids. `add_special_tokens` prepends what the tokenizer's post-processor adds
    /// (Gemma: `<bos>`); a rendered chat template already starts with `<bos>`: pass `false`.
    pub fn tokenize(&self, text: &str, add_special_tokens: bool) -> Result<Vec<i32>> {
        fill(text.len() + 8, |ids: *mut i32, capacity, n| {
            // SAFETY: `text` is valid for its length; `ids` holds `capacity` elements.
            unsafe {
                sys::gannet_tokenize(
                    self.as_raw(),
                    text.as_ptr().cast::<c_char>(),
                    text.len(),
                    i32::from(add_special_tokens),
                    ids,
                    capacity,
                    n,
                )
            }
        })
    }

    /// Token ids to bytes (a prefix of a sequence may end inside a character).
    /// `skip_special_tokens` drops `<bos>`, `<|turn>` and the like.
    pub fn detokenize_bytes(&self, ids: &[i32], skip_special_tokens: bool) -> Result<Vec<u8>> {
        fill(ids.len() * 8 + 16, |text: *mut u8, capacity, n| {
            // SAFETY: `ids` is valid for its length; `text` holds `capacity` bytes.
            unsafe {
                sys::gannet_detokenize(
                    self.as_raw(),
                    ids.as_ptr(),
                    ids.len(),
                    i32::from(skip_special_tokens),
                    text.cast::<c_char>(),
                    capacity,
                    n,
                )
            }
        })
    }

    /// Token ids to text; bytes that are not valid UTF-8 (a sequence cut inside a character)
    /// become U+FFFD (use [`Tokenizer::detokenize_bytes`] to keep them).
    pub fn detokenize(&self, ids: &[i32], skip_special_tokens: bool) -> Result<String> {
        self.detokenize_bytes(ids, skip_special_tokens)
            .map(into_string)
    }

    /// The bytes one token contributes when decoded alone: a byte token gives its raw byte,
    /// which alone may not be valid UTF-8.
    pub fn token_to_piece(&self, id: i32) -> Result<Vec<u8>> {
        fill(32, |text: *mut u8, capacity, n| {
            // SAFETY: `text` holds `capacity` bytes.
            unsafe {
                sys::gannet_token_to_piece(self.as_raw(), id, text.cast::<c_char>(), capacity, n)
            }
        })
    }

    /// Renders chat messages into the prompt text the engine would build for them (Gemma-4's
    /// template for this model's size class). It starts with `<bos>`: tokenize it with
    /// `add_special_tokens = false` to get the ids the engine would run.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        enable_thinking: bool,
    ) -> Result<String> {
        let raw = RawMessages::new(messages)?;
        let guess = messages
            .iter()
            .map(|m| m.role.len() + m.content.len() + 32)
            .sum::<usize>()
            + 64;
        fill(guess, |text: *mut u8, capacity, n| {
            // SAFETY: the messages (struct_size set) and their strings live in `raw`; `text`
            // holds `capacity` bytes.
            unsafe {
                sys::gannet_apply_chat_template(
                    self.as_raw(),
                    raw.as_slice().as_ptr(),
                    raw.as_slice().len(),
                    i32::from(add_generation_prompt),
                    i32::from(enable_thinking),
                    text.cast::<c_char>(),
                    capacity,
                    n,
                )
            }
        })
        .map(into_string)
    }
}

impl Drop for Tokenizer<'_> {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: opened by Tokenizer::open and used by nothing else now.
            unsafe { sys::gannet_tokenizer_close(self.raw.as_ptr()) };
        }
    }
}

impl fmt::Debug for Tokenizer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("raw", &self.raw)
            .field("owned", &self.owned)
            .finish()
    }
}

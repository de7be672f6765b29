//! The safe API against the tiny checkpoints of tests/data/tiny (CPU backend, random weights).
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

use gannet::{
    Engine, EventKind, FinishReason, Image, LogLevel, Message, Request, Seed, Status, Tokenizer,
    TpId,
};

fn tiny(variant: &str) -> PathBuf {
    // The library logs loading details at info level; keep test output to problems.
    if std::env::var_os("GANNET_LOG_LEVEL").is_none() {
        gannet::set_log_level(LogLevel::Warning);
    }
    let data = std::env::var_os("GANNET_TEST_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/data"),
        PathBuf::from,
    );
    data.join("tiny").join(variant)
}

fn engine(variant: &str) -> Engine {
    Engine::builder(tiny(variant))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .build()
        .expect("the tiny model loads")
}

const PROMPT: [i32; 6] = [2, 120, 130, 140, 150, 160];

fn greedy(n: u32) -> Request {
    Request::tokens(PROMPT.to_vec())
        .max_tokens(n)
        .ignore_default_stop_tokens(true)
}

#[test]
fn stream_and_engine_events_agree() {
    let engine = engine("31b");
    let alone = engine.stream(&greedy(8)).unwrap().wait().unwrap();
    assert_eq!(alone.tokens.len(), 8);
    assert_eq!(alone.finish, FinishReason::Length);
    assert_eq!(alone.usage.prompt_tokens, PROMPT.len() as i32);
    assert_eq!(alone.usage.generated_tokens, 8);

    // The same request twice through submit + events: same greedy tokens, in order per id.
    let a = engine.submit(&greedy(8)).unwrap();
    let b = engine.submit(&greedy(8)).unwrap();
    let (mut ta, mut tb, mut finishes) = (Vec::new(), Vec::new(), 0);
    for event in engine.events() {
        let event = event.unwrap();
        let tokens = if event.request_id == a {
            &mut ta
        } else {
            &mut tb
        };
        assert!(event.request_id == a || event.request_id == b);
        match event.kind {
            EventKind::Token { token_id, .. } => tokens.push(token_id),
            EventKind::Finish { reason, .. } => {
                assert_eq!(reason, FinishReason::Length);
                finishes += 1;
            }
            EventKind::Error { error, .. } => panic!("unexpected error {error}"),
        }
    }
    assert_eq!(finishes, 2);
    assert_eq!(ta, alone.tokens);
    assert_eq!(tb, alone.tokens);
    assert!(engine.poll(Duration::ZERO).unwrap().is_empty());
}

#[test]
fn streams_on_several_threads_share_one_engine() {
    let engine = engine("e4b");
    let expected = engine.stream(&greedy(6)).unwrap().wait().unwrap().tokens;
    let outputs: Vec<Vec<i32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| engine.stream(&greedy(6)).unwrap().wait().unwrap().tokens))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for tokens in outputs {
        assert_eq!(tokens, expected);
    }
}

#[test]
fn dropping_a_stream_cancels_it_and_cancel_finishes_cancelled() {
    let engine = engine("31b");
    {
        let mut stream = engine.stream(&greedy(200)).unwrap();
        assert!(stream.next().is_some());
    } // dropped after one event: cancelled, its later events discarded
    let after = engine.stream(&greedy(4)).unwrap().wait().unwrap();
    assert_eq!(after.tokens.len(), 4);

    let stream = engine.stream(&greedy(200)).unwrap();
    stream.cancel().unwrap();
    let done = stream.wait().unwrap();
    assert_eq!(done.finish, FinishReason::Cancelled);
    assert!(done.tokens.len() < 200);
    // Nothing of the abandoned or cancelled requests leaks to the engine-wide queue.
    assert!(engine.poll(Duration::from_millis(50)).unwrap().is_empty());
}

#[test]
fn errors_carry_status_and_message() {
    let err = Engine::builder(tiny("does-not-exist"))
        .backend("cpu")
        .build()
        .unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    assert!(err.message().contains("does-not-exist"), "{err}");
    // A prompt budget while decoding above the step budget names both.
    let err = Engine::builder(tiny("31b"))
        .backend("cpu")
        .max_step_tokens(64)
        .max_prefill_tokens_while_decoding(65)
        .build()
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(
        err.message()
            .contains("max_prefill_tokens_while_decoding (65)"),
        "{err}"
    );

    let engine = engine("31b");
    // Rejected at submit: a bad sampling value.
    let err = engine.submit(&greedy(4).temperature(-1.0)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("temperature"), "{err}");
    assert_eq!(
        err.to_string(),
        format!("GANNET_ERR_INVALID_ARGUMENT: {}", err.message())
    );
    // A NUL byte cannot cross the C ABI.
    let err = engine.submit(&Request::text("a\0b")).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    // Found later: a token outside the vocabulary is an error event of that request only.
    let err = engine
        .stream(&Request::tokens(vec![2, 1 << 30]).max_tokens(4))
        .unwrap()
        .wait()
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(!err.message().is_empty());
}

#[test]
fn tensor_parallel_on_cpu_threads() {
    // The tiny 31b model has 4 attention heads: 3 ranks cannot split them.
    let err = Engine::builder(tiny("31b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .tensor_parallel_size(3)
        .build()
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    assert!(err.message().contains("num_attention_heads"), "{err}");
    // 2 ranks (threads on the CPU backend) load it and generate.
    let engine = Engine::builder(tiny("31b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .tensor_parallel_size(2)
        .build()
        .expect("the tiny model loads over 2 ranks");
    let done = engine.stream(&greedy(8)).unwrap().wait().unwrap();
    assert_eq!(done.tokens.len(), 8);
    assert_eq!(done.finish, FinishReason::Length);
    assert_eq!(done.usage.prompt_tokens, PROMPT.len() as i32);
}

#[test]
fn multi_process_tensor_parallel_arguments() {
    // A normal engine serves requests itself: serve has nothing to wait for.
    let engine = engine("31b");
    for timeout in [None, Some(Duration::ZERO), Some(Duration::from_millis(10))] {
        let err = engine.serve(timeout).unwrap_err();
        assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    }
    // ... and still does.
    let done = engine.stream(&greedy(4)).unwrap().wait().unwrap();
    assert_eq!(done.tokens.len(), 4);

    let err = TpId::from_bytes(&[1, 2, 3, 4, 5]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    let bytes: Vec<u8> = (0..128).map(|i| i as u8).collect();
    let id = TpId::from_bytes(&bytes).unwrap();
    assert_eq!(id.as_bytes(), &bytes[..]);
    // A real id needs NCCL; a build without it says so.
    match TpId::create() {
        Ok(id) => assert!(id.as_bytes().iter().any(|&b| b != 0), "{id:?}"),
        Err(err) => assert_eq!(err.status(), Status::Unimplemented, "{err}"),
    }
    // A rank outside the group is refused before anything loads.
    let err = Engine::builder(tiny("31b"))
        .backend("cpu")
        .tensor_parallel_size(2)
        .tp_rank(2)
        .tp_id(id)
        .build()
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    assert!(err.message().contains("tp_rank"), "{err}");
}

#[test]
fn chat_text_stats_and_info() {
    let info = gannet::model_info(tiny("e4b")).unwrap();
    // A tiny checkpoint is no released model: its label says so, with its layout.
    assert!(
        info.variant().starts_with("gemma4 custom (") && info.variant().contains("ple"),
        "{}",
        info.variant()
    );
    assert!(info.num_layers > 0);

    let mut stages = Vec::new();
    let engine = Engine::builder(tiny("e4b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .progress(|p| stages.push((p.stage.to_string(), p.fraction, p.bytes_done, p.bytes_total)))
        .build()
        .unwrap();
    assert!(!stages.is_empty(), "no load progress reported");
    let (stage, fraction, done, total) = stages.last().unwrap().clone();
    assert!(!stage.is_empty());
    assert!((0.0..=1.0).contains(&fraction));
    assert!(
        done >= 0 && done <= total && total > 0,
        "{done} of {total} bytes"
    );
    let chat = Request::chat([Message::system("Be brief."), Message::user("Hello there")]);
    let done = engine
        .stream(&chat.clone().max_tokens(8))
        .unwrap()
        .wait()
        .unwrap();
    assert!(!done.tokens.is_empty());
    let text = engine
        .stream(&Request::text("The quick brown fox").max_tokens(8))
        .unwrap()
        .wait()
        .unwrap();
    assert!(!text.tokens.is_empty());
    // Steps are counted after their events go out: the last step may not be in yet.
    let stats = engine.stats().unwrap();
    assert!(stats.num_steps > 0 && stats.total_generated_tokens >= done.tokens.len() as i64);
    // The fields ABI 0.2 added.
    assert_eq!(stats.backend(), "cpu");
    assert_eq!(stats.device_id, -1);
    assert!(!stats.device_name().is_empty());
    assert_eq!(
        stats.backend_fallback(),
        "",
        "the backend was chosen explicitly"
    );
    assert!(stats.max_running_seqs > 0);
    assert!(stats.kv_bytes > 0 && stats.weight_bytes > 0);
    assert!(stats.device_memory_bytes > stats.kv_bytes);
    assert!(stats.load_seconds > 0.0 && stats.load_time() > Duration::ZERO);
    assert_eq!(stats.max_model_len, 256);
}

#[test]
fn version_queries_match_the_bindings() {
    assert_eq!(gannet::abi_version(), gannet::sys::GANNET_ABI_VERSION);
    assert_eq!(gannet::version_code(), gannet::sys::GANNET_VERSION_CODE);
    assert_eq!(gannet::version(), "0.2.0");
    gannet::check_abi().unwrap();
}

#[test]
fn progress_can_abort_the_load() {
    let mut calls = 0;
    let err = Engine::builder(tiny("e2b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .progress(|_| {
            calls += 1;
            ControlFlow::Break(())
        })
        .build()
        .unwrap_err();
    assert_eq!(err.status(), Status::Cancelled, "{err}");
    assert_eq!(calls, 1, "the load went on after the abort");
    // Nothing is left behind: the same model loads afterwards.
    let engine = Engine::builder(tiny("e2b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .progress(|_| ControlFlow::Continue(()))
        .build()
        .unwrap();
    assert_eq!(
        engine
            .stream(&greedy(2))
            .unwrap()
            .wait()
            .unwrap()
            .tokens
            .len(),
        2
    );
}

#[test]
fn request_check_needs_no_engine() {
    let info = gannet::model_info(tiny("31b")).unwrap();
    greedy(4).check(None).unwrap();
    greedy(4).check(Some(&info)).unwrap();
    Request::text("hello").check(Some(&info)).unwrap();
    // Bad sampling values fail without a model.
    let err = greedy(4).temperature(-1.0).check(None).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("temperature"), "{err}");
    let err = greedy(4).min_tokens(8).check(None).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    // Ids are checked against the model's vocabulary (submit only finds this later).
    let outside = Request::tokens(vec![2, 1 << 30]).max_tokens(4);
    outside.check(None).unwrap();
    let err = outside.check(Some(&info)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(!err.message().is_empty());
    // No prompt at all.
    let err = Request::tokens(Vec::new()).check(None).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[test]
fn tokenizer_round_trip_and_info() {
    let tokenizer = Tokenizer::open(tiny("e4b")).unwrap();
    let info = tokenizer.info().unwrap();
    let model = gannet::model_info(tiny("e4b")).unwrap();
    assert!(info.vocab_size > 0 && i64::from(info.vocab_size) <= model.vocab_size);
    let bos = info.bos_id.expect("Gemma has <bos>");
    assert!(info.eos_id.is_some() && info.end_of_turn_id.is_some());

    let text = "The quick brown fox jumps over the lazy dog. Grüße, 世界!";
    let ids = tokenizer.tokenize(text, false).unwrap();
    assert!(!ids.is_empty() && ids.len() <= text.len());
    assert!(ids.iter().all(|&id| id >= 0 && id < info.vocab_size));
    assert_eq!(tokenizer.detokenize(&ids, false).unwrap(), text);
    let with_bos = tokenizer.tokenize(text, true).unwrap();
    assert_eq!(with_bos[0], bos);
    assert_eq!(&with_bos[1..], &ids[..]);
    assert_eq!(tokenizer.detokenize(&with_bos, true).unwrap(), text);
    // The pieces of the tokens are the text.
    let pieces: Vec<u8> = ids
        .iter()
        .flat_map(|&id| tokenizer.token_to_piece(id).unwrap())
        .collect();
    assert_eq!(String::from_utf8(pieces).unwrap(), text);
    // Long text: the first buffer guess is too small and the call is repeated.
    let long = "ab ".repeat(5000);
    let ids = tokenizer.tokenize(&long, false).unwrap();
    assert_eq!(tokenizer.detokenize(&ids, false).unwrap(), long);
    assert!(tokenizer.tokenize("", false).unwrap().is_empty());
    assert_eq!(tokenizer.detokenize(&[], false).unwrap(), "");

    // A folder without tokenizer.json.
    let err = Tokenizer::open(tiny("does-not-exist")).unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    // A tokenizer may be used from several threads at once.
    let expected = tokenizer.tokenize(text, true).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| assert_eq!(tokenizer.tokenize(text, true).unwrap(), expected));
        }
    });
}

#[test]
fn chat_template_is_what_the_engine_runs() {
    let engine = engine("e4b");
    let messages = [
        Message::system("Be brief."),
        Message::user("Hello there, who are you?"),
    ];
    let tokenizer = engine.tokenizer().unwrap();
    let prompt = tokenizer
        .apply_chat_template(&messages, true, false)
        .unwrap();
    assert!(prompt.starts_with("<bos>"), "{prompt}");
    assert!(prompt.contains("Hello there, who are you?"));
    let ids = tokenizer.tokenize(&prompt, false).unwrap();
    let done = engine
        .stream(&Request::chat(messages.clone()).max_tokens(1))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(done.usage.prompt_tokens as usize, ids.len());
    // The rendered text as a text prompt is the same prompt.
    let same = engine
        .stream(&Request::text(prompt.clone()).max_tokens(1))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(same.usage.prompt_tokens as usize, ids.len());
    assert_eq!(same.tokens, done.tokens);
    // Without the generation prompt the text is a prefix of the one with it.
    let open = tokenizer
        .apply_chat_template(&messages, false, false)
        .unwrap();
    assert!(prompt.starts_with(&open) && open.len() < prompt.len());
    let done = engine
        .stream(
            &Request::chat(messages.clone())
                .generation_prompt(false)
                .max_tokens(1),
        )
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        done.usage.prompt_tokens as usize,
        tokenizer.tokenize(&open, false).unwrap().len()
    );
    // The engine's tokenizer and one opened from the folder agree.
    let opened = Tokenizer::open(tiny("e4b")).unwrap();
    assert_eq!(
        opened.apply_chat_template(&messages, true, false).unwrap(),
        prompt
    );
    assert_eq!(opened.info().unwrap(), tokenizer.info().unwrap());
}

#[test]
fn seeds_fixed_request_id_and_random() {
    let engine = engine("e2b");
    let sampled = |seeding: Seed| greedy(12).temperature(1.0).seeding(seeding);
    let run = |r: &Request| engine.stream(r).unwrap().wait().unwrap().tokens;
    let a = run(&sampled(Seed::Fixed(1234)));
    assert_eq!(a.len(), 12);
    assert_eq!(run(&greedy(12).temperature(1.0).seed(1234)), a);
    assert_ne!(
        run(&sampled(Seed::Fixed(4321))),
        a,
        "another seed, the same tokens"
    );
    assert_eq!(run(&sampled(Seed::RequestId)).len(), 12);
    // Unseeded sampling draws fresh entropy: three runs are not all the same.
    let random: Vec<Vec<i32>> = (0..3).map(|_| run(&sampled(Seed::Random))).collect();
    assert!(
        random.iter().any(|r| *r != random[0]),
        "unseeded sampling repeated itself: {random:?}"
    );
}

#[test]
fn speculative_decoding_with_the_assistant() {
    let plain = engine("e4b").stream(&greedy(12)).unwrap().wait().unwrap();
    assert_eq!(
        (plain.usage.draft_tokens, plain.usage.accepted_draft_tokens),
        (0, 0)
    );

    let engine = Engine::builder(tiny("e4b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .draft_model(tiny("e4b-assistant"))
        .speculative_tokens(2)
        .build()
        .expect("the tiny model loads with its assistant");
    // Greedy output is token for token the same as without drafts.
    let spec = engine.stream(&greedy(12)).unwrap().wait().unwrap();
    assert_eq!(spec.tokens, plain.tokens);
    assert_eq!(spec.finish, FinishReason::Length);
    assert!(spec.usage.draft_tokens > 0, "{:?}", spec.usage);
    assert!(spec.usage.accepted_draft_tokens <= spec.usage.draft_tokens);
    // A request may opt out.
    let off = engine
        .stream(&greedy(12).speculation(false))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(off.tokens, plain.tokens);
    assert_eq!(
        (off.usage.draft_tokens, off.usage.accepted_draft_tokens),
        (0, 0)
    );

    let stats = engine.stats().unwrap();
    assert!(stats.speculative());
    assert_eq!(stats.num_speculative_tokens, 2);
    assert!(stats.spec_draft_tokens >= i64::from(spec.usage.draft_tokens));
    assert!(stats.spec_accepted_tokens <= stats.spec_draft_tokens);
    assert!(stats.spec_verify_chunks > 0 && stats.spec_draft_rounds > 0);
    assert!(stats.spec_mean_accepted_length >= 1.0);
    assert!((0.0..=1.0).contains(&stats.spec_acceptance_rate()));

    // Without a draft model the counters are zero.
    let stats = Engine::builder(tiny("e2b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .build()
        .unwrap()
        .stats()
        .unwrap();
    assert!(!stats.speculative());
    assert_eq!((stats.spec_draft_tokens, stats.spec_draft_rounds), (0, 0));
    assert_eq!(stats.spec_acceptance_rate(), 0.0);

    // K outside 1..8 is refused at create.
    let err = Engine::builder(tiny("e4b"))
        .backend("cpu")
        .threads(1)
        .draft_model(tiny("e4b-assistant"))
        .speculative_tokens(9)
        .build()
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
}

/// An image in a chat message gives HF's greedy tokens (tests/data/golden/mm-api.json, written by
/// tools/golden/mm_api_golden.py); a truncated one is refused naming it.
#[test]
fn an_image_in_a_chat_answers_as_hf() {
    let data = tiny("mm-api").join("../..");
    let png = std::fs::read(data.join("images/palette_50x30.png")).unwrap();
    let engine = engine("mm-api");
    let chat = |image: Image| {
        Request::chat([Message::user("<|image|>What is in this picture?")])
            .image(image.max_soft_tokens(70))
            .max_tokens(16)
            .ignore_default_stop_tokens(true)
    };
    let done = engine
        .stream(&chat(Image::encoded(png.clone())))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        done.tokens,
        [476, 73, 490, 461, 461, 429, 369, 392, 418, 413, 369, 272, 424, 484, 57, 57]
    );
    assert_eq!(done.usage.prompt_tokens, 102);
    let err = engine
        .stream(&chat(Image::encoded(png[..100].to_vec())))
        .err()
        .expect("a truncated PNG is refused");
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("images[0]"), "{}", err.message());
    let short = chat(Image::rgb(vec![0u8; 5], 2, 2)).check(None).unwrap_err();
    assert_eq!(short.status(), Status::InvalidArgument);
}


//! The safe API against the tiny checkpoints of tests/data/tiny (CPU backend, random weights).
use std::path::PathBuf;
use std::time::Duration;

use gannet::{Engine, EventKind, FinishReason, LogLevel, Message, Request, Status};

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
fn chat_text_stats_and_info() {
    let info = gannet::model_info(tiny("e4b")).unwrap();
    assert!(info.variant().contains("e4b"), "{}", info.variant());
    assert!(info.num_layers > 0);

    let mut stages = Vec::new();
    let engine = Engine::builder(tiny("e4b"))
        .backend("cpu")
        .threads(1)
        .max_model_len(256)
        .progress(|stage, fraction| stages.push((stage.to_string(), fraction)))
        .build()
        .unwrap();
    assert!(!stages.is_empty(), "no load progress reported");
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
    assert!(!gannet::version().is_empty());
}

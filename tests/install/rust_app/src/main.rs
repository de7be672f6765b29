//! Prints what `gannet generate -m MODEL --chat -p PROMPT -n N -q` prints (greedy), like
//! examples/c/minimal.c. usage: gannet-install-app MODEL PROMPT N
use gannet::{Engine, EventKind, Message, Request};
use std::io::Write;

fn main() -> Result<(), gannet::Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: {} MODEL PROMPT N", args[0]);
        std::process::exit(2);
    }
    let n: u32 = args[3].parse().expect("N must be a number");
    let engine = Engine::open(&args[1])?;
    let request = Request::chat([Message::user(args[2].as_str())]).max_tokens(n);
    let mut out = std::io::stdout();
    for event in engine.stream(&request)? {
        out.write_all(event.text.as_bytes()).unwrap();
        if let EventKind::Error { error, .. } = event.kind {
            return Err(error);
        }
    }
    writeln!(out).unwrap();
    Ok(())
}

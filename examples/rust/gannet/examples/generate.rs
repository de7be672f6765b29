//! Greedy generation with the safe Rust API: the text streams to stdout as it is generated.
//! Its stdout is the same as the CLI's for the same flags with `-q`, e.g.
//!   generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids
//!   gannet generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids -q
use std::io::Write;
use std::process::ExitCode;

use gannet::{Engine, EventKind, LogLevel, Message, Request};

const USAGE: &str = "usage: generate -m MODEL_DIR (-p PROMPT | --prompt-ids IDS) [options]
  -p, --prompt TEXT      the prompt (UTF-8)
  --prompt-ids IDS       the prompt as comma-separated token ids
  --chat                 treat the prompt as a user message (Gemma-4 chat template)
  -s, --system TEXT      system message (implies --chat)
  -n, --max-tokens N     tokens to generate (default 128)
  --ignore-eos           do not stop at <eos>/<turn|>
  --ids                  also print the generated token ids (one line)
  --backend NAME         cpu or cuda (default: cuda when a GPU is usable)
  --threads N            CPU backend threads (default: all cores)";

#[derive(Default)]
struct Args {
    model: String,
    prompt: Option<String>,
    prompt_ids: Option<Vec<i32>>,
    chat: bool,
    system: Option<String>,
    max_tokens: u32,
    ignore_eos: bool,
    ids: bool,
    backend: Option<String>,
    threads: u32,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        max_tokens: 128,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match flag.as_str() {
            "-m" | "--model" => args.model = value("--model")?,
            "-p" | "--prompt" => args.prompt = Some(value("--prompt")?),
            "--prompt-ids" => {
                let ids = value("--prompt-ids")?
                    .split(',')
                    .map(|s| s.trim().parse::<i32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| "--prompt-ids expects ids like 2,108,109".to_string())?;
                args.prompt_ids = Some(ids);
            }
            "--chat" => args.chat = true,
            "-s" | "--system" => args.system = Some(value("--system")?),
            "-n" | "--max-tokens" => {
                args.max_tokens = value("--max-tokens")?
                    .parse()
                    .map_err(|_| "--max-tokens expects a non-negative integer".to_string())?
            }
            "--ignore-eos" => args.ignore_eos = true,
            "--ids" => args.ids = true,
            "--backend" => args.backend = Some(value("--backend")?),
            "--threads" => {
                args.threads = value("--threads")?
                    .parse()
                    .map_err(|_| "--threads expects a non-negative integer".to_string())?
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if args.model.is_empty() {
        return Err("no model: pass -m MODEL_DIR".into());
    }
    if args.prompt.is_some() == args.prompt_ids.is_some() {
        return Err("pass exactly one of -p PROMPT and --prompt-ids IDS".into());
    }
    Ok(args)
}

fn build_request(args: &Args) -> Request {
    let request = if let Some(ids) = &args.prompt_ids {
        Request::tokens(ids.clone())
    } else {
        let prompt = args.prompt.clone().unwrap_or_default();
        if args.chat || args.system.is_some() {
            let mut messages = Vec::new();
            if let Some(system) = args.system.as_ref().filter(|s| !s.is_empty()) {
                messages.push(Message::system(system.clone()));
            }
            messages.push(Message::user(prompt));
            Request::chat(messages)
        } else {
            Request::text(prompt)
        }
    };
    request
        .max_tokens(args.max_tokens)
        .ignore_default_stop_tokens(args.ignore_eos)
}

fn run(args: &Args) -> Result<(), gannet::Error> {
    let mut builder = Engine::builder(&args.model).threads(args.threads);
    if let Some(backend) = &args.backend {
        builder = builder.backend(backend.clone());
    }
    let engine = builder.build()?;
    let mut stdout = std::io::stdout().lock();
    let mut tokens = Vec::new();
    let mut printed = false;
    for event in engine.stream(&build_request(args))? {
        printed |= !event.text.is_empty();
        // A closed stdout (a pipe into `head`) is not an engine error; stop quietly.
        if stdout
            .write_all(event.text.as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return Ok(());
        }
        match event.kind {
            EventKind::Token { token_id, .. } => tokens.push(token_id),
            EventKind::Finish { .. } => break,
            EventKind::Error { error, .. } => {
                if printed {
                    let _ = writeln!(stdout);
                }
                return Err(error);
            }
        }
    }
    let _ = writeln!(stdout);
    if args.ids {
        let ids: Vec<String> = tokens.iter().map(i32::to_string).collect();
        let _ = writeln!(stdout, "{}", ids.join(" "));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("generate: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // The library logs to stderr; keep it to warnings and errors unless asked, like the CLI.
    if std::env::var_os("GANNET_LOG_LEVEL").is_none() {
        gannet::set_log_level(LogLevel::Warning);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("generate: {error}");
            ExitCode::FAILURE
        }
    }
}

//! One request with the safe Rust API: the text streams to stdout as it is generated. It takes
//! the flags of `gannet generate` that shape a request (spelled and range-checked as the CLI
//! does) and its stdout is the CLI's with `-q`, e.g.
//!   generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids
//!   gannet generate -m tests/data/tiny/e4b --chat -p "Hello" -n 16 --ids -q
//! Like the CLI it checks the request against the model before loading any weight.
use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::str::FromStr;

use gannet::{Engine, EngineBuilder, EventKind, LogLevel, Message, Request};

struct Flag {
    name: &'static str,
    short: Option<char>,
    takes_value: bool,
    repeatable: bool,
    value_name: &'static str,
    help: &'static str,
    aliases: &'static [&'static str],
}

const fn flag(
    name: &'static str,
    short: Option<char>,
    value_name: &'static str,
    help: &'static str,
) -> Flag {
    Flag {
        name,
        short,
        takes_value: !value_name.is_empty(),
        repeatable: false,
        value_name,
        help,
        aliases: &[],
    }
}

#[rustfmt::skip]
const FLAGS: &[Flag] = &[
    flag("model", Some('m'), "DIR", "checkpoint folder (config.json, safetensors, tokenizer.json) or dummy:VARIANT"),
    flag("backend", None, "NAME", "cpu or cuda (default: cuda when a GPU is usable)"),
    flag("device", None, "N", "CUDA device ordinal (default 0)"),
    flag("threads", Some('t'), "N", "CPU backend threads (default: all cores; at most 1024)"),
    Flag { aliases: &["max-model-len"], ..flag("ctx-size", Some('c'), "N", "longest sequence in tokens") },
    Flag { aliases: &["draft-model"], ..flag("draft", None, "DIR", "speculative decoding with this MTP assistant (folder or dummy:VARIANT-assistant)") },
    flag("spec-tokens", None, "N", "drafts per round with --draft, 1 to 8 (default 3)"),
    flag("no-spec", None, "", "decode this request without drafts (with --draft)"),
    Flag { aliases: &["n-predict"], ..flag("max-tokens", Some('n'), "N", "tokens to generate (default 128; 0 = until the context is full)") },
    flag("min-tokens", None, "N", "generate at least N tokens before stopping"),
    Flag { aliases: &["temp"], ..flag("temperature", None, "T", "0 = greedy (default), else sample") },
    flag("top-k", None, "K", "sample from the K most likely tokens (0 = off)"),
    flag("top-p", None, "P", "nucleus sampling threshold in (0, 1] (0 or 1 = off)"),
    flag("min-p", None, "P", "drop tokens below P x the top probability"),
    Flag { aliases: &["repeat-penalty"], ..flag("repetition-penalty", None, "R", "penalise tokens seen in prompt and output") },
    flag("presence-penalty", None, "X", "subtract X from seen output tokens"),
    flag("frequency-penalty", None, "X", "subtract X per occurrence in the output"),
    flag("seed", Some('s'), "S", "sampling seed: repeatable output (default: random)"),
    Flag { repeatable: true, ..flag("stop", None, "STR", "stop when STR appears (repeatable)") },
    Flag { repeatable: true, ..flag("stop-id", None, "ID", "stop at this token id (repeatable)") },
    flag("ignore-eos", None, "", "do not stop at <eos>/<turn|>"),
    flag("prompt", Some('p'), "TEXT", "the prompt (UTF-8)"),
    flag("prompt-ids", None, "IDS", "the prompt as comma-separated token ids"),
    flag("chat", None, "", "treat the prompt as a user message (Gemma-4 chat template)"),
    Flag { aliases: &["system-prompt"], ..flag("system", None, "TEXT", "system message (implies --chat)") },
    flag("thinking", None, "", "chat: enable thinking mode"),
    flag("ids", None, "", "also print the generated token ids (one line)"),
    flag("quiet", Some('q'), "", "accepted for the CLI's sake (this example prints no statistics)"),
    flag("help", Some('h'), "", "this help"),
];

fn usage() -> String {
    let mut out = String::from(
        "usage: generate -m MODEL_DIR (-p PROMPT | --prompt-ids IDS) [options]\n\noptions:\n",
    );
    for f in FLAGS {
        let mut left = match f.short {
            Some(c) => format!("  -{c}, --{}", f.name),
            None => format!("      --{}", f.name),
        };
        if f.takes_value {
            left = format!("{left} {}", f.value_name);
        }
        out += &format!("{left:<30}{}\n", f.help);
    }
    out
}

/// The CLI's rules: `--flag value`, `--flag=value` and `-x value` only; unknown flags,
/// repeated flags and positional arguments are errors.
struct Args {
    values: HashMap<&'static str, Vec<String>>,
}

impl Args {
    fn parse(argv: &[String]) -> Result<Args, String> {
        let mut values: HashMap<&'static str, Vec<String>> = HashMap::new();
        let mut it = argv.iter();
        while let Some(a) = it.next() {
            let (spec, inline) = if let Some(long) = a.strip_prefix("--").filter(|s| !s.is_empty())
            {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let spec = FLAGS
                    .iter()
                    .find(|f| f.name == name || f.aliases.contains(&name))
                    .ok_or(format!("unknown option --{name}"))?;
                (spec, inline)
            } else if a.len() == 2 && a.starts_with('-') && a != "--" {
                let c = a.chars().nth(1).unwrap();
                let spec = FLAGS
                    .iter()
                    .find(|f| f.short == Some(c))
                    .ok_or(format!("unknown option {a}"))?;
                (spec, None)
            } else if a.starts_with('-') && a.len() > 2 {
                return Err(format!("unknown option {a}"));
            } else {
                return Err(format!(
                    "unexpected argument '{a}' (every value follows its flag; quote a prompt and \
                     pass it with -p)"
                ));
            };
            let value = match (spec.takes_value, inline) {
                (true, Some(v)) => v,
                (true, None) => it.next().cloned().ok_or(format!(
                    "option --{} needs a value ({})",
                    spec.name, spec.value_name
                ))?,
                (false, Some(_)) => return Err(format!("option --{} takes no value", spec.name)),
                (false, None) => String::new(),
            };
            let slot = values.entry(spec.name).or_default();
            if !slot.is_empty() && !spec.repeatable {
                return Err(format!("option --{} given twice", spec.name));
            }
            slot.push(value);
        }
        Ok(Args { values })
    }

    fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    fn all(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// A number in [min, max], or None when the flag is absent.
    fn number<T: FromStr + PartialOrd + std::fmt::Display + Copy>(
        &self,
        name: &str,
        min: T,
        max: T,
    ) -> Result<Option<T>, String> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        match v.parse::<T>() {
            Ok(x) if x >= min && x <= max && !v.starts_with('+') => Ok(Some(x)),
            _ => Err(format!(
                "option --{name} expects a number in [{min}, {max}], got '{v}'"
            )),
        }
    }

    fn float(&self, name: &str, min: f64, max: f64) -> Result<Option<f32>, String> {
        match self.number::<f64>(name, min, max)? {
            Some(x) if x.is_finite() => Ok(Some(x as f32)),
            Some(_) => Err(format!("option --{name} expects a finite number")),
            None => Ok(None),
        }
    }
}

fn parse_ids(s: &str) -> Option<Vec<i32>> {
    let ids: Option<Vec<i32>> = s
        .split(',')
        .map(|item| {
            let ok = !item.is_empty() && item.bytes().all(|b| b.is_ascii_digit());
            ok.then(|| item.parse::<i32>().ok()).flatten()
        })
        .collect();
    ids.filter(|ids| !ids.is_empty())
}

/// The request the flags describe (as `gannet generate` builds it).
fn build_request(args: &Args) -> Result<Request, String> {
    if args.has("prompt") && args.has("prompt-ids") {
        return Err("give the prompt once: -p TEXT or --prompt-ids IDS, not both".into());
    }
    let chat = args.has("chat") || args.has("system");
    let mut request =
        if let Some(ids) = args.get("prompt-ids") {
            if chat {
                return Err("--chat and --system need a text prompt, not --prompt-ids".into());
            }
            Request::tokens(parse_ids(ids).ok_or(
                "--prompt-ids expects comma-separated ids in [0, 2147483647] like 2,108,109",
            )?)
        } else {
            let prompt = args
                .get("prompt")
                .ok_or("no prompt: pass -p PROMPT or --prompt-ids IDS")?
                .to_string();
            if chat {
                let mut messages = Vec::new();
                if let Some(system) = args.get("system").filter(|s| !s.is_empty()) {
                    messages.push(Message::system(system));
                }
                messages.push(Message::user(prompt));
                Request::chat(messages).thinking(args.has("thinking"))
            } else {
                Request::text(prompt)
            }
        };
    let i32_max = i32::MAX as u32;
    request = request
        .max_tokens(args.number("max-tokens", 0, i32_max)?.unwrap_or(128))
        .min_tokens(args.number("min-tokens", 0, i32_max)?.unwrap_or(0))
        .temperature(args.float("temperature", 0.0, 100.0)?.unwrap_or(0.0))
        .top_k(args.number("top-k", 0, i32_max)?.unwrap_or(0))
        .top_p(args.float("top-p", 0.0, 1.0)?.unwrap_or(0.0))
        .min_p(args.float("min-p", 0.0, 1.0)?.unwrap_or(0.0))
        .repetition_penalty(args.float("repetition-penalty", 0.0, 100.0)?.unwrap_or(0.0))
        .presence_penalty(
            args.float("presence-penalty", -100.0, 100.0)?
                .unwrap_or(0.0),
        )
        .frequency_penalty(
            args.float("frequency-penalty", -100.0, 100.0)?
                .unwrap_or(0.0),
        )
        .ignore_default_stop_tokens(args.has("ignore-eos"))
        .speculation(!args.has("no-spec"));
    // No --seed: a random seed for every run, as the CLI does.
    if let Some(seed) = args.number("seed", 0, u64::MAX)? {
        request = request.seed(seed);
    }
    for stop in args.all("stop") {
        request = request.stop_string(stop.clone());
    }
    if !args.all("stop-id").is_empty() {
        let ids = args
            .all("stop-id")
            .iter()
            .map(|s| parse_ids(s).filter(|v| v.len() == 1).map(|v| v[0]))
            .collect::<Option<Vec<i32>>>()
            .ok_or("option --stop-id expects a token id in [0, 2147483647]")?;
        request = request.stop_token_ids(ids);
    }
    Ok(request)
}

/// The engine the flags describe (loaded later, once the request is known to be good).
fn engine_builder(args: &Args, model: &str) -> Result<EngineBuilder<'static>, String> {
    let mut builder = Engine::builder(model);
    if let Some(backend) = args.get("backend") {
        if backend != "cpu" && backend != "cuda" {
            return Err(format!(
                "option --backend expects cpu or cuda, got '{backend}'"
            ));
        }
        builder = builder.backend(backend);
    }
    if let Some(device) = args.number("device", 0u32, 1023)? {
        builder = builder.device_id(device);
    }
    if let Some(threads) = args.number("threads", 1u32, 1024)? {
        builder = builder.threads(threads);
    }
    if let Some(n) = args.number("ctx-size", 2u32, i32::MAX as u32)? {
        builder = builder.max_model_len(n);
    }
    // An empty --draft is no draft, as in the CLI.
    let draft = args.get("draft").filter(|d| !d.is_empty());
    if let Some(draft) = draft {
        builder = builder.draft_model(draft);
    }
    if let Some(k) = args.number("spec-tokens", 1u32, 8)? {
        if draft.is_none() {
            return Err("option --spec-tokens needs --draft DIR".into());
        }
        builder = builder.speculative_tokens(k);
    }
    Ok(builder)
}

/// Streams the request; the text goes to stdout, then a newline and (with --ids) the ids.
fn run(engine: &Engine, request: &Request, print_ids: bool) -> Result<(), gannet::Error> {
    let mut stdout = std::io::stdout().lock();
    let mut tokens = Vec::new();
    let mut printed = false;
    for event in engine.stream(request)? {
        printed |= !event.text.is_empty();
        // A closed stdout (a pipe into `head`) is not an engine error; stop quietly (dropping
        // the stream cancels the request).
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
    if print_ids {
        let ids: Vec<String> = tokens.iter().map(i32::to_string).collect();
        let _ = writeln!(stdout, "{}", ids.join(" "));
    }
    let _ = stdout.flush();
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let bad_usage = |message: &str| {
        eprintln!("generate: {message}\n(try `generate --help`)");
        ExitCode::from(2)
    };
    let args = match Args::parse(&argv) {
        Ok(args) => args,
        Err(message) => return bad_usage(&message),
    };
    if args.has("help") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some(model) = args.get("model") else {
        return bad_usage("no model: pass -m MODEL_DIR");
    };
    let (request, builder) = match build_request(&args)
        .and_then(|request| Ok((request, engine_builder(&args, model)?)))
    {
        Ok(parsed) => parsed,
        Err(message) => return bad_usage(&message),
    };
    // The library logs to stderr; keep it to warnings and errors unless asked, like the CLI.
    if std::env::var_os("GANNET_LOG_LEVEL").is_none() {
        gannet::set_log_level(LogLevel::Warning);
    }
    // Everything about the request is checked before any weight loads.
    let info = match gannet::model_info(model) {
        Ok(info) => info,
        Err(error) => {
            eprintln!("generate: cannot read the model: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = request.check(Some(&info)) {
        eprintln!("generate: {}", error.message());
        return ExitCode::from(2);
    }
    let engine = match builder.build() {
        Ok(engine) => engine,
        Err(error) => {
            eprintln!("generate: cannot load the model: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(&engine, &request, args.has("ids")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("generate: {error}");
            ExitCode::FAILURE
        }
    }
}

// gannet serve: an OpenAI-compatible HTTP server over the public C ABI (include/gannet/gannet.h),
// like any other embedding program. The port is served at once; /health answers 503 until the
// engine is created, then 200. `gannet serve ...` runs this binary (gannet-serve).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "examples/cli/request_flags.h"
#include "examples/server/chat_page.h"
#include "examples/server/completion.h"
#include "examples/server/gen_config.h"
#include "examples/server/hub.h"
#include "examples/server/tokenize_routes.h"

namespace gannet_server {
namespace {

const char kUsage[] =
    "usage: gannet serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY | "
    "--api-key-file F] [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions, /tokenize,\n"
    "/detokenize; GET /v1/models, /health, /metrics. Sampling flags (-t, --top-p, -n, ...) set\n"
    "the defaults of requests that do not give them, over the model's generation_config.json.\n"
    "\n";

std::vector<gannet_cli::FlagSpec> ServeFlags() {
  return {
      {"host", 0, true, false, "ADDR",
       "address to listen on (default 127.0.0.1; 0.0.0.0 = every interface)"},
      {"port", 0, true, false, "N", "TCP port (default 8080; 0 = any free port, printed at start)"},
      {"api-key", 0, true, false, "KEY",
       "require `Authorization: Bearer KEY` on /v1/*, /tokenize and /detokenize"},
      {"api-key-file", 0, true, false, "FILE",
       "as --api-key, the key read from FILE (first line), kept out of `ps`"},
      {"served-model-name", 0, true, false, "NAME",
       "the model's name in responses and /v1/models (default: the folder's name)"},
      {"max-body", 0, true, false, "SIZE",
       "largest request body, e.g. 16M (default); larger ones get 413"},
      {"max-queued", 0, true, false, "N",
       "unfinished requests the engine holds; more get 429 (default 4096)"},
      {"http-threads", 0, true, false, "N", "connections served at once (default 256)"},
      {"quiet", 'q', false, false, "", "no engine summary line"},
      {"help", 'h', false, false, "", "this help"},
  };
}

std::string BaseName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % (b.empty() ? 1 : b.size())];
  return diff == 0 && !b.empty();
}

gannet_engine_t* CreateEngine(const gannet_cli::EngineOptions& o, int32_t max_queued,
                              std::string* error) {
  gannet_engine_config_t config = gannet_cli::EngineConfigOf(o);
  config.max_queued_requests = max_queued;
  gannet_engine_t* engine = nullptr;
  if (gannet_engine_create(&config, &engine) != GANNET_OK) {
    *error = gannet_last_error_message();
    return nullptr;
  }
  return engine;
}

void SendJson(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

int Serve(int argc, char** argv) {
  gannet_cli::CommandStart start;
  if (auto code = gannet_cli::StartCommand("serve", kUsage, ServeFlags(), argc, argv, &start)) {
    return *code;
  }
  gannet_cli::Args& args = start.args;
  if (start.engine.has_tp_id) {
    return gannet_cli::UsageError("serve",
                                  "--tp-id (one process per rank) is not served yet; use --tp N");
  }
  // The generate flags that only make sense per request are refused, never silently ignored.
  for (const char* f : {"min-tokens", "presence-penalty", "frequency-penalty", "seed", "stop",
                        "stop-id", "ignore-eos", "no-spec"}) {
    if (args.Has(f)) {
      return gannet_cli::UsageError("serve", std::string("--") + f +
                                                 " is a per-request setting "
                                                 "for the server: give it in the request body");
    }
  }
  const std::string host = args.Get("host").value_or("127.0.0.1");
  const int port = static_cast<int>(args.GetInt("port", 8080, 0, 65535));
  const int64_t max_body = args.GetBytes("max-body", 16 << 20);
  const int32_t max_queued = static_cast<int32_t>(args.GetInt("max-queued", 0, 1, 1 << 20));
  const int http_threads = static_cast<int>(args.GetInt("http-threads", 256, 1, 4096));
  std::string api_key = args.Get("api-key").value_or("");
  if (auto f = args.Get("api-key-file")) {
    if (args.Has("api-key")) args.SetError("give --api-key or --api-key-file, not both");
    std::ifstream in(*f);
    if (!in || !std::getline(in, api_key) || api_key.empty()) {
      args.SetError("option --api-key-file: cannot read a key from '" + *f + "'");
    }
    while (!api_key.empty() && (api_key.back() == '\r' || api_key.back() == ' '))
      api_key.pop_back();
  }
  if (!args.error().empty()) return gannet_cli::UsageError("serve", args.error());

  ServerInfo info;
  info.model_name = args.Get("served-model-name").value_or(BaseName(start.engine.model_dir));
  info.created = static_cast<int64_t>(std::time(nullptr));
  const std::string gen_error = ReadGenerationConfig(start.engine.model_dir, &info.defaults);
  if (!gen_error.empty()) {
    std::fprintf(stderr, "gannet serve: %s\n", gen_error.c_str());
    return 1;
  }
  // Command-line sampling flags override the checkpoint's defaults.
  const gannet_request_t& flags = start.request;
  if (args.Has("temperature")) info.defaults.temperature = flags.temperature;
  if (args.Has("top-p")) info.defaults.top_p = flags.top_p;
  if (args.Has("top-k")) info.defaults.top_k = flags.top_k;
  if (args.Has("min-p")) info.defaults.min_p = flags.min_p;
  if (args.Has("repetition-penalty")) info.defaults.repetition_penalty = flags.repetition_penalty;
  if (args.Has("max-tokens")) info.defaults.max_tokens = flags.max_tokens;
  gannet_model_info_t model = GANNET_MODEL_INFO_INIT;
  if (gannet_model_info(start.engine.model_dir.c_str(), &model) != GANNET_OK) {
    std::fprintf(stderr, "gannet serve: cannot read the model: %s\n", gannet_last_error_message());
    return 1;
  }
  gannet_tokenizer_t* tokenizer = nullptr;
  if (model.has_tokenizer &&
      gannet_tokenizer_open(start.engine.model_dir.c_str(), &tokenizer) != GANNET_OK) {
    std::fprintf(stderr, "gannet serve: cannot read the tokenizer: %s\n",
                 gannet_last_error_message());
    return 1;
  }
  info.tokenizer = tokenizer;
  // Thinking is split from the answer by these two special tokens' ids.
  auto special_id = [&](const char* piece) -> int32_t {
    int32_t id = -1;
    size_t n = 0;
    if (tokenizer &&
        gannet_tokenize(tokenizer, piece, std::strlen(piece), 0, &id, 1, &n) == GANNET_OK &&
        n == 1) {
      return id;
    }
    return -1;
  };
  info.channel_open_id = special_id("<|channel>");
  info.channel_close_id = special_id("<channel|>");
  // Tool calls likewise (tool_calls.h).
  info.tool_ids.call_open = special_id("<|tool_call>");
  info.tool_ids.call_close = special_id("<tool_call|>");
  info.tool_ids.quote = special_id("<|\"|>");

  // SIGINT/SIGTERM end the server from a thread of their own (httplib's stop() is not
  // async-signal-safe); SIGPIPE from a vanished client must not kill the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Hub hub;
  httplib::Server svr;
  svr.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  svr.set_payload_max_length(static_cast<size_t>(max_body));
  svr.set_read_timeout(60, 0);
  svr.set_write_timeout(60, 0);
  std::atomic<int> active{0};

  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string& p = req.path;
    if (p.rfind("/v1/", 0) != 0 && p != "/tokenize" && p != "/detokenize") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0 && ConstantTimeEqual(auth.substr(7), api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SendError(res, ApiError{401, "missing or wrong API key (Authorization: Bearer KEY)",
                            "authentication_error", ""});
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 404) message = "no route " + req.method + " " + req.path;
    if (res.status == 413)
      message = "the body is larger than --max-body (" + std::to_string(max_body) + " bytes)";
    SendError(res, ApiError{res.status, message,
                            res.status >= 500 ? "server_error" : "invalid_request_error", ""});
  });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, ApiError{500, "internal error: " + what, "server_error", ""});
      });
  svr.set_logger([&](const httplib::Request&, const httplib::Response& res) {
    hub.metrics().RecordHttp(res.status);
  });

  // The chat page: public like /health (the page asks for the API key the /v1 calls need).
  svr.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = ChatPageHtml();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    if (hub.Ready()) return SendJson(res, 200, {{"status", "ok"}});
    SendJson(res, 503, {{"status", "loading"}});
  });
  svr.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
    nlohmann::json m = {{"id", info.model_name},
                        {"object", "model"},
                        {"created", info.created},
                        {"owned_by", "gannet"},
                        {"root", start.engine.model_dir}};
    if (hub.Ready() && gannet_engine_get_stats(hub.engine(), &s) == GANNET_OK) {
      m["max_model_len"] = s.max_model_len;
    }
    SendJson(res, 200, {{"object", "list"}, {"data", nlohmann::json::array({m})}});
  });
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
    const bool have = hub.Ready() && gannet_engine_get_stats(hub.engine(), &s) == GANNET_OK;
    res.set_content(hub.metrics().Render(have ? &s : nullptr, active.load()),
                    "text/plain; version=0.0.4");
  });
  auto completion = [&](Endpoint ep) {
    return [&, ep](const httplib::Request& req, httplib::Response& res) {
      ++active;
      std::shared_ptr<void> in_flight(nullptr, [&active](void*) { --active; });
      HandleCompletion(hub, info, ep, req, res, std::move(in_flight));
    };
  };
  svr.Post("/v1/chat/completions", completion(Endpoint::kChat));
  svr.Post("/v1/completions", completion(Endpoint::kCompletion));
  svr.Post("/tokenize", [&](const httplib::Request& req, httplib::Response& res) {
    HandleTokenize(info, hub, req, res);
  });
  svr.Post("/detokenize", [&](const httplib::Request& req, httplib::Response& res) {
    HandleDetokenize(info, req, res);
  });

  int bound = port;
  if (port == 0) {
    bound = svr.bind_to_any_port(host);
  } else if (!svr.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound < 0) {
    std::fprintf(stderr,
                 "gannet serve: cannot listen on %s:%d (in use, or not an address of "
                 "this host)\n",
                 host.c_str(), port);
    gannet_tokenizer_close(tokenizer);
    return 1;
  }
  std::fprintf(stderr, "gannet serve: listening on http://%s:%d (model '%s' loading)\n",
               host.c_str(), bound, info.model_name.c_str());
  std::fflush(stderr);

  std::atomic<int> exit_code{0};
  std::thread loader([&] {
    std::string error;
    gannet_engine_t* engine = CreateEngine(start.engine, max_queued, &error);
    if (!engine) {
      std::fprintf(stderr, "gannet serve: cannot load the model: %s\n", error.c_str());
      exit_code = 1;
      // stop() before listen began would be lost: wait (bounded) until the server runs.
      for (int i = 0; i < 500 && !svr.is_running(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      svr.stop();
      return;
    }
    hub.Start(engine);
    if (!args.Has("quiet")) {
      gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
      gannet_engine_get_stats(engine, &s);
      std::fprintf(stderr,
                   "gannet serve: ready: %s %s, up to %d sequences of %d tokens, loaded "
                   "in %.1f s\n",
                   s.backend, s.device_name, s.max_running_seqs, s.max_model_len, s.load_seconds);
      std::fflush(stderr);
    }
  });
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    hub.Close();  // streams and waits end now, so stop() can join the connection threads
    svr.stop();
  });
  svr.listen_after_bind();
  loader.join();
  // The signal thread waits in sigwait: wake it when the server ended otherwise.
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  hub.Close();
  signal_waiter.join();
  hub.Stop();
  gannet_tokenizer_close(tokenizer);
  std::fprintf(stderr, "gannet serve: stopped\n");
  return exit_code.load();
}

}  // namespace
}  // namespace gannet_server

int main(int argc, char** argv) {
  if (std::getenv("GANNET_LOG_LEVEL") == nullptr) {
    gannet_set_log_callback(nullptr, nullptr, GANNET_LOG_LEVEL_WARNING);
  }
  // `gannet serve ARGS` execs `gannet-serve serve ARGS`; `gannet-serve ARGS` works too.
  std::vector<char*> av(argv, argv + argc);
  static char serve_word[] = "serve";
  if (argc < 2 || std::strcmp(argv[1], "serve") != 0) av.insert(av.begin() + 1, serve_word);
  return gannet_server::Serve(static_cast<int>(av.size()), av.data());
}

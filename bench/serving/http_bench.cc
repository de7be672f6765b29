// gannet-http-bench: gannet-serving-bench's closed-loop workload, sent to `gannet serve` over
// HTTP, so that the two measure the same work and their difference is what the server adds
// (issue 55 item 4: TPOT and TTFT through the server against the C ABI).
//
// Keeps `--concurrency` streamed /v1/completions requests in flight until `--requests` have
// finished. Every prompt is `--input-len` random token ids (<bos>, then ids drawn as the serving
// bench draws them: uniform over [108, --vocab), its seed), sent as an id list so no tokenizer
// changes its length; each request asks for exactly `--output-len` tokens (`ignore_eos`,
// `min_tokens`) at temperature 0. TTFT: from sending the request to the first chunk that carries
// a choice; TPOT: (last chunk - first chunk) / (tokens - 1), tokens from the final usage chunk.
//
//   gannet serve -m dummy:31b --port 8080 &
//   gannet-http-bench --url http://127.0.0.1:8080 --vocab 262144 --input-len 1000
//       --output-len 1000 --concurrency 16   (one command line)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/percentile.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace {

using gannet::bench::Percentile;

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Options {
  std::string url = "http://127.0.0.1:8080";
  std::string api_key;
  std::string name = "http";
  int64_t vocab = 262144;
  int input_len = 1000;
  int output_len = 1000;
  int concurrency = 1;
  int requests = 0;  // 0: as gannet-serving-bench chooses
};

struct Result {
  double ttft_ms = 0, tpot_ms = 0;
  int tokens = 0;
  std::string error;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return false;
    ++i;
    if (a == "--url") {
      o->url = v;
    } else if (a == "--api-key") {
      o->api_key = v;
    } else if (a == "--name") {
      o->name = v;
    } else if (a == "--vocab") {
      o->vocab = std::atoll(v);
    } else if (a == "--input-len") {
      o->input_len = std::atoi(v);
    } else if (a == "--output-len") {
      o->output_len = std::atoi(v);
    } else if (a == "--concurrency") {
      o->concurrency = std::atoi(v);
    } else if (a == "--requests") {
      o->requests = std::atoi(v);
    } else {
      return false;
    }
  }
  return o->vocab > 108 && o->input_len >= 1 && o->output_len >= 2 && o->concurrency >= 1 &&
         o->requests >= 0;
}

// One streamed request; the server's SSE lines arrive in pieces of any size.
Result Run(httplib::Client& client, const Options& o, const std::vector<int32_t>& prompt) {
  const json body = {{"prompt", prompt},
                     {"max_tokens", o.output_len},
                     {"min_tokens", o.output_len},
                     {"ignore_eos", true},
                     {"temperature", 0},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  Result r;
  std::string pending;
  Clock::time_point first, last;
  bool seen = false;
  const Clock::time_point sent = Clock::now();
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      const json chunk = json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (chunk.is_discarded()) {
        r.error = "a chunk that is not JSON";
        return false;
      }
      if (chunk.contains("error")) {
        r.error = chunk["error"].dump();
        return false;
      }
      if (chunk.contains("choices") && !chunk["choices"].empty()) {
        last = Clock::now();
        if (!seen) first = last;
        seen = true;
      }
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        r.tokens = chunk["usage"].value("completion_tokens", 0);
      }
    }
    return true;
  };
  auto res = client.send(req);
  if (!res) {
    if (r.error.empty()) r.error = "HTTP: " + httplib::to_string(res.error());
    return r;
  }
  if (res->status != 200) {
    r.error = "HTTP " + std::to_string(res->status);
    return r;
  }
  if (!seen || r.tokens < 2) {
    if (r.error.empty()) r.error = "no tokens streamed";
    return r;
  }
  r.ttft_ms = std::chrono::duration<double, std::milli>(first - sent).count();
  r.tpot_ms = std::chrono::duration<double, std::milli>(last - first).count() / (r.tokens - 1);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: gannet-http-bench [--url http://127.0.0.1:8080] [--api-key KEY] "
                 "[--vocab N] [--input-len N] [--output-len N] [--concurrency N] [--requests N] "
                 "[--name S]\n");
    return 2;
  }
  // As gannet-serving-bench: enough requests that the steady state dominates.
  const int requests = o.requests > 0        ? o.requests
                       : o.concurrency <= 16 ? std::max(2, 2 * o.concurrency)
                                             : o.concurrency;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int64_t> token(108, o.vocab - 1);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(requests));
  for (auto& p : prompts) {
    p.assign(static_cast<size_t>(o.input_len), 2);  // <bos>
    for (int i = 1; i < o.input_len; ++i) p[i] = static_cast<int32_t>(token(rng));
  }

  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<Result> results;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < o.concurrency; ++w) {
    workers.emplace_back([&] {
      httplib::Client client(o.url);
      client.set_read_timeout(3600, 0);
      client.set_keep_alive(true);
      while (true) {
        const int i = next.fetch_add(1);
        if (i >= requests) break;
        Result r = Run(client, o, prompts[static_cast<size_t>(i)]);
        std::lock_guard<std::mutex> lock(mu);
        results.push_back(std::move(r));
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> ttft, tpot;
  int64_t tokens = 0;
  int errors = 0;
  for (const Result& r : results) {
    if (!r.error.empty()) {
      if (errors++ == 0) std::fprintf(stderr, "request failed: %s\n", r.error.c_str());
      continue;
    }
    ttft.push_back(r.ttft_ms);
    tpot.push_back(r.tpot_ms);
    tokens += r.tokens;
  }
  std::printf(
      "%-28s in %5d out %5d conc %3d reqs %4d | %9.1f out tok/s | TTFT p50 %8.1f ms p99 %8.1f ms "
      "| TPOT p50 %7.2f ms%s\n",
      o.name.c_str(), o.input_len, o.output_len, o.concurrency, requests, tokens / wall,
      Percentile(ttft, 0.5), Percentile(ttft, 0.99), Percentile(tpot, 0.5),
      errors > 0 ? (" | ERRORS " + std::to_string(errors)).c_str() : "");
  return errors > 0 ? 1 : 0;
}

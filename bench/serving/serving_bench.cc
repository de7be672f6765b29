// gannet-serving-bench: a closed-loop serving workload over the public C ABI.
//
// Keeps `--concurrency` requests in flight (a new one is submitted as soon as one finishes) until
// `--requests` have finished; every request has a random prompt of exactly `--input-len` tokens
// and generates exactly `--output-len` tokens (stop tokens ignored). Reports output tokens/s,
// TTFT (median, p99) and TPOT (median). At concurrency 1 it also reports the bandwidth decode
// achieves — (weights + the KV a step reads) / TPOT — as a fraction of the device-to-device copy
// bandwidth measured in the same run (CUDA builds only), and for dense models without per-layer
// embeddings (31B) the prefill rate behind the median TTFT as a fraction of a cuBLASLt bf16 8192^3
// GEMM measured in the same run. With --draft it serves with speculative decoding and reports
// drafts and acceptance instead of the bandwidth. With --rounds N the workload runs N times on
// one engine, a line each: the first round pays the one-time costs of the step shapes it meets
// first (linear tuning, graph recording), the later ones show the steady state; with
// --startup-warmup the engine pays them at create instead (load then counts them).
//
//   gannet-serving-bench --model dummy:31b --input-len 1000 --output-len 1000 --concurrency 16
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/common/device_refs.h"
#include "bench/common/percentile.h"
#include "gannet/gannet.h"

namespace {

using gannet::bench::Percentile;

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = "dummy:31b";
  std::string backend;
  std::string name;
  int input_len = 1000;
  int output_len = 1000;
  int concurrency = 1;
  int requests = 0;  // 0: max(2, 2 x concurrency) at low concurrency, concurrency above 16
  int max_running = 0;
  int max_step_tokens = 0;
  int64_t max_prefill_while_decoding = 0;
  int max_model_len = 0;
  long long kv_bytes = 0;
  std::string kv_cache_dtype;    // "" = the engine's default (bf16)
  std::string compute_dtype;     // "" = the engine's default (auto)
  bool capacity_only = false;    // print the KV line and stop
  bool separate_k_eq_v = false;  // --kv-separate-k-eq-v: K=V layers keep K and V apart
  bool no_graphs = false;
  bool prefix_cache = false;
  int warmup = 1;  // requests run (and not timed) first: kernel tuning, graph recording
  int rounds = 1;  // the timed workload this many times on one engine (the first is cold)
  bool startup_warmup = false;  // the engine's warm-up of every step shape at create
  std::string draft;            // speculative decoding with this MTP assistant
  int spec_tokens = 0;          // drafts per round (0 = the library's default)
  int tp = 0;                   // tensor_parallel_size (0 = one device)
};

struct Tracked {
  Clock::time_point submitted;
  Clock::time_point first_token;
  Clock::time_point finished;
  int tokens = 0;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--model" && (v = next()))
      o->model = v;
    else if (a == "--backend" && (v = next()))
      o->backend = v;
    else if (a == "--name" && (v = next()))
      o->name = v;
    else if (a == "--input-len" && (v = next()))
      o->input_len = std::atoi(v);
    else if (a == "--output-len" && (v = next()))
      o->output_len = std::atoi(v);
    else if (a == "--concurrency" && (v = next()))
      o->concurrency = std::atoi(v);
    else if (a == "--requests" && (v = next()))
      o->requests = std::atoi(v);
    else if (a == "--max-running" && (v = next()))
      o->max_running = std::atoi(v);
    else if (a == "--max-step-tokens" && (v = next()))
      o->max_step_tokens = std::atoi(v);
    else if (a == "--max-prefill-while-decoding" && (v = next()))
      o->max_prefill_while_decoding = std::atoll(v);
    else if (a == "--max-model-len" && (v = next()))
      o->max_model_len = std::atoi(v);
    else if (a == "--kv-bytes" && (v = next()))
      o->kv_bytes = std::atoll(v);
    else if (a == "--kv-cache-dtype" && (v = next()))
      o->kv_cache_dtype = v;
    else if (a == "--compute-dtype" && (v = next()))
      o->compute_dtype = v;
    else if (a == "--capacity-only")
      o->capacity_only = true;
    else if (a == "--kv-separate-k-eq-v")
      o->separate_k_eq_v = true;
    else if (a == "--no-graphs")
      o->no_graphs = true;
    else if (a == "--prefix-cache")
      o->prefix_cache = true;
    else if (a == "--warmup" && (v = next()))
      o->warmup = std::atoi(v);
    else if (a == "--rounds" && (v = next()))
      o->rounds = std::atoi(v);
    else if (a == "--startup-warmup")
      o->startup_warmup = true;
    else if (a == "--draft" && (v = next()))
      o->draft = v;
    else if (a == "--spec-tokens" && (v = next()))
      o->spec_tokens = std::atoi(v);
    else if (a == "--tp" && (v = next()))
      o->tp = std::atoi(v);
    else {
      std::fprintf(stderr,
                   "usage: gannet-serving-bench [--model DIR|dummy:VARIANT] [--backend cpu|cuda]\n"
                   "  [--input-len N] [--output-len N] [--concurrency N] [--requests N]\n"
                   "  [--max-running N] [--max-step-tokens N] [--max-prefill-while-decoding N]\n"
                   "  [--max-model-len N] [--kv-bytes B] [--kv-cache-dtype bf16|fp8] "
                   "[--compute-dtype auto|bf16|f16] [--capacity-only]\n"
                   "  [--kv-separate-k-eq-v]\n"
                   "  [--no-graphs] [--prefix-cache] [--warmup N] [--rounds N] [--startup-warmup]\n"
                   "  [--name LABEL]\n"
                   "  [--draft DIR|dummy:VARIANT-assistant] [--spec-tokens N] [--tp N]\n");
      return false;
    }
  }
  if (o->requests <= 0) {
    o->requests = o->concurrency <= 16 ? std::max(2, 2 * o->concurrency) : o->concurrency;
  }
  if (o->input_len > 0 && o->output_len > 0 && o->concurrency > 0 && o->warmup >= 0 &&
      o->rounds >= 1) {
    return true;
  }
  std::fprintf(stderr,
               "serving-bench: --input-len, --output-len, --concurrency and --rounds must "
               "be at least 1, --warmup at least 0\n");
  return false;
}

// What one round adds to the engine's cumulative counters.
struct RoundCounters {
  long long preemptions = 0;
  long long decode_steps = 0;  // back-to-back decode steps, their wall and device seconds
  double decode_s = 0;
  double decode_device_s = 0;
  long long verify_chunks = 0, drafts = 0, accepted = 0;
};
RoundCounters Since(const gannet_engine_stats_t& a, const gannet_engine_stats_t& b) {
  RoundCounters r;
  r.preemptions = b.num_preemptions - a.num_preemptions;
  r.decode_steps = b.timed_decode_steps - a.timed_decode_steps;
  r.decode_s = b.timed_decode_seconds - a.timed_decode_seconds;
  r.decode_device_s = b.timed_decode_device_seconds - a.timed_decode_device_seconds;
  r.verify_chunks = b.spec_verify_chunks - a.spec_verify_chunks;
  r.drafts = b.spec_draft_tokens - a.spec_draft_tokens;
  r.accepted = b.spec_accepted_tokens - a.spec_accepted_tokens;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even when a timeout kills the run
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  gannet_set_log_callback(nullptr, nullptr, GANNET_LOG_LEVEL_WARNING);
  const double copy_gbs = gannet::bench::MeasureCopyBandwidth();
  const double gemm_tflops = o.concurrency == 1 ? gannet::bench::MeasureGemmTflops() : 0;

  // The model's geometry (checkpoint headers or a dummy variant): the prompt vocabulary and, at
  // the end, the prefill FLOP count.
  gannet_model_info_t info;
  info.struct_size = sizeof(info);
  if (gannet_model_info(o.model.c_str(), &info) != GANNET_OK) {
    std::fprintf(stderr, "serving-bench: %s\n", gannet_last_error_message());
    return 1;
  }

  gannet_engine_config_t cfg = GANNET_ENGINE_CONFIG_INIT;
  cfg.model_dir = o.model.c_str();
  cfg.backend = o.backend.empty() ? nullptr : o.backend.c_str();
  // Without --max-running the engine picks its limit (at most 64, fewer if the KV pools cannot
  // hold that many sequences at full length): the client's concurrency is only what it offers.
  cfg.max_running_seqs = o.max_running;
  cfg.max_step_tokens = o.max_step_tokens;
  cfg.max_prefill_tokens_while_decoding = o.max_prefill_while_decoding;
  cfg.max_model_len = o.max_model_len > 0 ? o.max_model_len : o.input_len + o.output_len + 16;
  cfg.kv_memory_bytes = o.kv_bytes;
  cfg.kv_cache_dtype = o.kv_cache_dtype.empty() ? nullptr : o.kv_cache_dtype.c_str();
  cfg.compute_dtype = o.compute_dtype.empty() ? nullptr : o.compute_dtype.c_str();
  cfg.kv_separate_k_eq_v = o.separate_k_eq_v ? 1 : 0;
  cfg.disable_prefix_cache = o.prefix_cache ? 0 : 1;  // random prompts: nothing to reuse
  cfg.disable_cuda_graphs = o.no_graphs ? 1 : 0;
  cfg.draft_model_dir = o.draft.empty() ? nullptr : o.draft.c_str();
  cfg.num_speculative_tokens = o.spec_tokens;
  cfg.tensor_parallel_size = o.tp;
  cfg.startup_warmup = o.startup_warmup ? 1 : -1;
  gannet_engine_t* engine = nullptr;
  auto t_load = Clock::now();
  if (gannet_engine_create(&cfg, &engine) != GANNET_OK) {
    std::fprintf(stderr, "serving-bench: %s\n", gannet_last_error_message());
    return 1;
  }
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  gannet_engine_stats_t stats0 = GANNET_ENGINE_STATS_INIT;
  gannet_engine_get_stats(engine, &stats0);
  {
    // Capacity: how many sequences of input + output tokens the KV memory holds at once, each
    // with its full-layer pages and a window's sliding blocks (+1 for a block boundary).
    // "Budget": the KV bytes over one sequence's bytes, as if the two pools shared them. The
    // engine does not: the sliding pool is sized for the running limit's worst case (every
    // running sequence at its window, plus one step's tokens) and the full pool gets the rest,
    // so what the pools hold at a limit is the smaller of their two quotients. A limit set
    // above what they hold (--max-running) starves the full pool and ends in preemptions.
    const int64_t len = o.input_len + o.output_len;
    const int64_t page = std::max(1, stats0.page_size);
    const int64_t full_per_seq = (len + page - 1) / page;
    const int64_t slide_per_seq = std::min(
        full_per_seq, (std::min<int64_t>(len, stats0.sliding_window) + page - 1) / page + 1);
    const int64_t seq_bytes = page * (full_per_seq * stats0.kv_bytes_per_token[1] +
                                      slide_per_seq * stats0.kv_bytes_per_token[0]);
    const long long cap = seq_bytes > 0 ? static_cast<long long>(stats0.kv_bytes / seq_bytes) : 0;
    auto pools_hold = [&](const gannet_engine_stats_t& st) {
      long long held = cap;
      if (st.kv_bytes_per_token[0] > 0)
        held = std::min<long long>(held, st.kv_pages_total[0] / slide_per_seq);
      if (st.kv_bytes_per_token[1] > 0)
        held = std::min<long long>(held, st.kv_pages_total[1] / full_per_seq);
      return held;
    };
    std::printf(
        "  KV %s: %.2f GiB, %lld + %lld bytes/token (sliding, full) | budget holds %lld "
        "sequences of %lld tokens | running limit %d: the pools hold %lld\n",
        stats0.kv_cache_dtype, stats0.kv_bytes / double(1 << 30),
        static_cast<long long>(stats0.kv_bytes_per_token[0]),
        static_cast<long long>(stats0.kv_bytes_per_token[1]), cap, static_cast<long long>(len),
        stats0.max_running_seqs, pools_hold(stats0));
    if (o.capacity_only) {
      // The largest running limit whose pools hold that many sequences, one engine per try (its
      // planner sizes the pools, nothing is estimated). Holding is monotone in the limit (a lower
      // limit gives the sliding pool less and the full pool more, and asks for fewer), so a
      // binary search between the default limit's answer and the budget's quotient finds it.
      auto holds = [&](long long limit) {
        gannet_engine_destroy(engine);
        engine = nullptr;
        cfg.max_running_seqs = static_cast<int32_t>(limit);
        if (gannet_engine_create(&cfg, &engine) != GANNET_OK) {
          std::printf("  running limit %lld: %s\n", limit, gannet_last_error_message());
          return false;
        }
        gannet_engine_stats_t st = GANNET_ENGINE_STATS_INIT;
        gannet_engine_get_stats(engine, &st);
        const bool ok = st.max_running_seqs == limit && pools_hold(st) >= limit;
        std::printf("  running limit %lld: the pools hold %lld\n", limit, pools_hold(st));
        return ok;
      };
      long long lo = 0, hi = cap;  // lo holds (0 trivially), hi + 1 does not
      const long long dflt = stats0.max_running_seqs;
      if (dflt <= cap && pools_hold(stats0) >= dflt)
        lo = dflt;
      else
        hi = std::min(hi, dflt - 1);
      while (lo < hi) {
        const long long mid = lo + (hi - lo + 1) / 2;
        if (holds(mid))
          lo = mid;
        else
          hi = mid - 1;
      }
      const long long fits = lo;
      std::printf("  capacity: %lld concurrent sequences of %lld tokens (--max-running %lld)\n",
                  fits, static_cast<long long>(len), fits);
      gannet_engine_destroy(engine);
      return 0;
    }
  }

  // Prompt ids: uniform over the vocabulary above the special-token block.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int64_t> token(108, info.vocab_size - 1);
  std::map<uint64_t, Tracked> live;
  std::vector<Tracked> done;
  int submitted = 0;
  auto submit_one = [&]() -> bool {
    std::vector<int32_t> p(o.input_len);
    p[0] = 2;
    for (int i = 1; i < o.input_len; ++i) p[i] = static_cast<int32_t>(token(rng));
    gannet_request_t r = GANNET_REQUEST_INIT;
    r.prompt_tokens = p.data();
    r.num_prompt_tokens = p.size();
    r.max_tokens = o.output_len;
    r.min_tokens = o.output_len;
    r.ignore_default_stop_tokens = 1;
    uint64_t id;
    if (gannet_engine_submit(engine, &r, &id) != GANNET_OK) {
      std::fprintf(stderr, "serving-bench: submit: %s\n", gannet_last_error_message());
      return false;
    }
    live[id].submitted = Clock::now();
    ++submitted;
    return true;
  };
  // Warm-up: a few short requests of the same prompt length, waited for and not counted.
  for (int w = 0; w < o.warmup; ++w) {
    std::vector<int32_t> p(o.input_len);
    p[0] = 2;
    for (int i = 1; i < o.input_len; ++i) p[i] = static_cast<int32_t>(token(rng));
    gannet_request_t r = GANNET_REQUEST_INIT;
    r.prompt_tokens = p.data();
    r.num_prompt_tokens = p.size();
    r.max_tokens = 8;
    r.ignore_default_stop_tokens = 1;
    uint64_t id;
    if (gannet_engine_submit(engine, &r, &id) != GANNET_OK) return 1;
    for (bool finished = false; !finished;) {
      const gannet_event_t* const* ev;
      size_t n;
      gannet_engine_poll(engine, 1000, 64, &ev, &n);
      for (size_t i = 0; i < n; ++i)
        finished |= ev[i]->request_id == id && ev[i]->type != GANNET_EVENT_TOKEN;
    }
  }
  // Rounds: the same closed-loop workload again on the same engine. The first round meets every
  // step shape the workload makes for the first time (the warm-up requests cover one prompt and
  // batch 1): the linear layers' tuning per row bucket and the graph recordings per (batch,
  // context-length) bucket run inside it. Later rounds are the steady state; the difference is
  // those one-time costs. The lines after the rounds' describe the last one.
  int errors = 0;
  std::vector<double> ttft, tpot;
  double tpot_med = 0;
  RoundCounters last;
  gannet_engine_stats_t before = GANNET_ENGINE_STATS_INIT, stats = GANNET_ENGINE_STATS_INIT;
  gannet_engine_get_stats(engine, &before);
  for (int round = 1; round <= o.rounds; ++round) {
    live.clear();
    done.clear();
    submitted = 0;
    const int errors_before = errors;
    const auto t0 = Clock::now();
    while (submitted < std::min(o.concurrency, o.requests)) {
      if (!submit_one()) return 1;
    }
    while (static_cast<int>(done.size()) < o.requests) {
      const gannet_event_t* const* ev;
      size_t n;
      gannet_engine_poll(engine, 1000, 4096, &ev, &n);
      const auto now = Clock::now();
      for (size_t i = 0; i < n; ++i) {
        auto it = live.find(ev[i]->request_id);
        if (it == live.end()) continue;
        if (ev[i]->type == GANNET_EVENT_TOKEN) {
          if (it->second.tokens++ == 0) it->second.first_token = now;
          continue;
        }
        if (ev[i]->type == GANNET_EVENT_ERROR) {
          std::fprintf(stderr, "serving-bench: request failed: %s\n", ev[i]->message);
          ++errors;
        }
        it->second.finished = now;
        done.push_back(it->second);
        live.erase(it);
        if (submitted < o.requests && !submit_one()) return 1;
      }
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    stats = GANNET_ENGINE_STATS_INIT;
    gannet_engine_get_stats(engine, &stats);
    const RoundCounters rc = Since(before, stats);
    before = stats;
    last = rc;

    ttft.clear();
    tpot.clear();
    long long out_tokens = 0;
    for (const Tracked& t : done) {
      out_tokens += t.tokens;
      ttft.push_back(
          std::chrono::duration<double, std::milli>(t.first_token - t.submitted).count());
      if (t.tokens > 1) {
        tpot.push_back(
            std::chrono::duration<double, std::milli>(t.finished - t.first_token).count() /
            (t.tokens - 1));
      }
    }
    const double tok_s = out_tokens / wall;
    tpot_med = Percentile(tpot, 0.5);
    std::string label = o.name.empty() ? o.model : o.name;
    if (o.rounds > 1) label += " r" + std::to_string(round) + "/" + std::to_string(o.rounds);
    std::printf(
        "%-28s in %5d out %5d conc %3d reqs %4d | %9.1f out tok/s | TTFT p50 %8.1f ms p99 %8.1f ms "
        "| TPOT p50 %7.2f ms | preempt %lld | load %.1f s%s\n",
        label.c_str(), o.input_len, o.output_len, o.concurrency, o.requests, tok_s,
        Percentile(ttft, 0.5), Percentile(ttft, 0.99), tpot_med, rc.preemptions, load_s,
        errors > errors_before ? " | ERRORS" : "");
    if (rc.decode_steps > 0 && rc.decode_device_s > 0) {
      // Host work between the device's decode steps: wall time of back-to-back decode steps less
      // the device time of their work.
      const double step_ms = 1e3 * rc.decode_s / rc.decode_steps;
      const double host_ms = 1e3 * (rc.decode_s - rc.decode_device_s) / rc.decode_steps;
      std::printf(
          "  host on the critical path: %.3f ms per decode step = %.1f%% of %.2f ms (%lld "
          "back-to-back decode steps)\n",
          host_ms, 100.0 * host_ms / step_ms, step_ms, rc.decode_steps);
    }
  }
  gannet_engine_destroy(engine);

  if (stats.num_speculative_tokens > 0) {
    // Random-weight drafters accept next to nothing: see gannet-spec-sweep for acceptance rates.
    std::printf(
        "  speculative: K %d | %lld verify chunks, %lld drafts, %lld accepted (%.1f%%) | %.2f "
        "tokens per chunk\n",
        stats.num_speculative_tokens, last.verify_chunks, last.drafts, last.accepted,
        last.drafts > 0 ? 100.0 * last.accepted / last.drafts : 0.0,
        last.verify_chunks > 0
            ? static_cast<double>(last.accepted + last.verify_chunks) / last.verify_chunks
            : 0.0);
  } else if (o.concurrency == 1 && copy_gbs > 0 && tpot_med > 0 &&
             (info.num_experts > 0 || std::strstr(info.variant, "ple") != nullptr)) {
    // A step reads only the experts its token routes to and one row of the PLE table: counting
    // every weight would print 245% for 26B-A4B. gannet-decode-bench counts what a step reads.
    std::printf(
        "  decode bandwidth: see gannet-decode-bench (it counts the routed experts and "
        "gathered PLE rows a step reads)\n");
  } else if (o.concurrency == 1 && copy_gbs > 0 && tpot_med > 0) {
    // Bytes one decode step reads: every weight (the tied embedding as the LM head) plus the KV
    // of the context: sliding layers their window, full layers everything, at the mean length.
    const double ctx = o.input_len + o.output_len / 2.0;
    // With tensor parallelism the stats give every rank's weights together and one rank's KV per
    // token (each holds its heads): the rate is per device, against one device's copy rate.
    const int devices = std::max(1, o.tp);
    const double kv =
        devices * (stats.kv_bytes_per_token[0] * std::min<double>(ctx, stats.sliding_window) +
                   stats.kv_bytes_per_token[1] * ctx);
    const double gbs = (stats.weight_bytes + kv) / (tpot_med * 1e-3) / 1e9 / devices;
    std::printf(
        "  decode bandwidth: %.1f GB/s per device = %.1f%% of the %.1f GB/s device copy (weights "
        "%.2f GB + KV %.3f GB per step over %d device(s))\n",
        gbs, 100.0 * gbs / copy_gbs, copy_gbs, stats.weight_bytes / 1e9, kv / 1e9, devices);
  }
  if (o.concurrency == 1 && gemm_tflops > 0 && info.num_experts == 0 &&
      std::strstr(info.variant, "ple") == nullptr) {
    // FLOPs of a prompt of L tokens: 2 per weight of every matmul per token (all parameters but the
    // embedding table: the tied LM head runs on the last token only), plus causal attention,
    // 4 x query heads x head dim per (query, key) pair, keys window-limited on sliding layers.
    // MoE (top-k of the experts) and PLE (table lookups) would need their own counts: skipped.
    const double L = o.input_len, W = info.sliding_window > 0 ? info.sliding_window : L;
    const double linear = 2.0 * (info.num_parameters - info.vocab_size * info.hidden_size);
    const double full_pairs = L * (L + 1) / 2;
    const double sliding_pairs = L <= W ? full_pairs : W * (W + 1) / 2 + (L - W) * W;
    const double attention = 4.0 * info.num_attention_heads *
                             (info.num_sliding_layers * info.head_dim * sliding_pairs +
                              info.num_full_layers * info.full_head_dim * full_pairs);
    const double ttft_s = Percentile(ttft, 0.5) * 1e-3;
    // With tensor parallelism the work is split over the devices: the rate is per device, against
    // one device's GEMM rate (a TP=2 prefill once printed 129% of one GPU).
    const int devices = std::max(1, o.tp);
    const double tflops = (linear * L + attention) / ttft_s / 1e12 / devices;
    std::printf(
        "  prefill: %d tokens in %.1f ms (TTFT p50) = %.0f tok/s, %.0f TFLOP/s per device "
        "= %.1f%% of the %.0f TFLOP/s cuBLASLt bf16 8192^3 GEMM (%.1f linear + %.2f "
        "attention GFLOP/token, over %d device(s))\n",
        o.input_len, ttft_s * 1e3, L / ttft_s, tflops, 100.0 * tflops / gemm_tflops, gemm_tflops,
        linear / 1e9, attention / L / 1e9, devices);
  }
  return errors ? 1 : 0;
}

// gannet-spec-sweep: the ACCEPTANCE SWEEP of speculative decoding -- a synthetic experiment, not a
// measurement of a real drafter. Random-weight ("dummy") drafters accept next to nothing, so to
// see what a round costs and what acceptance buys, each draft is replaced, with probability p, by
// the token the target itself produces there (recorded from a plain greedy run of the same
// prompt); otherwise the drafter's own proposal stands. The drafter still runs every step, so the
// timing is the real cost of drafting and verifying.
//
// For each concurrency: a plain run (requests opted out of speculation) gives the plain TPOT; a
// speculative run at p = 0 records every request's greedy tokens as the verify path computes
// them (the "truth"; with random weights the logits are nearly flat, so bf16 rows computed in a
// verify chunk and in a plain decode step can pick different near-tied tokens: the count is
// printed); then one run per p reports tokens per verify chunk (accepted drafts + 1), TPOT and
// TPOT relative to plain. At p = 0 a round yields one token, so TPOT(p=0) / plain TPOT is what a
// spec round costs relative to a plain decode step.
//
// --mode forced (or both, the default) adds a second sweep that does not depend on the target
// reproducing a recorded output: each draft counts as accepted with probability p (independently,
// the run stopping at the first miss), whatever it is; the chunk then emits those drafts and the
// target's next token (spec/verify.h AcceptOverride). The output is consistent but is not the
// target's greedy text; the work per chunk is exactly that of real acceptance. Random-weight
// targets have nearly flat logits, so the recorded oracle loses its truth wherever bf16 rows of
// a verify chunk and of a plain step resolve a near-tie differently; forced acceptance is immune.
//
// For example (one command line):
//   gannet-spec-sweep --model dummy:31b --draft dummy:31b-assistant --spec-tokens 3
//       --input-len 1000 --output-len 256 --concurrency 1,16 --p 0,0.5,0.8,1
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lib/common/hash.h"
#include "lib/common/logging.h"
#include "lib/engine/engine.h"
#include "lib/model/variants.h"

namespace {

[[noreturn]] void Die(const absl::Status& st) {
  std::fprintf(stderr, "spec-sweep: %s\n", std::string(st.message()).c_str());
  std::exit(1);
}

using Clock = std::chrono::steady_clock;
using gannet::engine::Engine;
using gannet::engine::EngineConfig;
using gannet::engine::EngineStats;
using gannet::engine::Event;
using gannet::engine::EventType;
using gannet::engine::RequestInput;

struct Options {
  std::string model = "dummy:31b";
  std::string draft = "dummy:31b-assistant";
  std::string backend;
  int spec_tokens = 3;
  int input_len = 1000;
  int output_len = 256;
  std::vector<int> concurrency = {1, 16};
  std::vector<double> p = {0, 0.5, 0.8, 1.0};
  int requests_per_slot = 2;  // sequential requests per concurrency slot
  std::string mode = "both";  // recorded, forced or both
};

template <typename T>
std::vector<T> ParseList(const std::string& s) {
  std::vector<T> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(static_cast<T>(std::atof(item.c_str())));
  return out;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return false;
    ++i;
    if (a == "--model")
      o->model = v;
    else if (a == "--draft")
      o->draft = v;
    else if (a == "--backend")
      o->backend = v;
    else if (a == "--spec-tokens")
      o->spec_tokens = std::atoi(v);
    else if (a == "--input-len")
      o->input_len = std::atoi(v);
    else if (a == "--output-len")
      o->output_len = std::atoi(v);
    else if (a == "--concurrency")
      o->concurrency = ParseList<int>(v);
    else if (a == "--p")
      o->p = ParseList<double>(v);
    else if (a == "--requests-per-slot")
      o->requests_per_slot = std::atoi(v);
    else if (a == "--mode")
      o->mode = v;
    else
      return false;
  }
  return o->input_len > 1 && o->output_len > 1 && !o->concurrency.empty() &&
         (o->mode == "recorded" || o->mode == "forced" || o->mode == "both");
}

// What the draft override reads: per request id, the recorded greedy continuation, and p.
struct Oracle {
  std::mutex mu;
  std::map<uint64_t, const std::vector<int32_t>*> truth;
  double p = 0;
  bool forced = false;
  static double U(uint64_t id, int64_t at) {
    return (gannet::SplitMix64(id * 0x9e3779b97f4a7c15ull + at) >> 11) * 0x1.0p-53;
  }
  int Accept(uint64_t id, int64_t first_output, int accepted, int num_drafts) {
    std::lock_guard<std::mutex> lock(mu);
    if (!forced) return accepted;
    int n = 0;
    while (n < num_drafts && U(id ^ 0x5bd1e995ull, first_output + n) < p) ++n;
    return n;
  }
  void Override(uint64_t id, int64_t first_output, std::vector<int32_t>* drafts) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = truth.find(id);
    if (it == truth.end()) return;
    const std::vector<int32_t>& t = *it->second;
    for (size_t k = 0; k < drafts->size(); ++k) {
      const int64_t at = first_output + static_cast<int64_t>(k);
      if (at < static_cast<int64_t>(t.size()) && U(id, at) < p) (*drafts)[k] = t[at];
    }
  }
};

struct Run {
  std::vector<std::vector<int32_t>> outputs;  // per prompt
  std::vector<double> tpot_ms;                // per request
  EngineStats delta;
};

// Runs every prompt (slot s runs prompts s, s + conc, ...; each slot one request at a time) and
// waits. `truths` (optional) registers each request's recorded tokens with the oracle.
Run RunPrompts(Engine& engine, Oracle& oracle, const std::vector<std::vector<int32_t>>& prompts,
               int conc, int output_len, bool speculate,
               const std::vector<std::vector<int32_t>>* truths) {
  Run run;
  run.outputs.resize(prompts.size());
  const EngineStats before = engine.GetStats();
  struct Live {
    size_t prompt;
    Clock::time_point first;
    int tokens = 0;
  };
  std::map<uint64_t, Live> live;
  size_t next = 0;
  uint64_t expected_id = 0;
  auto submit = [&]() {
    RequestInput in;
    in.prompt_tokens = prompts[next];
    in.max_tokens = output_len;
    in.min_tokens = output_len;
    in.ignore_default_stop_tokens = true;
    in.sampling.temperature = 0;
    in.disable_speculation = !speculate;
    {
      // Ids are sequential from this single submitter: register before the engine can draft.
      std::lock_guard<std::mutex> lock(oracle.mu);
      if (truths != nullptr) oracle.truth[expected_id] = &(*truths)[next];
    }
    auto id = engine.Submit(in);
    if (!id.ok() || (truths != nullptr && *id != expected_id)) {
      std::fprintf(stderr, "spec-sweep: submit: %s\n",
                   id.ok() ? "unexpected request id" : std::string(id.status().message()).c_str());
      std::exit(1);
    }
    ++expected_id;
    live[*id] = Live{next++, {}, 0};
  };
  // The next id the engine hands out: one past a one-token probe's (waited for).
  {
    RequestInput probe;
    probe.prompt_tokens = {prompts[0][0]};
    probe.max_tokens = 1;
    probe.disable_speculation = true;
    auto id = engine.Submit(probe);
    if (!id.ok()) {
      std::fprintf(stderr, "spec-sweep: %s\n", std::string(id.status().message()).c_str());
      std::exit(1);
    }
    expected_id = *id + 1;
    for (bool done = false; !done;) {
      std::vector<Event> drain;
      if (absl::Status st = engine.Poll(1000, 64, &drain); !st.ok()) Die(st);
      for (const Event& e : drain) done |= e.request_id == *id && e.type != EventType::kToken;
    }
  }
  while (next < prompts.size() && static_cast<int>(live.size()) < conc) submit();
  std::vector<Event> events;
  while (!live.empty()) {
    events.clear();
    if (absl::Status st = engine.Poll(1000, 4096, &events); !st.ok()) Die(st);
    const auto now = Clock::now();
    for (Event& e : events) {
      auto it = live.find(e.request_id);
      if (it == live.end()) continue;
      Live& l = it->second;
      if (e.type == EventType::kToken) {
        if (l.tokens++ == 0) l.first = now;
        run.outputs[l.prompt].push_back(e.token_id);
        continue;
      }
      if (e.type == EventType::kError) {
        std::fprintf(stderr, "spec-sweep: request failed: %s\n",
                     std::string(e.status.message()).c_str());
        std::exit(1);
      }
      if (l.tokens > 1) {
        run.tpot_ms.push_back(std::chrono::duration<double, std::milli>(now - l.first).count() /
                              (l.tokens - 1));
      }
      live.erase(it);
      if (next < prompts.size()) submit();
    }
  }
  const EngineStats after = engine.GetStats();
  run.delta.spec_verify_chunks = after.spec_verify_chunks - before.spec_verify_chunks;
  run.delta.spec_draft_tokens = after.spec_draft_tokens - before.spec_draft_tokens;
  run.delta.spec_accepted_tokens = after.spec_accepted_tokens - before.spec_accepted_tokens;
  return run;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even when a timeout kills the run
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: gannet-spec-sweep [--model M] [--draft D] [--backend cpu|cuda] "
                 "[--spec-tokens K]\n  [--input-len N] [--output-len N] [--concurrency 1,16] "
                 "[--p 0,0.5,0.8,1] [--requests-per-slot N]\n");
    return 2;
  }
  gannet::SetLogLevel(gannet::LogLevel::kWarning);
  Oracle oracle;
  const int max_conc = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  EngineConfig cfg;
  cfg.model_dir = o.model;
  cfg.backend = o.backend;
  cfg.draft_model_dir = o.draft;
  cfg.num_speculative_tokens = o.spec_tokens;
  cfg.max_model_len = o.input_len + o.output_len + 16;
  cfg.max_running_seqs = max_conc;
  cfg.enable_prefix_cache = false;  // every run recomputes its prompts the same way
  cfg.override_drafts = [&oracle](uint64_t id, int64_t at, std::vector<int32_t>* d) {
    oracle.Override(id, at, d);
  };
  cfg.override_accept = [&oracle](uint64_t id, int64_t at, int accepted, int k) {
    return oracle.Accept(id, at, accepted, k);
  };
  auto engine = Engine::Create(cfg);
  if (!engine.ok()) {
    std::fprintf(stderr, "spec-sweep: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  auto vocab = gannet::model::DummyModelConfig(o.model);
  const int64_t v = vocab.ok() ? vocab->text.vocab_size : 512;
  std::printf(
      "ACCEPTANCE SWEEP (synthetic: recorded = each draft replaced by the target's own "
      "recorded greedy token with probability p; forced = each draft counted accepted with "
      "probability p)\n%s + %s, K %d, input %d, output %d, %s\n",
      o.model.c_str(), o.draft.c_str(), o.spec_tokens, o.input_len, o.output_len,
      (*engine)->GetStats().device_name.c_str());
  for (int conc : o.concurrency) {
    std::mt19937 rng(77 + conc);
    std::uniform_int_distribution<int64_t> tok(108, v - 1);
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(conc) * o.requests_per_slot);
    for (auto& p : prompts) {
      p.assign(o.input_len, 2);
      for (int i = 1; i < o.input_len; ++i) p[i] = static_cast<int32_t>(tok(rng));
    }
    // Warm-up (graphs for both step shapes), then the plain run that records the truth.
    std::vector<std::vector<int32_t>> warm(prompts.begin(), prompts.begin() + conc);
    RunPrompts(**engine, oracle, warm, conc, 16, false, nullptr);
    RunPrompts(**engine, oracle, warm, conc, 16, true, nullptr);
    const Run plain = RunPrompts(**engine, oracle, prompts, conc, o.output_len, false, nullptr);
    const double plain_tpot = Median(plain.tpot_ms);
    const Run truth = RunPrompts(**engine, oracle, prompts, conc, o.output_len, true, nullptr);
    int near_ties = 0;
    for (size_t i = 0; i < prompts.size(); ++i) near_ties += truth.outputs[i] != plain.outputs[i];
    std::printf(
        "conc %3d  plain            | TPOT %8.2f ms | verify-path outputs differing from "
        "plain decode (bf16 near-ties): %d of %zu\n",
        conc, plain_tpot, near_ties, prompts.size());
    for (const char* mode : {"recorded", "forced"}) {
      if (o.mode != "both" && o.mode != mode) continue;
      const bool forced = std::string(mode) == "forced";
      for (double p : o.p) {
        {
          std::lock_guard<std::mutex> lock(oracle.mu);
          oracle.p = p;
          oracle.forced = forced;
        }
        const Run r = RunPrompts(**engine, oracle, prompts, conc, o.output_len, true,
                                 forced ? nullptr : &truth.outputs);
        int differ = 0;
        for (size_t i = 0; i < prompts.size(); ++i) differ += r.outputs[i] != truth.outputs[i];
        const double tpot = Median(r.tpot_ms);
        const double per_chunk =
            r.delta.spec_verify_chunks > 0
                ? static_cast<double>(r.delta.spec_accepted_tokens + r.delta.spec_verify_chunks) /
                      r.delta.spec_verify_chunks
                : 0;
        std::printf(
            "conc %3d  %-8s p %.2f  | TPOT %8.2f ms = %.3fx plain | %.2f tokens per verify "
            "chunk | accepted %.1f%% of %lld drafts | outputs differing from the truth: %d of "
            "%zu\n",
            conc, mode, p, tpot, plain_tpot > 0 ? tpot / plain_tpot : 0, per_chunk,
            r.delta.spec_draft_tokens > 0
                ? 100.0 * r.delta.spec_accepted_tokens / r.delta.spec_draft_tokens
                : 0.0,
            static_cast<long long>(r.delta.spec_draft_tokens), differ, prompts.size());
        {
          std::lock_guard<std::mutex> lock(oracle.mu);
          oracle.truth.clear();
        }
      }
    }
  }
  return 0;
}

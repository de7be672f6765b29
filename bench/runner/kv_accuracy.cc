// gannet-kv-accuracy: what a cheaper precision costs in accuracy, against the model's own
// precision (bf16 on CUDA, f32 on the CPU), on one sequence of a real or dummy model. --compare
// picks the candidate: fp8-kv (the default) is the FP8 KV cache; f16-compute is CUDA's fp16 compute
// path (compute_dtype f16: fp16 weights and activations, f32 residual, norm inputs and logits,
// as a V100 runs) against its bf16 path.
//
// The reference runner prefills a seeded random prompt and decodes --tokens tokens greedily,
// keeping every step's logits; then the candidate runner is fed exactly the same tokens (teacher
// forcing) and each of its logits rows is compared with the reference's:
//   logit error   max_v |a - b| / max_v |a| per position (the parity tests' measure): max, mean;
//   top-1         the fraction of positions where both runners' arg-max agree;
//   divergence    the first position where they differ: a greedy FP8 run is token for token the
//                 reference's until there (teacher forcing and free running agree up to it).
//                 "identical for N" with N = --tokens means they never differed.
// The runners run one after the other, so a full-size model needs its weights only once on the
// device. With --min-top1 / --max-logit-error / --max-mean-logit-error the exit status says
// whether the budget held (CI runs it on the tiny models with the budgets of
// docs/results-log/fp8-kv.md).
//
//   gannet-kv-accuracy --model dummy:31b --prompt-len 100 --tokens 1000
//   gannet-kv-accuracy --model tests/data/tiny/trained --backend cpu --tokens 200 --min-top1 0.95
//   gannet-kv-accuracy --model tests/data/tiny/e4b --compare f16-compute --tokens 500
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lib/backend/backend_factory.h"
#include "lib/common/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/variants.h"
#include "lib/model/weights.h"
#include "lib/runner/kv_storage.h"
#include "lib/runner/model_runner.h"

namespace gannet {
namespace {

struct Options {
  std::string model = "dummy:31b";
  std::string backend;  // "" = cuda when usable
  int prompt_len = 100;
  int tokens = 1000;
  int page = 16;
  uint32_t seed = 1;
  double min_top1 = -1;         // < 0: not checked
  double max_logit_error = -1;  // < 0: not checked
  double max_mean_logit_error = -1;
  int layers = 0;            // > 0: dummy models keep only their first N layers (depth sweeps)
  bool f16_compute = false;  // --compare f16-compute (else fp8-kv)
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--model" && v) {
      o->model = v, ++i;
    } else if (a == "--backend" && v) {
      o->backend = v, ++i;
    } else if (a == "--compare" && v &&
               (std::string(v) == "fp8-kv" || std::string(v) == "f16-compute")) {
      o->f16_compute = std::string(v) == "f16-compute", ++i;
    } else if (a == "--prompt-len" && v) {
      o->prompt_len = std::atoi(v), ++i;
    } else if (a == "--tokens" && v) {
      o->tokens = std::atoi(v), ++i;
    } else if (a == "--page" && v) {
      o->page = std::atoi(v), ++i;
    } else if (a == "--seed" && v) {
      o->seed = static_cast<uint32_t>(std::atoll(v)), ++i;
    } else if (a == "--min-top1" && v) {
      o->min_top1 = std::atof(v), ++i;
    } else if (a == "--max-logit-error" && v) {
      o->max_logit_error = std::atof(v), ++i;
    } else if (a == "--layers" && v) {
      o->layers = std::atoi(v), ++i;
    } else if (a == "--max-mean-logit-error" && v) {
      o->max_mean_logit_error = std::atof(v), ++i;
    } else {
      std::fprintf(stderr,
                   "usage: gannet-kv-accuracy [--model DIR|dummy:VARIANT] [--backend cpu|cuda]\n"
                   "  [--prompt-len N] [--tokens N] [--page N] [--seed N] [--min-top1 F]\n"
                   "  [--max-logit-error F] [--max-mean-logit-error F] [--layers N]\n"
                   "  [--compare fp8-kv|f16-compute]\n");
      return false;
    }
  }
  return o->prompt_len >= 1 && o->tokens >= 1 && o->page >= 1 && o->page <= kv::kMaxPageSize;
}

struct Model {
  model::ModelConfig config;
  std::unique_ptr<model::Checkpoint> checkpoint;
  model::ModelWeights weights;
};

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& dir, int layers) {
  auto m = std::make_unique<Model>();
  if (model::IsDummyModel(dir)) {
    GANNET_ASSIGN_OR_RETURN(m->config, model::DummyModelConfig(dir));
    model::TextConfig& c = m->config.text;
    if (layers > 0 && layers < c.num_hidden_layers) {
      // The first `layers` layers of the synthetic model (their weights do not change: the
      // generator keys every tensor by name). Models with KV sharing keep theirs out of reach.
      if (c.num_kv_shared_layers > 0) {
        return InvalidArgumentError("--layers: {} shares KV across layers; use a model without",
                                    dir);
      }
      c.num_hidden_layers = layers;
      c.layer_types.resize(layers);
    }
    m->weights = model::SyntheticWeights(m->config, model::kDummyWeightSeed);
  } else {
    GANNET_ASSIGN_OR_RETURN(m->config, model::LoadModelConfig(dir));
    GANNET_ASSIGN_OR_RETURN(m->checkpoint, model::Checkpoint::Open(dir));
    GANNET_ASSIGN_OR_RETURN(m->weights, model::BindWeights(m->config, *m->checkpoint));
  }
  if (m->config.kind != model::ModelKind::kTarget) {
    return InvalidArgumentError("{} is not a target model", dir);
  }
  return m;
}

// One runner over a KV cache of `quant`, fed `tokens` (the prompt, then one token a step). With
// `extend`, each decode step's token is the arg-max of the step before (the reference's greedy
// run) and appended to `tokens`; otherwise `tokens` is replayed. Calls on_row(position, logits)
// for the prompt's last row and every decode step.
template <typename OnRow>
absl::Status Run(const Model& m, backend::Backend* be, const Options& o, kv::KvQuant quant,
                 bool extend, std::vector<int32_t>* tokens, OnRow on_row) {
  const model::TextConfig& c = m.config.text;
  const int max_len = o.prompt_len + o.tokens + 1;
  const int pages = (max_len + o.page - 1) / o.page;
  runner::RunnerOptions ro;
  ro.max_tokens = std::max(o.prompt_len, 1);
  ro.max_seqs = 1;
  ro.max_logit_rows = 1;
  ro.page_size = o.page;
  ro.max_pages_per_seq = pages;
  GANNET_ASSIGN_OR_RETURN(auto runner, runner::ModelRunner::Create(m.config, m.weights, be, ro));
  const std::vector<kv::KvLayerGeometry> layers = runner::KvLayersOf(c);
  const kv::PerGroup<bool> present = kv::KvGroupsPresent(layers);
  const int32_t bytes = kv::KvElementBytes(quant, DTypeBits(be->kv_dtype()) / 8);
  GANNET_ASSIGN_OR_RETURN(
      kv::KvLayout layout,
      kv::MakeKvLayout(layers, o.page, c.sliding_window, bytes,
                       {present[0] ? pages : 0, present[1] ? pages : 0}, quant));
  GANNET_RETURN_IF_ERROR(runner->AttachKv(layout));
  std::vector<int32_t> table(pages);
  for (int i = 0; i < pages; ++i) table[i] = i;
  runner::StepResult res;
  for (int step = 0; step <= o.tokens; ++step) {
    const int start = step == 0 ? 0 : o.prompt_len + step - 1;
    const int n = step == 0 ? o.prompt_len : 1;
    runner::StepBatch b;
    runner::SeqStep s;
    s.tokens = {tokens->data() + start, static_cast<size_t>(n)};
    s.start_pos = start;
    s.page_table[0] = table;
    s.page_table[1] = table;
    b.seqs.push_back(s);
    GANNET_RETURN_IF_ERROR(runner->Forward(b, &res));
    const std::span<const float> row = res.Row(0);
    on_row(start + n - 1, row);
    if (extend && step < o.tokens) {
      tokens->push_back(
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    }
  }
  return absl::OkStatus();
}

int Main(const Options& o) {
  auto m = LoadModel(o.model, o.layers);
  if (!m.ok()) {
    std::fprintf(stderr, "kv-accuracy: %s\n", std::string(m.status().message()).c_str());
    return 2;
  }
  // The reference computes in the backend's own type (bf16 on CUDA); the candidate differs by its
  // KV storage or (f16-compute) its compute type.
  backend::BackendOptions ref_options{o.backend, 0, 0, o.f16_compute ? "bf16" : ""};
  auto be = backend::CreateBackend(ref_options);
  if (!be.ok()) {
    std::fprintf(stderr, "kv-accuracy: %s\n", std::string(be.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<backend::BackendChoice> f16_be = absl::UnknownError("unused");
  if (o.f16_compute) {
    f16_be = backend::CreateBackend({o.backend, 0, 0, "f16"});
    if (!f16_be.ok()) {
      std::fprintf(stderr, "kv-accuracy: %s\n", std::string(f16_be.status().message()).c_str());
      return 2;
    }
  }
  backend::Backend* candidate = o.f16_compute ? f16_be->backend.get() : be->backend.get();
  const kv::KvQuant candidate_kv = o.f16_compute ? kv::KvQuant::kNone : kv::KvQuant::kFp8E4M3;
  const int vocab = (*m)->config.text.vocab_size;
  std::vector<int32_t> tokens;
  std::mt19937 rng(o.seed);
  for (int i = 0; i < o.prompt_len; ++i) {
    tokens.push_back(i == 0 ? 2 : static_cast<int32_t>(3 + rng() % (vocab - 3)));
  }
  // The reference's logits rows, one per position (prompt end + decode steps).
  std::vector<float> ref(static_cast<size_t>(o.tokens + 1) * vocab);
  int row_index = 0;
  absl::Status st = Run(**m, be->backend.get(), o, kv::KvQuant::kNone, true, &tokens,
                        [&](int, std::span<const float> row) {
                          std::copy(row.begin(), row.end(),
                                    ref.begin() + static_cast<size_t>(row_index++) * vocab);
                        });
  double max_err = 0, sum_err = 0;
  int agree = 0, rows = 0, first_diverge = -1;
  if (st.ok()) {
    st = Run(**m, candidate, o, candidate_kv, false, &tokens,
             [&](int pos, std::span<const float> row) {
               const float* a = ref.data() + static_cast<size_t>(rows) * vocab;
               double diff = 0, scale = 0;
               for (int v = 0; v < vocab; ++v) {
                 diff = std::max(diff, std::fabs(static_cast<double>(a[v]) - row[v]));
                 scale = std::max(scale, std::fabs(static_cast<double>(a[v])));
               }
               const double err = scale > 0 ? diff / scale : diff;
               max_err = std::max(max_err, err);
               sum_err += err;
               const bool same = std::max_element(a, a + vocab) - a ==
                                 std::max_element(row.begin(), row.end()) - row.begin();
               agree += same;
               if (!same && first_diverge < 0) first_diverge = pos + 1 - o.prompt_len;
               ++rows;
             });
  }
  if (!st.ok()) {
    std::fprintf(stderr, "kv-accuracy: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  const double top1 = static_cast<double>(agree) / rows;
  const std::string what = o.f16_compute
                               ? "f16 compute (f32 residual, norm inputs, logits) vs bf16 compute"
                               : std::string("FP8 E4M3 KV (per-row scales) vs ") +
                                     DTypeName(be->backend->kv_dtype()).data() + " KV";
  std::printf(
      "kv-accuracy %s%s on %s: %s, prompt %d + %d greedy "
      "tokens: logit error max %.4f mean %.4f | top-1 agreement %.4f (%d/%d) | greedy "
      "tokens identical for %d\n",
      o.model.c_str(), o.layers > 0 ? (" (" + std::to_string(o.layers) + " layers)").c_str() : "",
      be->backend->DeviceName().c_str(), what.c_str(), o.prompt_len, o.tokens, max_err,
      sum_err / rows, top1, agree, rows, first_diverge < 0 ? o.tokens : first_diverge);
  bool ok = true;
  if (o.min_top1 >= 0 && top1 < o.min_top1) {
    std::printf("FAIL: top-1 agreement %.4f below the budget %.4f\n", top1, o.min_top1);
    ok = false;
  }
  if (o.max_logit_error >= 0 && max_err > o.max_logit_error) {
    std::printf("FAIL: logit error %.4f above the budget %.4f\n", max_err, o.max_logit_error);
    ok = false;
  }
  if (o.max_mean_logit_error >= 0 && sum_err / rows > o.max_mean_logit_error) {
    std::printf("FAIL: mean logit error %.4f above the budget %.4f\n", sum_err / rows,
                o.max_mean_logit_error);
    ok = false;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace gannet

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even when a timeout kills the run
  gannet::Options o;
  if (!gannet::ParseArgs(argc, argv, &o)) return 2;
  return gannet::Main(o);
}

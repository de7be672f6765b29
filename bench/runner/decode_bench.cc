// gannet-decode-bench: decode steps alone, straight on runner::ModelRunner, no scheduler.
//
// Serving numbers mix prefill chunks, scheduling and queueing into every step; this driver times
// what a decode step itself costs at a given batch size and context, so that the batched-decode
// efficiency can be read off directly:
//   bytes a step must read = the weights it needs (all of a dense model; for MoE the experts its
//   tokens route to, for PLE the gathered rows: model::DecodeStepWeightBytes) + for every sequence
//   the KV it attends (window-limited on sliding layers), against the device-to-device copy
//   bandwidth measured in the same process.
// Sequences are given contexts without a prefill (their KV pages hold zeros): the kernels read the
// same bytes either way. Sliding pages are a ring per sequence, released blocks marked -1, as the
// KV manager leaves them. With GANNET_PROFILE_OPS=1 (and --no-graphs) the op profile printed at
// exit covers decode steps only. The last step of each batch size runs inside an NVTX range
// "decode_step", so a kernel profiler can take exactly one step:
//   ncu --nvtx --nvtx-include "decode_step/" --metrics gpu__time_duration.sum ... --no-graphs
//
// With --prefill N every step also carries one prompt chunk of N tokens at positions P .. P + N - 1
// (--prefill-at P, default 0), after the decodes, as a serving step mixes them while prompts
// arrive (the scheduler plans decodes first); batch 0 is then the chunk alone. Such steps run
// eagerly, as served mixed steps do, and their line gives the time and the chunk's tokens/s (no
// bandwidth fraction: the chunk's GEMMs are bound by FLOPs). Mixed minus chunk-alone is what the
// decodes cost inside a mixed step, against the decode-only step's time.
//
// With --tp N the model runs tensor-parallel on devices 0 .. N - 1 (parallel::TpRunner over NCCL);
// the bandwidth fraction is then of N devices' copy bandwidth, for the model's bytes (what the
// ranks read twice -- replicated norms, PLE, shared KV heads -- is not counted).
//
//   gannet-decode-bench --model dummy:31b --batches 1,16,64 --context 1500 --steps 20 [--tp 2]
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/common/device_refs.h"
#include "lib/backend/backend_factory.h"
#include "lib/common/dtype.h"
#include "lib/common/status.h"
#include "lib/model/config.h"
#include "lib/model/quantize_checkpoint.h"
#include "lib/model/tp_shard.h"
#include "lib/model/variants.h"
#include "lib/model/weights.h"
#include "lib/parallel/tp_runner.h"
#include "lib/parallel/tp_setup.h"
#include "lib/runner/model_runner.h"

namespace gannet {
namespace {

struct Options {
  std::string model = "dummy:31b";  // a dummy variant, or a checkpoint folder's geometry
  std::string backend = "cuda";     // --backend cpu: the host logic alone (smoke tests)
  std::vector<int> batches = {1, 16, 64};
  int context = 1500;
  int spread = 0;  // contexts uniform in [context - spread, context + spread]
  int steps = 20;
  int page = 16;
  bool fp8_kv = false;  // --kv fp8: the FP8 E4M3 KV cache (1 byte + a scale per row)
  // --weight-dtype int4-g32|int4-g128|...: the linear layers' synthetic weights in that int4
  // format (model::QuantizeAtLoad), as `gannet quantize` would leave them.
  std::string weight_dtype;
  bool random_kv = false;        // --random-kv: KV arrays hold random values instead of zeros
  bool separate_k_eq_v = false;  // --kv-separate-k-eq-v: K=V layers store K and V (not V alone)
  bool graphs = true;
  // --scatter N: pools of N times the pages the batch needs, each sequence's pages drawn at random
  // from all of them, as a served pool after many admissions and window releases (1: each
  // sequence's pages side by side).
  int scatter = 1;
  int tp = 0;          // 0: one device, plain runner; N >= 1: TpRunner over N devices
  int prefill = 0;     // --prefill N: a prompt chunk of N tokens in every step
  int prefill_at = 0;  // --prefill-at P: the chunk's first position
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--model" && v) {
      o->model = v, ++i;
    } else if (a == "--backend" && v && (std::string(v) == "cpu" || std::string(v) == "cuda")) {
      o->backend = v, ++i;
    } else if (a == "--batches" && v) {
      o->batches.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');) o->batches.push_back(std::atoi(t.c_str()));
      ++i;
    } else if (a == "--context" && v) {
      o->context = std::atoi(v), ++i;
    } else if (a == "--spread" && v) {
      o->spread = std::atoi(v), ++i;
    } else if (a == "--steps" && v) {
      o->steps = std::atoi(v), ++i;
    } else if (a == "--page" && v) {
      o->page = std::atoi(v), ++i;
    } else if (a == "--kv" && v && (std::string(v) == "fp8" || std::string(v) == "bf16")) {
      o->fp8_kv = std::string(v) == "fp8", ++i;
    } else if (a == "--scatter" && v) {
      o->scatter = std::atoi(v), ++i;
    } else if (a == "--tp" && v) {
      o->tp = std::atoi(v), ++i;
    } else if (a == "--prefill" && v) {
      o->prefill = std::atoi(v), ++i;
    } else if (a == "--prefill-at" && v) {
      o->prefill_at = std::atoi(v), ++i;
    } else if (a == "--weight-dtype" && v) {
      o->weight_dtype = v, ++i;
    } else if (a == "--random-kv") {
      o->random_kv = true;
    } else if (a == "--kv-separate-k-eq-v") {
      o->separate_k_eq_v = true;
    } else if (a == "--no-graphs") {
      o->graphs = false;
    } else {
      std::fprintf(
          stderr,
          "usage: gannet-decode-bench [--model dummy:VARIANT|DIR] [--backend cuda|cpu]\n"
          "  [--batches 1,16,64]\n"
          "  [--context N] [--spread N] [--steps N] [--page N] [--kv bf16|fp8] [--random-kv]\n"
          "  [--kv-separate-k-eq-v] [--no-graphs] [--scatter N] [--tp N] [--weight-dtype "
          "int4-g32]\n"
          "  [--prefill N] [--prefill-at P]\n");
      return false;
    }
  }
  // Batch 0 (no decodes) is the prompt chunk alone.
  const int min_batch = o->prefill > 0 ? 0 : 1;
  const bool ok = !o->batches.empty() &&
                  *std::min_element(o->batches.begin(), o->batches.end()) >= min_batch &&
                  o->prefill >= 0 && o->prefill_at >= 0 && o->context > o->spread &&
                  o->spread >= 0 && o->steps > 0 && o->page > 0 && o->tp >= 0 && o->scatter >= 1 &&
                  o->scatter <= 64 && o->tp <= model::kMaxTensorParallel;
  if (!ok) {
    std::fprintf(stderr,
                 "decode-bench: batches must be >= 1 (>= 0 with --prefill), --context above "
                 "--spread, --steps, --page and --scatter (<= 64) >= 1, --tp <= %d\n",
                 model::kMaxTensorParallel);
  }
  return ok;
}

// Random KV in every array (values like a normed head's: N(0, 1) bf16, or FP8 rows with their
// scales), so the kernels see what a served step sees instead of zero pages.
absl::Status FillRandomKv(const runner::ModelRunner& r, backend::Backend* be) {
  const runner::KvStorage& kv = *r.kv();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  // One random block, repeated: generating every byte on the host would take minutes.
  constexpr size_t kBlock = size_t{1} << 24;
  std::vector<uint8_t> block(kBlock);
  for (size_t i = 0; i < kBlock; i += 2) {
    const uint16_t b = FloatToBf16(nd(rng));
    block[i] = static_cast<uint8_t>(b), block[i + 1] = static_cast<uint8_t>(b >> 8);
  }
  std::vector<uint8_t> fp8(kBlock);
  for (uint8_t& b : fp8) b = FloatToFp8E4M3(nd(rng) * 100.f);  // a row of amax ~400
  for (int l = 0; l < r.config().text.num_hidden_layers; ++l) {
    if (!kv.layout().layers[l].owns_kv()) continue;
    const backend::LayerKvView& x = kv.Layer(l);
    for (const backend::Tensor* t : {&x.k, &x.v, &x.k_scale, &x.v_scale}) {
      if (!t->valid()) continue;
      const size_t bytes = static_cast<size_t>(t->numel()) * t->elem_bytes();
      if (t->dtype == DType::kF32) {  // scales: amax / 448 of a unit-variance row, about 1/112
        GANNET_RETURN_IF_ERROR(be->Fill(*t, 1.0f / 112));
        continue;
      }
      const std::vector<uint8_t>& src = t->dtype == DType::kF8E4M3 ? fp8 : block;
      for (size_t off = 0; off < bytes; off += kBlock) {
        GANNET_RETURN_IF_ERROR(be->CopyToDevice(static_cast<uint8_t*>(t->data) + off, src.data(),
                                                std::min(kBlock, bytes - off)));
      }
    }
  }
  return be->Synchronize();
}

int Run(const Options& o) {
  // "31b" and "dummy:31b" both name the synthetic 31B; a folder gives its config.json's geometry
  // (random weights all the same: tiny checkpoints for smoke runs on the CPU).
  const bool folder = !model::IsDummyModel(o.model) && std::filesystem::is_directory(o.model);
  auto config =
      folder ? model::LoadModelConfig(o.model)
             : model::DummyModelConfig(model::IsDummyModel(o.model) ? o.model : "dummy:" + o.model);
  if (!config.ok()) {
    std::fprintf(stderr, "decode-bench: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const model::TextConfig& c = config->text;
  const double copy_gbs = bench::MeasureCopyBandwidth();

  auto group = parallel::CreateTpGroup({o.backend, 0, 0, ""}, std::max(1, o.tp), {});
  if (!group.ok()) {
    std::fprintf(stderr, "decode-bench: %s\n", std::string(group.status().message()).c_str());
    return 1;
  }
  const int devices = std::max(1, o.tp);
  // Each device's geometry (the whole model without --tp).
  const model::ModelConfig rank_config = o.tp > 0 ? model::ShardConfig(*config, o.tp) : *config;
  const model::TextConfig& rc = rank_config.text;
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  // Steps per batch size: the timed ones after `warm` (eager, capture, first replay). The last
  // computes position context + spread + warm + steps - 1.
  const int warm = o.graphs ? 3 : 1;
  const int max_len = o.context + o.spread + warm + o.steps;
  const int window = c.sliding_window;
  // A sequence holds at most window / page + 1 in-window sliding blocks; one more lets the ring
  // never alias a live block.
  const int ring = window > 0 ? window / o.page + 2 : 0;
  const int full_pages = (max_len + o.page - 1) / o.page;
  // The prompt chunk's pages after the decodes': its full-layer blocks, and a ring that holds its
  // first row's window and all N rows at once.
  const int chunk_end = o.prefill_at + o.prefill;
  const int chunk_full = o.prefill > 0 ? (chunk_end + o.page - 1) / o.page : 0;
  const int chunk_ring = o.prefill > 0 && window > 0 ? (window + o.prefill) / o.page + 2 : 0;
  const int chunk_seqs = o.prefill > 0 ? 1 : 0;
  const kv::KvQuant quant = o.fp8_kv ? kv::KvQuant::kFp8E4M3 : kv::KvQuant::kNone;
  // The backend's own KV element (bf16 on CUDA, f32 on the CPU) unless FP8.
  const int32_t kv_native_bytes = DTypeBits(group->backends[0]->kv_dtype()) / 8;
  runner::RunnerOptions ro;
  ro.max_tokens = max_batch + o.prefill;
  ro.max_seqs = max_batch + chunk_seqs;
  ro.max_logit_rows = max_batch + chunk_seqs;
  ro.page_size = o.page;
  ro.max_pages_per_seq = std::max(full_pages, chunk_full);
  ro.enable_graphs = o.graphs;
  model::ModelWeights weights = model::SyntheticWeights(*config, model::kDummyWeightSeed);
  if (!o.weight_dtype.empty()) {
    absl::StatusOr<model::QuantizeOptions> q = model::ParseWeightDtype(o.weight_dtype);
    absl::Status st = !q.ok() ? q.status()
                      : q->float_format.has_value()
                          ? UnimplementedError(
                                "--weight-dtype: only int4 formats are "
                                "generated synthetically")
                          : model::QuantizeAtLoad(&weights, model::Int4FormatOf(*q, DType::kBF16));
    if (!st.ok()) {
      std::fprintf(stderr, "decode-bench: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<runner::StepRunner>> runner;
  if (o.tp > 0) {
    std::vector<parallel::TpRankParts> ranks(o.tp);
    for (int r = 0; r < o.tp; ++r) {
      ranks[r].backend = group->backends[r].get();
      ranks[r].collectives = std::move(group->collectives[r]);
    }
    runner = parallel::TpRunner::Create(*config, weights, std::move(ranks), group->shared, ro);
  } else {
    runner = runner::ModelRunner::Create(*config, weights, group->backends[0].get(), ro);
  }
  absl::Status attached = runner.status();
  if (runner.ok()) {
    const kv::PerGroup<bool> present =
        kv::KvGroupsPresent(runner::KvLayersOf(rc, !o.separate_k_eq_v));
    auto layout =
        kv::MakeKvLayout(runner::KvLayersOf(rc, !o.separate_k_eq_v), o.page, window,
                         kv::KvElementBytes(quant, kv_native_bytes),
                         {present[0] ? (max_batch * ring + chunk_ring) * o.scatter : 0,
                          present[1] ? (max_batch * full_pages + chunk_full) * o.scatter : 0},
                         quant);
    attached = layout.ok() ? (*runner)->AttachKv(*layout) : layout.status();
  }
  if (!attached.ok()) {
    std::fprintf(stderr, "decode-bench: %s\n", std::string(attached.message()).c_str());
    return 1;
  }
  if (o.random_kv) {
    absl::Status st = o.tp > 0 ? InvalidArgumentError("--random-kv runs without --tp")
                               : FillRandomKv(*static_cast<runner::ModelRunner*>(runner->get()),
                                              group->backends[0].get());
    if (!st.ok()) {
      std::fprintf(stderr, "decode-bench: %s\n", std::string(st.message()).c_str());
      return 1;
    }
  }
  const auto per_token = kv::KvBytesPerToken(runner::KvLayersOf(c, !o.separate_k_eq_v),
                                             kv::KvElementBytes(quant, kv_native_bytes), quant);
  const double weight_bytes = static_cast<double>((*runner)->weight_bytes());
  std::printf(
      "decode-bench %s%s%s: weights %.2f GB (a batch-1 step reads %.2f GB), KV %.0f + %.0f "
      "bytes/token (sliding, full), "
      "window %d, page %d, KV %s, graphs %s, copy %.0f GB/s x %d device(s)\n",
      o.model.c_str(), o.weight_dtype.empty() ? "" : " ", o.weight_dtype.c_str(),
      weight_bytes / 1e9, model::DecodeStepWeightBytes(*config, weights, 1) / 1e9,
      static_cast<double>(per_token[0]), static_cast<double>(per_token[1]), window, o.page,
      o.fp8_kv               ? "fp8"
      : kv_native_bytes == 4 ? "f32"
                             : "bf16",
      o.graphs ? "on" : "off", copy_gbs, devices);

  std::mt19937 rng(7);
  // Page ids: the identity, or (--scatter) a random permutation of the pool's pages.
  std::vector<int32_t> page_of[2];
  page_of[0].resize((static_cast<size_t>(max_batch) * ring + chunk_ring) * o.scatter);
  page_of[1].resize((static_cast<size_t>(max_batch) * full_pages + chunk_full) * o.scatter);
  for (auto& p : page_of) {
    std::iota(p.begin(), p.end(), 0);
    if (o.scatter > 1) std::shuffle(p.begin(), p.end(), rng);
  }
  // The prompt chunk: the same N tokens at the same positions every step (its KV rewritten).
  std::vector<int32_t> chunk_tokens(o.prefill);
  for (int32_t& t : chunk_tokens) t = static_cast<int32_t>(rng() % c.vocab_size);
  std::vector<int32_t> chunk_table[2];
  if (o.prefill > 0) {
    const int blocks = (chunk_end - 1) / o.page + 1;
    const int first_live = window > 0 ? std::max(0, o.prefill_at - window + 1) / o.page : 0;
    chunk_table[0].assign(window > 0 ? blocks : 0, -1);
    for (int blk = first_live; window > 0 && blk < blocks; ++blk) {
      chunk_table[0][blk] = page_of[0][static_cast<size_t>(max_batch) * ring + blk % chunk_ring];
    }
    chunk_table[1].resize(blocks);
    for (int blk = 0; blk < blocks; ++blk) {
      chunk_table[1][blk] = page_of[1][static_cast<size_t>(max_batch) * full_pages + blk];
    }
  }
  for (int batch : o.batches) {
    std::vector<int> ctx(batch);
    std::uniform_int_distribution<int> pick(o.context - o.spread, o.context + o.spread);
    for (int& l : ctx) l = pick(rng);
    std::vector<std::vector<int32_t>> tables[2];
    for (auto& t : tables) t.assign(batch, {});
    std::vector<int32_t> tokens(batch);
    std::vector<double> step_ms;
    double kv_bytes_sum = 0;
    runner::StepResult result;
    for (int step = 0; step < warm + o.steps; ++step) {
      runner::StepBatch b;
      double kv_bytes = 0;
      for (int s = 0; s < batch; ++s) {
        const int pos = ctx[s] + step;  // the position this step computes
        const int blocks = pos / o.page + 1;
        const int first_live = window > 0 ? std::max(0, pos - window + 1) / o.page : 0;
        tables[0][s].assign(window > 0 ? blocks : 0, -1);
        for (int blk = first_live; window > 0 && blk < blocks; ++blk) {
          tables[0][s][blk] = page_of[0][s * ring + blk % ring];
        }
        tables[1][s].resize(blocks);
        for (int blk = 0; blk < blocks; ++blk) tables[1][s][blk] = page_of[1][s * full_pages + blk];
        tokens[s] = static_cast<int32_t>(rng() % c.vocab_size);
        runner::SeqStep seq;
        seq.tokens = {&tokens[s], 1};
        seq.start_pos = pos;
        seq.page_table[0] = tables[0][s];
        seq.page_table[1] = tables[1][s];
        b.seqs.push_back(seq);
        b.device_sampling.push_back(sampling::DrawParams::Greedy());
        b.host_logits.push_back(0);
        const int keys = pos + 1;
        kv_bytes += static_cast<double>(per_token[0]) * (window > 0 ? std::min(keys, window) : 0) +
                    static_cast<double>(per_token[1]) * keys;
      }
      if (o.prefill > 0) {  // after the decodes, as the scheduler plans a step
        runner::SeqStep chunk;
        chunk.tokens = chunk_tokens;
        chunk.start_pos = o.prefill_at;
        chunk.page_table[0] = chunk_table[0];
        chunk.page_table[1] = chunk_table[1];
        b.seqs.push_back(chunk);
        b.device_sampling.push_back(sampling::DrawParams::Greedy());
        b.host_logits.push_back(0);
      }
      const bool last = step + 1 == warm + o.steps;
      if (last) nvtxRangePushA("decode_step");
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status st = (*runner)->Forward(b, &result);
      if (last) nvtxRangePop();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        std::fprintf(stderr, "decode-bench: batch %d step %d: %s\n", batch, step,
                     std::string(st.message()).c_str());
        return 1;
      }
      if (step >= warm) {
        step_ms.push_back(ms);
        kv_bytes_sum += kv_bytes;
      }
    }
    std::sort(step_ms.begin(), step_ms.end());
    const double med = step_ms[step_ms.size() / 2];
    if (o.prefill > 0) {
      // A mixed step: its chunk's GEMMs are bound by FLOPs, so no bandwidth fraction.
      std::printf(
          "  batch %3d ctx %5d + prefill %d at %d: %8.2f ms/step (min %.2f, max %.2f)  "
          "%7.1f decode tok/s  %8.0f prompt tok/s\n",
          batch, o.context, o.prefill, o.prefill_at, med, step_ms.front(), step_ms.back(),
          batch * 1e3 / med, o.prefill * 1e3 / med);
      std::fflush(stdout);
      continue;
    }
    const double kv = kv_bytes_sum / o.steps;
    // The weights this step must read: all of a dense model, the experts its tokens route to and
    // the PLE rows it gathers (model::DecodeStepWeightBytes).
    const double read = model::DecodeStepWeightBytes(*config, weights, batch);
    const double gbs = (read + kv) / (med * 1e-3) / 1e9 / devices;  // per device
    std::printf(
        "  batch %3d ctx %5d: %8.2f ms/step (min %.2f, max %.2f)  %7.1f tok/s  "
        "weights read %.2f GB + KV %.2f GB  %6.0f GB/s = %5.1f%% of copy  ideal %.2f ms\n",
        batch, o.context, med, step_ms.front(), step_ms.back(), batch * 1e3 / med, read / 1e9,
        kv / 1e9, gbs, copy_gbs > 0 ? 100 * gbs / copy_gbs : 0.0,
        copy_gbs > 0 ? (read + kv) / (devices * copy_gbs * 1e9) * 1e3 : 0.0);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace gannet

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even when a timeout kills the run
  gannet::Options o;
  if (!gannet::ParseArgs(argc, argv, &o)) return 2;
  return gannet::Run(o);
}

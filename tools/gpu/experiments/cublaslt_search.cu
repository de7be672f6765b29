// Scratch experiment: is there a cuBLASLt configuration beyond its heuristic's top 8 that runs the
// decode step's projections at 64-80 rows faster? The engine (CudaLinear) timed the heuristic's
// first 8 algos; at TP=2's rank shapes with 80 rows the down projection reached 74.6% of copy and
// the sliding o_proj 75.5% (bench/RESULTS_MULTIGPU.md, session 25). This times the heuristic's 8,
// then every variant of them (their algo id and stages) over each tile, split-K count, reduction
// scheme and cluster shape the algo accepts (cublasLtMatmulAlgoCheck), screened with two rounds on
// rotated weight copies (past the L2), retimes the best 8 with every stages id, and prints the
// best against the heuristic's best of 8 and the copy-bandwidth bound.
// Outcome (H200, session 36): the heuristic splits K with a separate reduction where the same
// tiles unsplit on a 4x1x1 cluster run 6-17% faster (TP=2 down at 80 rows 37.3 -> 32.2 us, TP=1
// down at 64 rows 64.3 -> 59.6); CudaLinear times those variants (cublaslt_candidates.h).
// nvcc -std=c++17 -arch=sm_90 -O3 tools/gpu/experiments/cublaslt_search.cu -lcublasLt -o /tmp/cls
// /tmp/cls [shape ...]   shape = M,N,K (default: 31B's projections at TP=2 M=80 and TP=1 M=64) (~1 min a shape)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.cuh"
#define CB(x)                                                                     \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      printf("%s:%d cublas status %d\n", __FILE__, __LINE__, static_cast<int>(s_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

namespace {

__global__ void Fill(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16((static_cast<int>(h & 0xFFFF) - 32768) * (1.0f / 32768.0f) * 0.05f);
  }
}

struct Shape {
  int m, n, k;
  std::string name;
};

struct Config {
  cublasLtMatmulAlgo_t algo;
  int id = 0, tile = 0, splitk = 1, red = 0, swz = 0, stages = 0, cluster = 0;
  size_t ws = 0;
  float us = 0;
};

constexpr size_t kWorkspace = 32u << 20;  // the engine's (cuda_linear.cc)
constexpr int kRounds = 5, kPerRound = 12;

struct Problem {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  std::vector<__nv_bfloat16*> w;  // rotated copies
  __nv_bfloat16* x;
  __nv_bfloat16* out;
  void* ws;
  cudaStream_t s;
  cudaEvent_t e0, e1;
};

// Median over rounds of the mean per call, each call on the next weight copy.
float Time(Problem& p, const cublasLtMatmulAlgo_t* algo, int rounds = kRounds) {
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&](int i) {
    return cublasLtMatmul(p.h, p.desc, &alpha, p.w[i % p.w.size()], p.a, p.x, p.b, &beta, p.out,
                          p.c, p.out, p.c, algo, p.ws, kWorkspace, p.s);
  };
  for (int i = 0; i < 3; ++i) {
    if (run(i) != CUBLAS_STATUS_SUCCESS) return -1;
  }
  std::vector<float> t;
  for (int r = 0; r < rounds; ++r) {
    CK(cudaEventRecord(p.e0, p.s));
    for (int i = 0; i < kPerRound; ++i) run(i);
    CK(cudaEventRecord(p.e1, p.s));
    CK(cudaEventSynchronize(p.e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, p.e0, p.e1));
    t.push_back(ms * 1e3f / kPerRound);
  }
  if (cudaGetLastError() != cudaSuccess) return -1;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename T>
void SetCfg(cublasLtMatmulAlgo_t* a, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  CB(cublasLtMatmulAlgoConfigSetAttribute(a, attr, &v, sizeof(v)));
}

void Search(const Shape& sh, double copy_gbs) {
  Problem p{};
  CB(cublasLtCreate(&p.h));
  CK(cudaStreamCreateWithFlags(&p.s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&p.e0));
  CK(cudaEventCreate(&p.e1));
  const size_t wbytes = static_cast<size_t>(sh.n) * sh.k * 2;
  const int copies = static_cast<int>(std::max<size_t>(2, (240u << 20) / wbytes + 1));
  for (int i = 0; i < copies; ++i) {
    __nv_bfloat16* w;
    CK(cudaMalloc(&w, wbytes));
    Fill<<<1024, 256>>>(w, wbytes / 2, 17 + i);
    p.w.push_back(w);
  }
  CK(cudaMalloc(&p.x, static_cast<size_t>(sh.m) * sh.k * 2));
  Fill<<<256, 256>>>(p.x, static_cast<size_t>(sh.m) * sh.k, 99);
  CK(cudaMalloc(&p.out, static_cast<size_t>(sh.m) * sh.n * 2));
  CK(cudaMalloc(&p.ws, kWorkspace));
  CK(cudaDeviceSynchronize());
  CB(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CB(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CB(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  CB(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, sh.k, sh.n, sh.k));
  CB(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, sh.k, sh.m, sh.k));
  CB(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, sh.n, sh.m, sh.n));
  const double bound_us = (wbytes + 2.0 * sh.m * (sh.k + sh.n)) / (copy_gbs * 1e3);

  // The engine's candidates: the heuristic's first 8, the fastest of them.
  cublasLtMatmulPreference_t pref;
  CB(cublasLtMatmulPreferenceCreate(&pref));
  size_t wsb = kWorkspace;
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                          sizeof(wsb)));
  cublasLtMatmulHeuristicResult_t heur[8];
  int nheur = 0;
  CB(cublasLtMatmulAlgoGetHeuristic(p.h, p.desc, p.a, p.b, p.c, p.c, pref, 8, heur, &nheur));
  float heur_first = -1, heur_best = 1e30f;
  int heur_best_i = -1;
  for (int i = 0; i < nheur; ++i) {
    const float t = Time(p, &heur[i].algo);
    if (i == 0) heur_first = t;
    if (t > 0 && t < heur_best) {
      heur_best = t;
      heur_best_i = i;
    }
  }
  auto describe = [](const cublasLtMatmulAlgo_t& a) {
    int32_t id = 0;
    uint32_t tile = 0, sk = 0, red = 0, swz = 0, st = 0;
    uint16_t cl = 0;
    size_t w = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof(sk), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof(st), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof(cl), &w);
    char buf[160];
    snprintf(buf, sizeof(buf), "id %d tile %u splitk %u red %u swz %u stages %u cluster %u", id,
             tile, sk, red, swz, st, static_cast<unsigned>(cl));
    return std::string(buf);
  };
  printf("\n%s M=%d N=%d K=%d: %.2f MB of weights, copy bound %.1f us\n", sh.name.c_str(), sh.m,
         sh.n, sh.k, wbytes / 1e6, bound_us);
  for (int i = 0; i < nheur; ++i) {
    const float t = Time(p, &heur[i].algo);
    printf("  heuristic %d: %6.1f us (%4.1f%%)  %s\n", i, t, 100 * bound_us / t,
           describe(heur[i].algo).c_str());
  }

  // Every variant of the heuristic's algos (their id and stages) over each tile, split-K count,
  // reduction scheme and cluster shape the algo accepts (cublasLtMatmulAlgoCheck), screened with
  // two rounds; the best 8 are retimed with every stages id below.
  std::vector<Config> found;
  const int splits[] = {1, 2, 3, 4, 5, 6, 8};
  int checked = 0, nids = 0;
  std::vector<std::string> seen;
  for (int hi = 0; hi < nheur; ++hi) {
    const cublasLtMatmulAlgo_t base = heur[hi].algo;
    size_t w = 0;
    int32_t id = 0;
    uint32_t stage = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&base, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&base, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof(stage), &w);
    const std::string tag = std::to_string(id) + "/" + std::to_string(stage);
    if (std::find(seen.begin(), seen.end(), tag) != seen.end()) continue;
    seen.push_back(tag);
    ++nids;
    uint32_t tiles[1024];
    int ntiles = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, sizeof(tiles),
                                          &w) == CUBLAS_STATUS_SUCCESS) {
      ntiles = static_cast<int>(w / sizeof(uint32_t));
    }
    int32_t splitk_ok = 0;
    uint32_t red_mask = 0;
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok, sizeof(splitk_ok), &w);
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &red_mask, sizeof(red_mask), &w);
    printf("  algo %d stages %u: %d tiles, split-K %d, reductions 0x%x\n", id, stage, ntiles,
           splitk_ok, red_mask);
    for (int ti = 0; ti < ntiles; ++ti) {
      for (int sk : splits) {
        if (sk > 1 && !splitk_ok) continue;
        for (uint32_t red = 0; red <= 4; red = red == 0 ? 1 : red << 1) {
          if (sk == 1 && red != 0) continue;
          if (sk > 1 && (red == 0 || !(red_mask & red))) continue;
          for (int cl = 0; cl < CUBLASLT_CLUSTER_SHAPE_END; ++cl) {
            cublasLtMatmulAlgo_t a = base;
            SetCfg<uint32_t>(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, tiles[ti]);
            SetCfg<int32_t>(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, sk);
            SetCfg<uint32_t>(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, red);
            SetCfg<uint16_t>(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, static_cast<uint16_t>(cl));
            cublasLtMatmulHeuristicResult_t r{};
            ++checked;
            if (cublasLtMatmulAlgoCheck(p.h, p.desc, p.a, p.b, p.c, p.c, &a, &r) !=
                    CUBLAS_STATUS_SUCCESS ||
                r.workspaceSize > kWorkspace) {
              continue;
            }
            Config c;
            c.algo = a;
            c.id = id;
            c.tile = static_cast<int>(tiles[ti]);
            c.splitk = sk;
            c.red = static_cast<int>(red);
            c.cluster = cl;
            c.ws = r.workspaceSize;
            found.push_back(c);
          }
        }
      }
    }
  }
  for (Config& c : found) c.us = Time(p, &c.algo, 2);
  found.erase(std::remove_if(found.begin(), found.end(), [](const Config& c) { return c.us <= 0; }),
              found.end());
  std::sort(found.begin(), found.end(), [](const Config& a, const Config& b) { return a.us < b.us; });
  printf("  %d algo/stages pairs, %d configurations checked, %zu ran\n", nids, checked, found.size());

  // The best 8 again with every stages id and cluster shape.
  std::vector<Config> refined;
  for (size_t i = 0; i < found.size() && i < 8; ++i) {
    size_t w = 0;
    uint32_t stages[64];
    int nst = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&found[i].algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages,
                                          sizeof(stages), &w) == CUBLAS_STATUS_SUCCESS) {
      nst = static_cast<int>(w / sizeof(uint32_t));
    }
    for (int si = 0; si < nst; ++si) {
      {
        const int cl = found[i].cluster;
        cublasLtMatmulAlgo_t a = found[i].algo;
        SetCfg<uint32_t>(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, stages[si]);
        cublasLtMatmulHeuristicResult_t r{};
        if (cublasLtMatmulAlgoCheck(p.h, p.desc, p.a, p.b, p.c, p.c, &a, &r) !=
                CUBLAS_STATUS_SUCCESS ||
            r.workspaceSize > kWorkspace) {
          continue;
        }
        Config c = found[i];
        c.algo = a;
        c.stages = static_cast<int>(stages[si]);
        c.cluster = cl;
        c.us = Time(p, &a);
        if (c.us > 0) refined.push_back(c);
      }
    }
  }
  std::sort(refined.begin(), refined.end(), [](const Config& a, const Config& b) { return a.us < b.us; });
  for (size_t i = 0; i < found.size() && i < 5; ++i) {
    printf("  search %zu: %6.1f us (%4.1f%%)  %s ws %zu\n", i, found[i].us,
           100 * bound_us / found[i].us, describe(found[i].algo).c_str(), found[i].ws);
  }
  for (size_t i = 0; i < refined.size() && i < 5; ++i) {
    // Timed again beside the heuristic's best, so the two share one moment of the GPU.
    const float again = Time(p, &refined[i].algo);
    const float hb = Time(p, &heur[heur_best_i].algo);
    printf("  refined %zu: %6.1f us (%4.1f%%), again %6.1f vs heuristic best %6.1f  %s\n", i,
           refined[i].us, 100 * bound_us / refined[i].us, again, hb,
           describe(refined[i].algo).c_str());
  }
  printf("  SUMMARY %s: heuristic first %.1f us, best of 8 %.1f us (%.1f%%, #%d); searched best %.1f us "
         "(%.1f%%)\n",
         sh.name.c_str(), heur_first, heur_best, 100 * bound_us / heur_best, heur_best_i,
         refined.empty() ? 0.0f : refined[0].us,
         refined.empty() ? 0.0 : 100 * bound_us / refined[0].us);
  for (auto* w : p.w) CK(cudaFree(w));
  CK(cudaFree(p.x));
  CK(cudaFree(p.out));
  CK(cudaFree(p.ws));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.c);
  cublasLtMatmulDescDestroy(p.desc);
  cublasLtDestroy(p.h);
  CK(cudaStreamDestroy(p.s));
}

// Device-to-device copy of 1 GB, GB/s (read + write counted once each, as the engine's benches).
double CopyGbs() {
  const size_t bytes = 1u << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * bytes * 10 / (ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    Shape s;
    if (sscanf(argv[i], "%d,%d,%d", &s.m, &s.n, &s.k) != 3) {
      printf("bad shape '%s' (want M,N,K)\n", argv[i]);
      return 2;
    }
    s.name = argv[i];
    shapes.push_back(s);
  }
  if (shapes.empty()) {
    // 31B: hidden 5376; sliding QKV 16384, o_proj K 8192; full QKV 18432, o_proj K 16384;
    // MLP 21504. TP=2 halves N of QKV and gate/up and K of o_proj and down.
    shapes = {{80, 5376, 10752, "tp2 down"},      {80, 5376, 4096, "tp2 o_proj sliding"},
              {80, 5376, 8192, "tp2 o_proj full"}, {80, 8192, 5376, "tp2 qkv sliding"},
              {80, 9216, 5376, "tp2 qkv full"},    {80, 21504, 5376, "tp2 gate/up"},
              {64, 5376, 21504, "tp1 down"},       {64, 5376, 8192, "tp1 o_proj sliding"},
              {64, 5376, 16384, "tp1 o_proj full"}};
  }
  const double gbs = CopyGbs();
  printf("copy %.0f GB/s\n", gbs);
  for (const Shape& s : shapes) Search(s, gbs);
  return 0;
}

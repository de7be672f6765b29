// The custom all-reduce kernels (kernels/comm/custom_allreduce.h: push and pull) with its ranks
// simulated on one GPU: each rank's workspace is a separate allocation and each rank launches on
// its own stream, so the kernels meet through the same flags and peer reads as on several devices.
// Checks the sums against the host (rank order, f32 accumulation, one rounding), repeated calls
// (the epoch and buffer parity), CUDA graph replays, and that a missing peer ends in the abort flag
// instead of a hang. The multi-GPU comparison against NCCL is in cuda_tp_test
// (MultiGpuCollectivesTest).
#include <cuda_runtime.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/comm/custom_allreduce.h"
#include "kernels/norm/norm.h"
#include "lib/common/dtype.h"
#include "tests/backend/cuda_test_util.h"

namespace gannet {
namespace {

// One host thread drives every simulated rank, on one GPU. Two things that cannot happen with a
// thread (or process) per GPU would deadlock it, so they are switched off before CUDA starts:
//  - lazy module loading: the first launch of a kernel loads it, and a load waits until the
//    device's queued work drains, which includes a rank's all-reduce waiting for a peer whose
//    launch comes after the load (the fused test's first shape hung so, on two H200s);
//  - PDL: the next kernel of a rank's stream launches its blocks early and they hold SMs while
//    they wait (a fused block fills an SM), which can starve a peer rank's blocks of SMs.
// The multi-GPU tests run the kernels with both, a rank per thread or process.
const bool kOneThreadSetup = [] {
  return setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/1) == 0 &&
         setenv("GANNET_PDL", "0", /*overwrite=*/1) == 0;
}();

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

struct SimGroup {
  int world = 0;
  std::vector<void*> ws, x;
  std::vector<cudaStream_t> streams;
  int* abort = nullptr;

  explicit SimGroup(int w) : world(w), ws(w), x(w), streams(w) {
    for (int r = 0; r < w; ++r) {
      EXPECT_EQ(cudaMalloc(&ws[r], kernels::CustomAllReduceWorkspaceBytes()), cudaSuccess);
      EXPECT_EQ(cudaMemset(ws[r], 0, kernels::CustomAllReduceWorkspaceBytes()), cudaSuccess);
      EXPECT_EQ(cudaMalloc(&x[r], kernels::kCustomAllReduceMaxBytes), cudaSuccess);
      EXPECT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    }
    EXPECT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&abort), sizeof(int), cudaHostAllocMapped),
              cudaSuccess);
    *abort = 0;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~SimGroup() {
    for (int r = 0; r < world; ++r) {
      cudaFree(ws[r]);
      cudaFree(x[r]);
      cudaStreamDestroy(streams[r]);
    }
    cudaFreeHost(abort);
  }
  cudaError_t Launch(int r, int64_t n, kernels::AllReduceType t) {
    return kernels::LaunchCustomAllReduce(x[r], n, t, r, world, ws.data(), abort, streams[r]);
  }
};

// Per rank inputs of call `call`, and the expected result computed as the kernel defines it.
struct Case {
  std::vector<std::vector<float>> in;
  std::vector<float> want;
};

Case MakeCase(int world, int64_t n, DType dt, int call) {
  Case c;
  c.in.assign(world, std::vector<float>(n));
  c.want.assign(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float s = 0.0f;
    for (int r = 0; r < world; ++r) {
      float v = std::sin(0.001f * static_cast<float>(i) + 0.7f * r + 0.3f * call) * (1 + r);
      if (dt == DType::kBF16) v = RoundToBf16(v);
      c.in[r][i] = v;
      s += v;
    }
    c.want[i] = dt == DType::kBF16 ? RoundToBf16(s) : s;
  }
  return c;
}

void Upload(SimGroup& g, const Case& c, DType dt) {
  for (int r = 0; r < g.world; ++r) {
    const int64_t n = static_cast<int64_t>(c.in[r].size());
    if (dt == DType::kF32) {
      ASSERT_EQ(cudaMemcpy(g.x[r], c.in[r].data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      std::vector<uint16_t> h(n);
      for (int64_t i = 0; i < n; ++i) h[i] = FloatToBf16(c.in[r][i]);
      ASSERT_EQ(cudaMemcpy(g.x[r], h.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  // A pageable copy may still be landing when cudaMemcpy returns, and the ranks' streams do not
  // wait for the legacy stream: finish it before they read.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

void Check(SimGroup& g, const Case& c, DType dt, const std::string& what) {
  const int64_t n = static_cast<int64_t>(c.want.size());
  for (int r = 0; r < g.world; ++r) {
    std::vector<float> got(n);
    if (dt == DType::kF32) {
      ASSERT_EQ(cudaMemcpy(got.data(), g.x[r], n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    } else {
      std::vector<uint16_t> h(n);
      ASSERT_EQ(cudaMemcpy(h.data(), g.x[r], n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t i = 0; i < n; ++i) got[i] = Bf16ToFloat(h[i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], c.want[i]) << what << " rank " << r << " elem " << i << " of " << n;
    }
  }
}

TEST(CustomAllReduceTest, SumsOfEveryRankInRankOrder) {
  GANNET_REQUIRE_GPU();
  for (int world : {2, 4, 8}) {
    SimGroup g(world);
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const int64_t elem = DTypeBits(dt) / 8;
      // Whole chunks, and sizes that end mid-chunk (a tail the kernel copies element-wise).
      for (int64_t bytes : {int64_t{256}, int64_t{1} << 12, int64_t{48} << 10, int64_t{688128},
                            static_cast<int64_t>(kernels::kCustomAllReduceMaxBytes), int64_t{12},
                            int64_t{2004}, int64_t{295000}}) {
        const int64_t n = bytes / elem;
        for (int call = 0; call < 3; ++call) {  // repeated calls: epochs and buffer parity
          const Case c = MakeCase(world, n, dt, call);
          Upload(g, c, dt);
          for (int r = 0; r < world; ++r) {
            ASSERT_EQ(g.Launch(r, n,
                               dt == DType::kF32 ? kernels::AllReduceType::kF32
                                                 : kernels::AllReduceType::kBF16),
                      cudaSuccess);
          }
          CUDA_OK(cudaDeviceSynchronize());
          Check(g, c, dt, "world " + std::to_string(world) + " bytes " + std::to_string(bytes));
        }
      }
    }
  }
}

// Each rank's x may sit at its own alignment (a view into a larger buffer): the chunks the blocks
// own are fixed by n alone, and an unaligned or partial chunk is read and written element-wise,
// never past n.
TEST(CustomAllReduceTest, UnalignedInputsAndTailsLeaveTheRestAlone) {
  GANNET_REQUIRE_GPU();
  const int world = 3;
  SimGroup g(world);
  const int64_t n = 1003;
  const Case c = MakeCase(world, n, DType::kBF16, 0);
  const uint16_t kSentinel = 0x7fc1;  // a NaN no sum produces
  std::vector<uint16_t*> xs(world);
  for (int r = 0; r < world; ++r) {
    const int64_t offset = r;  // 0, 2 and 4 bytes past a 16-byte boundary
    std::vector<uint16_t> h(n + 16, kSentinel);
    for (int64_t i = 0; i < n; ++i) h[offset + i] = FloatToBf16(c.in[r][i]);
    CUDA_OK(cudaMemcpy(g.x[r], h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    xs[r] = static_cast<uint16_t*>(g.x[r]) + offset;
  }
  CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(kernels::LaunchCustomAllReduce(xs[r], n, kernels::AllReduceType::kBF16, r, world,
                                             g.ws.data(), g.abort, g.streams[r]),
              cudaSuccess);
  }
  CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < world; ++r) {
    std::vector<uint16_t> h(n + 16);
    CUDA_OK(cudaMemcpy(h.data(), g.x[r], h.size() * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < r; ++i) EXPECT_EQ(h[i], kSentinel) << "rank " << r << " before x";
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(Bf16ToFloat(h[r + i]), c.want[i]) << "rank " << r << " elem " << i;
    }
    for (int64_t i = r + n; i < n + 16; ++i)
      EXPECT_EQ(h[i], kSentinel) << "rank " << r << " past n";
  }
}

TEST(CustomAllReduceTest, GraphReplaysAdvanceTheEpoch) {
  GANNET_REQUIRE_GPU();
  const int world = 2;
  const int64_t n = 5376 * 3;  // a 3-sequence decode step of 31B, bf16
  SimGroup g(world);
  std::vector<cudaGraphExec_t> exec(world);
  for (int r = 0; r < world; ++r) {
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(g.streams[r], cudaStreamCaptureModeThreadLocal));
    // Two calls per replay, as two layers' all-reduces.
    CUDA_OK(g.Launch(r, n, kernels::AllReduceType::kBF16));
    CUDA_OK(g.Launch(r, n, kernels::AllReduceType::kBF16));
    CUDA_OK(cudaStreamEndCapture(g.streams[r], &graph));
    CUDA_OK(cudaGraphInstantiate(&exec[r], graph, 0));
    CUDA_OK(cudaGraphDestroy(graph));
  }
  for (int replay = 0; replay < 4; ++replay) {
    Case c = MakeCase(world, n, DType::kBF16, replay);
    Upload(g, c, DType::kBF16);
    // The second call sums the first's (identical) results: 2 x want, rounded again.
    for (float& v : c.want) v = RoundToBf16(v + v);
    for (int r = 0; r < world; ++r) CUDA_OK(cudaGraphLaunch(exec[r], g.streams[r]));
    CUDA_OK(cudaDeviceSynchronize());
    Check(g, c, DType::kBF16, "replay " + std::to_string(replay));
  }
  for (auto e : exec) cudaGraphExecDestroy(e);
}

// Calls issued back to back with no host wait between them, so a fast rank runs ahead into the
// next call while a slow one still reads this one: sizes on both sides of the push kernel's limit
// (push and pull kernels interleaved), both element types through the same push slots, and
// inputs of zeros of either sign (the push kernel sends +0 as -0 and reads zero as "not arrived";
// the sums must still be +0, bit for bit, as the host's).
TEST(CustomAllReduceTest, BackToBackCallsOfMixedSizesTypesAndZeros) {
  GANNET_REQUIRE_GPU();
  struct Call {
    int64_t bytes;
    DType dt;
    float zero_share;  // of elements set to ±0
  };
  const int64_t push = static_cast<int64_t>(kernels::kCustomAllReducePushMaxBytes);
  const std::vector<Call> calls = {
      {10752, DType::kBF16, 0.0f}, {10752, DType::kBF16, 0.5f},       {4096, DType::kF32, 0.5f},
      {push, DType::kBF16, 0.1f},  {push + 4096, DType::kBF16, 0.0f}, {172032, DType::kF32, 0.0f},
      {10752, DType::kBF16, 1.0f}, {2 * push, DType::kF32, 0.2f},     {100, DType::kBF16, 0.3f},
      {push, DType::kF32, 0.0f},   {10752, DType::kBF16, 0.0f},       {10752, DType::kBF16, 0.0f}};
  for (int world : {2, 4}) {
    SimGroup g(world);
    // Every call has its own region of one buffer per rank, so all can be checked at the end.
    std::vector<int64_t> offset(calls.size() + 1, 0);
    for (size_t i = 0; i < calls.size(); ++i)
      offset[i + 1] = offset[i] + (calls[i].bytes + 255) / 256 * 256;
    std::vector<void*> buf(world);
    for (int r = 0; r < world; ++r) CUDA_OK(cudaMalloc(&buf[r], offset.back()));
    std::vector<std::vector<uint32_t>> want_bits(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& call = calls[i];
      const int64_t elem = DTypeBits(call.dt) / 8, n = call.bytes / elem;
      Case c = MakeCase(world, n, call.dt, static_cast<int>(i));
      for (int64_t e = 0; e < n; ++e) {  // a deterministic share of ±0 elements
        if (static_cast<float>((e * 2654435761u) % 1000) < call.zero_share * 1000) {
          float s = 0.0f;
          for (int r = 0; r < world; ++r) {
            c.in[r][e] = ((e + r) & 1) != 0 ? -0.0f : 0.0f;
            s += c.in[r][e];
          }
          c.want[e] = s;
        }
      }
      want_bits[i].resize(n);
      for (int64_t e = 0; e < n; ++e) {
        want_bits[i][e] =
            call.dt == DType::kF32 ? std::bit_cast<uint32_t>(c.want[e]) : FloatToBf16(c.want[e]);
      }
      for (int r = 0; r < world; ++r) {
        char* dst = static_cast<char*>(buf[r]) + offset[i];
        if (call.dt == DType::kF32) {
          CUDA_OK(cudaMemcpy(dst, c.in[r].data(), n * 4, cudaMemcpyHostToDevice));
        } else {
          std::vector<uint16_t> h(n);
          for (int64_t e = 0; e < n; ++e) h[e] = FloatToBf16(c.in[r][e]);
          CUDA_OK(cudaMemcpy(dst, h.data(), n * 2, cudaMemcpyHostToDevice));
        }
      }
    }
    CUDA_OK(cudaDeviceSynchronize());
    for (int r = 0; r < world; ++r) {  // rank 0 issues all its calls first, then rank 1, ...
      for (size_t i = 0; i < calls.size(); ++i) {
        const int64_t elem = DTypeBits(calls[i].dt) / 8;
        CUDA_OK(kernels::LaunchCustomAllReduce(
            static_cast<char*>(buf[r]) + offset[i], calls[i].bytes / elem,
            calls[i].dt == DType::kF32 ? kernels::AllReduceType::kF32
                                       : kernels::AllReduceType::kBF16,
            r, world, g.ws.data(), g.abort, g.streams[r]));
      }
    }
    CUDA_OK(cudaDeviceSynchronize());
    for (size_t i = 0; i < calls.size(); ++i) {
      const int64_t elem = DTypeBits(calls[i].dt) / 8, n = calls[i].bytes / elem;
      for (int r = 0; r < world; ++r) {
        std::vector<uint32_t> got(n);
        if (calls[i].dt == DType::kF32) {
          CUDA_OK(cudaMemcpy(got.data(), static_cast<char*>(buf[r]) + offset[i], n * 4,
                             cudaMemcpyDeviceToHost));
        } else {
          std::vector<uint16_t> h(n);
          CUDA_OK(cudaMemcpy(h.data(), static_cast<char*>(buf[r]) + offset[i], n * 2,
                             cudaMemcpyDeviceToHost));
          for (int64_t e = 0; e < n; ++e) got[e] = h[e];
        }
        for (int64_t e = 0; e < n; ++e) {
          ASSERT_EQ(got[e], want_bits[i][e])
              << "world " << world << " call " << i << " (" << calls[i].bytes << " bytes) rank "
              << r << " elem " << e;
        }
      }
    }
    for (void* b : buf) cudaFree(b);
  }
}

// The push all-reduce fused with PostNormResidual against the two kernels it replaces (the push
// all-reduce, then the row-in-registers PostNormResidual): the same bits on every rank, for the
// hidden sizes of every variant, with and without the layer scalar and the next norm. The calls
// of each rank run back to back, unfused and fused interleaved (they share the push slots and the
// call counter), with no host wait until the end.
TEST(CustomAllReduceTest, FusedPostNormResidualIsTheTwoOpsBitForBit) {
  GANNET_REQUIRE_GPU();
  struct Shape {
    int rows, n;
    bool scalar, next;
  };
  const std::vector<Shape> shapes = {{1, 5376, false, true}, {3, 5376, true, true},
                                     {64, 5376, true, true}, {1, 2816, false, false},
                                     {16, 2560, true, true}, {5, 1536, false, true},
                                     {97, 5376, false, true}};
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int world : {2, 4}) {
    SimGroup g(world);
    for (const Shape& sh : shapes) {
      // A fused block (1024 threads, 64 registers each) fills an SM, and on one GPU a row's
      // blocks of every rank must be resident together: all of them, or (two ranks) one rank's
      // whole grid, whose data the other rank's blocks then find whenever they get an SM.
      if (world > 2 && world * sh.rows > sms) continue;
      SCOPED_TRACE("world " + std::to_string(world) + " rows " + std::to_string(sh.rows) + " n " +
                   std::to_string(sh.n));
      const int64_t cells = int64_t{sh.rows} * sh.n;
      // Host inputs: every rank's addend, and the replicated residual and weights.
      std::vector<std::vector<uint16_t>> xs(world, std::vector<uint16_t>(cells));
      std::vector<float> res(cells), post_w(sh.n), next_w(sh.n), scalar = {0.75f};
      for (int r = 0; r < world; ++r) {
        for (int64_t i = 0; i < cells; ++i) {
          xs[r][i] = FloatToBf16(std::sin(0.37f * static_cast<float>(i % 4099) + 1.3f * r) * 2.f);
        }
      }
      for (int64_t i = 0; i < cells; ++i) res[i] = std::cos(0.011f * static_cast<float>(i)) * 3.f;
      for (int i = 0; i < sh.n; ++i) {
        post_w[i] = 1.f + 0.001f * static_cast<float>(i % 97);
        next_w[i] = 0.5f + 0.002f * static_cast<float>(i % 89);
      }
      // Device buffers per rank: [0] the unfused path's, [1] the fused path's.
      struct Bufs {
        void *x[2], *res[2], *next[2], *post_w, *next_w, *scalar;
      };
      std::vector<Bufs> b(world);
      for (int r = 0; r < world; ++r) {
        for (int k = 0; k < 2; ++k) {
          CUDA_OK(cudaMalloc(&b[r].x[k], cells * 2));
          CUDA_OK(cudaMemcpy(b[r].x[k], xs[r].data(), cells * 2, cudaMemcpyHostToDevice));
          CUDA_OK(cudaMalloc(&b[r].res[k], cells * 4));
          CUDA_OK(cudaMemcpy(b[r].res[k], res.data(), cells * 4, cudaMemcpyHostToDevice));
          CUDA_OK(cudaMalloc(&b[r].next[k], cells * 2));
          CUDA_OK(cudaMemset(b[r].next[k], 0, cells * 2));
        }
        CUDA_OK(cudaMalloc(&b[r].post_w, sh.n * 4));
        CUDA_OK(cudaMemcpy(b[r].post_w, post_w.data(), sh.n * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMalloc(&b[r].next_w, sh.n * 4));
        CUDA_OK(cudaMemcpy(b[r].next_w, next_w.data(), sh.n * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMalloc(&b[r].scalar, 4));
        CUDA_OK(cudaMemcpy(b[r].scalar, scalar.data(), 4, cudaMemcpyHostToDevice));
      }
      CUDA_OK(cudaDeviceSynchronize());
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(kernels::CustomAllReduceFuses(b[r].x[1], sh.rows, sh.n));
      }
      for (int r = 0; r < world; ++r) {
        const float* sc = sh.scalar ? static_cast<const float*>(b[r].scalar) : nullptr;
        // Unfused: the all-reduce, then PostNormResidual of its sum.
        CUDA_OK(kernels::LaunchCustomAllReduce(b[r].x[0], cells, kernels::AllReduceType::kBF16, r,
                                               world, g.ws.data(), g.abort, g.streams[r]));
        kernels::Mat next0{sh.next ? b[r].next[0] : nullptr, DType::kBF16, sh.n};
        CUDA_OK(kernels::LaunchPostNormResidual(
            {b[r].x[0], DType::kBF16, sh.n}, static_cast<const float*>(b[r].post_w),
            {b[r].res[0], DType::kF32, sh.n}, sc, static_cast<const float*>(b[r].next_w), next0,
            1e-6f, sh.rows, sh.n, g.streams[r]));
        // Fused.
        kernels::PostNormResidualArgs a;
        a.x = b[r].x[1];
        a.rows = sh.rows;
        a.n = sh.n;
        a.post_weight = static_cast<const float*>(b[r].post_w);
        a.residual = static_cast<float*>(b[r].res[1]);
        a.residual_ld = sh.n;
        a.scalar = sc;
        a.next_weight = static_cast<const float*>(b[r].next_w);
        a.next_out = sh.next ? b[r].next[1] : nullptr;
        a.next_out_ld = sh.n;
        a.eps = 1e-6f;
        CUDA_OK(kernels::LaunchCustomAllReducePostNormResidual(a, r, world, g.ws.data(), g.abort,
                                                               g.streams[r]));
      }
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint32_t> want_res(cells);
      std::vector<uint16_t> want_next(cells);
      for (int r = 0; r < world; ++r) {
        std::vector<uint32_t> got_res[2];
        std::vector<uint16_t> got_next[2], got_x(cells);
        for (int k = 0; k < 2; ++k) {
          got_res[k].resize(cells);
          got_next[k].resize(cells);
          CUDA_OK(cudaMemcpy(got_res[k].data(), b[r].res[k], cells * 4, cudaMemcpyDeviceToHost));
          CUDA_OK(cudaMemcpy(got_next[k].data(), b[r].next[k], cells * 2, cudaMemcpyDeviceToHost));
        }
        if (r == 0) {
          want_res = got_res[0];
          want_next = got_next[0];
        }
        for (int64_t i = 0; i < cells; ++i) {
          ASSERT_EQ(got_res[1][i], got_res[0][i]) << "residual, rank " << r << " cell " << i;
          ASSERT_EQ(got_next[1][i], got_next[0][i]) << "next norm, rank " << r << " cell " << i;
          ASSERT_EQ(got_res[0][i], want_res[i]) << "ranks disagree: rank " << r << " cell " << i;
        }
        // The residual moved (the op ran), and x keeps the rank's addend.
        ASSERT_NE(got_res[1][0], std::bit_cast<uint32_t>(res[0]));
        CUDA_OK(cudaMemcpy(got_x.data(), b[r].x[1], cells * 2, cudaMemcpyDeviceToHost));
        ASSERT_EQ(got_x, xs[r]) << "rank " << r;
      }
      for (int r = 0; r < world; ++r) {
        for (int k = 0; k < 2; ++k) {
          cudaFree(b[r].x[k]);
          cudaFree(b[r].res[k]);
          cudaFree(b[r].next[k]);
        }
        cudaFree(b[r].post_w);
        cudaFree(b[r].next_w);
        cudaFree(b[r].scalar);
      }
    }
  }
}

TEST(CustomAllReduceTest, AMissingPeerEndsInTheAbortFlag) {
  GANNET_REQUIRE_GPU();
  SimGroup g(2);
  // Only rank 0 calls; rank 1 never arrives (a dead process).
  CUDA_OK(g.Launch(0, 1024, kernels::AllReduceType::kF32));
  cudaEvent_t done;
  CUDA_OK(cudaEventCreate(&done));
  CUDA_OK(cudaEventRecord(done, g.streams[0]));
  usleep(200 * 1000);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);  // still waiting for its peer
  reinterpret_cast<volatile int*>(g.abort)[0] = 1;
  CUDA_OK(cudaEventSynchronize(done));  // returns: the wait ended
  cudaEventDestroy(done);
}

}  // namespace
}  // namespace gannet

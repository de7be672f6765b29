// The custom all-reduce across processes (CustomAllReduce::CreateAcrossProcesses: workspaces
// exported and opened through CUDA IPC), with two processes on one GPU: the test process starts
// this binary twice more (fork + exec, so each child begins without CUDA state) as ranks 0 and 1.
// The ranks exchange their handles and agree through files in a scratch folder instead of NCCL
// (which refuses two ranks on one device); the engine wires the same exchange to NCCL
// (nccl_collectives.cc), run on two GPUs by tp_multiprocess_test. Each rank checks every result
// against the rank-order sum the kernel defines, for f32 and bf16 messages of several sizes,
// repeated (epochs and buffer parity); and a group where one rank asks for NCCL only
// (GANNET_ALLREDUCE=nccl) agrees on no custom path at all.
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/dtype.h"
#include "lib/common/status.h"
#include "lib/parallel/custom_allreduce.h"

namespace gannet {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDirEnv = "GANNET_IPC_TEST_DIR";
constexpr const char* kRankEnv = "GANNET_IPC_TEST_RANK";
constexpr int kWorld = 2;

// The file exchange of one rank: call k of a kind writes <dir>/<kind><k>.<rank> (atomically, by
// rename) and reads every rank's, waiting up to a minute for them.
class FileExchange {
 public:
  FileExchange(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {}

  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& kind,
                                                     const std::string& mine) {
    const std::string stem = dir_ + "/" + kind + std::to_string(calls_++) + ".";
    { std::ofstream(stem + "tmp" + std::to_string(rank_), std::ios::binary) << mine; }
    fs::rename(stem + "tmp" + std::to_string(rank_), stem + std::to_string(rank_));
    std::vector<std::string> all(kWorld);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < kWorld; ++r) {
      while (!fs::exists(stem + std::to_string(r))) {
        if (std::chrono::steady_clock::now() > deadline) {
          return absl::DeadlineExceededError("rank " + std::to_string(r) + " never wrote " + stem);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      std::ifstream in(stem + std::to_string(r), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      all[r] = ss.str();
    }
    return all;
  }

  parallel::CustomAllReduce::RankExchange Ops() {
    parallel::CustomAllReduce::RankExchange e;
    e.all_gather = [this](const std::string& mine) { return AllGather("gather", mine); };
    e.min_over_ranks = [this](int64_t v) -> absl::StatusOr<int64_t> {
      GANNET_ASSIGN_OR_RETURN(auto all, AllGather("min", std::to_string(v)));
      int64_t m = v;
      for (const std::string& s : all) m = std::min<int64_t>(m, std::stoll(s));
      return m;
    };
    return e;
  }

 private:
  std::string dir_;
  int rank_;
  int calls_ = 0;
};

float Value(int rank, int64_t i, int call) {
  return std::sin(0.003f * static_cast<float>(i) + 0.9f * rank + 0.4f * call) * (1 + rank);
}

// One rank's process. Exit codes: 0 all sums right; 2 setup failed; 3 no custom path agreed (when
// one was expected); 4 a wrong sum; 5 a CUDA error.
int RunRank(const std::string& dir, int rank) {
  if (cudaSetDevice(0) != cudaSuccess) return 5;
  FileExchange files(dir, rank);
  auto c = parallel::CustomAllReduce::CreateAcrossProcesses(rank, kWorld, 0, files.Ops());
  if (!c.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, std::string(c.status().message()).c_str());
    return 2;
  }
  const bool expect_custom = std::getenv("GANNET_IPC_TEST_EXPECT_NCCL") == nullptr;
  if (*c == nullptr) return expect_custom ? 3 : 0;
  if (!expect_custom) return 3;
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 5;
  void* x = nullptr;
  if (cudaMalloc(&x, 1 << 20) != cudaSuccess) return 5;
  struct Msg {
    DType type;
    int64_t n;
  };
  const Msg msgs[] = {{DType::kF32, 256},
                      {DType::kBF16, 5377},
                      {DType::kF32, 30000},
                      {DType::kBF16, 64 * 1024 - 3}};
  int call = 0;
  for (int round = 0; round < 3; ++round) {
    for (const Msg& m : msgs) {
      ++call;
      std::vector<float> want(m.n);
      std::vector<uint16_t> in16(m.n), out16(m.n);
      std::vector<float> in32(m.n), out32(m.n);
      for (int64_t i = 0; i < m.n; ++i) {
        float s = 0.0f;
        for (int r = 0; r < kWorld; ++r) {
          float v = Value(r, i, call);
          if (m.type == DType::kBF16) v = RoundToBf16(v);
          s += v;  // rank order, f32, one rounding
          if (r == rank) {
            in32[i] = v;
            in16[i] = FloatToBf16(v);
          }
        }
        want[i] = m.type == DType::kBF16 ? RoundToBf16(s) : s;
      }
      const size_t bytes = m.n * (m.type == DType::kF32 ? 4 : 2);
      const void* src = m.type == DType::kF32 ? static_cast<const void*>(in32.data()) : in16.data();
      if (cudaMemcpyAsync(x, src, bytes, cudaMemcpyHostToDevice, stream) != cudaSuccess) return 5;
      const backend::Tensor t = backend::Tensor::Make(x, m.type, {m.n});
      if (!(*c)->Takes(t)) return 4;
      if (!(*c)->Run(rank, t, stream).ok()) return 5;
      void* dst = m.type == DType::kF32 ? static_cast<void*>(out32.data()) : out16.data();
      if (cudaMemcpyAsync(dst, x, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess) return 5;
      if (cudaStreamSynchronize(stream) != cudaSuccess) return 5;
      for (int64_t i = 0; i < m.n; ++i) {
        const float got = m.type == DType::kF32 ? out32[i] : Bf16ToFloat(out16[i]);
        if (got != want[i]) {
          std::fprintf(stderr, "rank %d call %d: elem %lld of %lld: %g, want %g\n", rank, call,
                       static_cast<long long>(i), static_cast<long long>(m.n), got, want[i]);
          return 4;
        }
      }
    }
  }
  cudaFree(x);
  cudaStreamDestroy(stream);
  return 0;
}

TEST(CustomAllReduceIpcTest, Worker) {
  const char* dir = std::getenv(kDirEnv);
  const char* rank = std::getenv(kRankEnv);
  if (dir == nullptr || rank == nullptr) GTEST_SKIP() << "runs only as a rank of the tests below";
  std::_Exit(RunRank(dir, std::atoi(rank)));
}

// Starts ranks 0 and 1 (rank 1 with GANNET_ALLREDUCE=nccl when `rank1_nccl`, and then every rank
// expecting no custom path) and returns their exit codes (-1: killed at the deadline).
std::vector<int> RunGroup(bool rank1_nccl) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const fs::path dir = fs::temp_directory_path() /
                       ("gannet-ipc-" + std::to_string(getpid()) + (rank1_nccl ? "-nccl" : ""));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<pid_t> pids;
  for (int r = 0; r < kWorld; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv(kDirEnv, dir.c_str(), 1);
      setenv(kRankEnv, std::to_string(r).c_str(), 1);
      unsetenv("GANNET_ALLREDUCE");
      if (rank1_nccl) {
        setenv("GANNET_IPC_TEST_EXPECT_NCCL", "1", 1);
        if (r == 1) setenv("GANNET_ALLREDUCE", "nccl", 1);
      }
      execl(self.c_str(), self.c_str(), "--gtest_filter=CustomAllReduceIpcTest.Worker", nullptr);
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(kWorld, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int r = 0; r < kWorld; ++r) {
    int status = 0;
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) kill(p, SIGKILL);
        waitpid(pids[r], &status, 0);
        status = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    codes[r] = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  fs::remove_all(dir);
  return codes;
}

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(CustomAllReduceIpcTest, TwoProcessesSumInRankOrder) {
  if (std::getenv(kRankEnv) != nullptr) GTEST_SKIP();
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int> codes = RunGroup(/*rank1_nccl=*/false);
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0))
      << "exit codes: 2 setup, 3 no custom path, 4 wrong sum, 5 CUDA error, -1 hung";
}

TEST(CustomAllReduceIpcTest, OneRankAskingForNcclTurnsItOffForAll) {
  if (std::getenv(kRankEnv) != nullptr) GTEST_SKIP();
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  // Rank 1 alone sets GANNET_ALLREDUCE=nccl; both must come back without the custom path.
  const std::vector<int> codes = RunGroup(/*rank1_nccl=*/true);
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0));
}

}  // namespace
}  // namespace gannet

// libgannet_kernel_trace.so: a CUPTI injection library that records every kernel a process runs
// (graph nodes included, each with its own start and end) and writes them as CSV at exit.
//
// Why: Nsight Systems does not run on our GPU machines, and Nsight Compute serialises kernels, so
// neither shows what a CUDA-graph replay with programmatic dependent launch really spends: which
// kernels overlap and how long each adds to the step. The driver loads this library into any
// CUDA program named by CUDA_INJECTION64_PATH, so no binary needs changing:
//   export CUDA_INJECTION64_PATH=build/tools/trace/libgannet_kernel_trace.so
//   GANNET_KERNEL_TRACE=/tmp/trace.csv gannet-decode-bench ...
//   python3 tools/trace/critical_path.py /tmp/trace.csv
// Columns: device, correlation (one per launch API call: all kernels of one graph launch share it),
// graph, node, stream, start_ns, end_ns, grid, block, name (demangled).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Record {
  uint32_t device, correlation, graph;
  uint64_t node;
  uint32_t stream;
  uint64_t start, end;
  int64_t grid;
  int32_t block;
  std::string name;
};

std::mutex g_mu;
// Leaked on purpose: written from an atexit handler.
std::vector<Record>* g_records = nullptr;
// Demangled names by CUPTI's name pointer, which every record of one kernel shares: each name is
// demangled once, not once a launch. Used under g_mu.
std::unordered_map<const char*, std::string>* g_names = nullptr;
constexpr size_t kBufferBytes = 8 << 20;

std::string Demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && d != nullptr) ? d : name;
  std::free(d);
  return out;
}

const std::string& Demangled(const char* name) {
  auto [it, added] = g_names->try_emplace(name);
  if (added) it->second = Demangle(name);
  return it->second;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    g_records->push_back(Record{k->deviceId, k->correlationId, k->graphId, k->graphNodeId,
                                k->streamId, k->start, k->end,
                                int64_t{k->gridX} * k->gridY * k->gridZ,
                                k->blockX * k->blockY * k->blockZ, Demangled(k->name)});
  }
  std::free(buffer);
}

std::string CsvField(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void WriteAtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* env = std::getenv("GANNET_KERNEL_TRACE");
  const char* path = env != nullptr ? env : "kernel_trace.csv";
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "device,correlation,graph,node,stream,start_ns,end_ns,grid,block,name\n");
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Record& r : *g_records) {
    std::fprintf(f, "%u,%u,%u,%llu,%u,%llu,%llu,%lld,%d,%s\n", r.device, r.correlation, r.graph,
                 static_cast<unsigned long long>(r.node), r.stream,
                 static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end),
                 static_cast<long long>(r.grid), r.block, CsvField(r.name).c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels -> %s\n", g_records->size(), path);
}

}  // namespace

// Called by the CUDA driver when the library is named by CUDA_INJECTION64_PATH.
extern "C" int InitializeInjection() {
  g_records = new std::vector<Record>();
  g_names = new std::unordered_map<const char*, std::string>();
  if (cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI activity tracing could not start\n");
    return 0;
  }
  std::atexit(WriteAtExit);
  return 1;
}

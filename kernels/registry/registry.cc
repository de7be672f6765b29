#include "kernels/registry/registry.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gannet::kernels {
namespace {

#ifndef GANNET_COMPILED_CUDA_ARCHS
#error "GANNET_COMPILED_CUDA_ARCHS must come from cmake/GannetCudaArchs.cmake"
#endif

// "75;80;86-real;90a" -> {75, 80, 86, 90}: the leading digits of each item.
std::vector<int> ParseArchList(const char* list) {
  std::vector<int> archs;
  int value = 0;
  bool in_digits = false, skip = false;
  for (const char* p = list;; ++p) {
    const char c = *p;
    if (c == ';' || c == ',' || c == ' ' || c == '\0') {
      if (in_digits) archs.push_back(value);
      value = 0;
      in_digits = skip = false;
      if (c == '\0') break;
    } else if (!skip && c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_digits = true;
    } else {
      skip = in_digits;  // suffixes such as "-real" or "a" end the number
    }
  }
  std::set<int> unique(archs.begin(), archs.end());
  return {unique.begin(), unique.end()};
}

void StderrSink(const char* message) { std::fprintf(stderr, "gannet [I] %s\n", message); }

std::mutex g_mu;
void (*g_sink)(const char*) = StderrSink;
std::set<std::string>* g_logged = nullptr;

void LogOnce(const std::string& key, const std::string& message) {
  void (*sink)(const char*) = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_logged == nullptr) g_logged = new std::set<std::string>();
    if (!g_logged->insert(key).second) return;
    sink = g_sink;
  }
  sink(message.c_str());
}

std::vector<std::string> ForcedNames() {
  std::vector<std::string> names;
  const char* env = std::getenv("GANNET_FORCE_KERNEL");
  if (env == nullptr) return names;
  std::string cur;
  for (const char* p = env;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!cur.empty()) names.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      cur += *p;
    }
  }
  return names;
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kAttentionDecode:
      return "attention.decode";
    case Op::kAttentionPrefill:
      return "attention.prefill";
    case Op::kGemv:
      return "linear.gemv";
    case Op::kMoeExperts:
      return "moe.experts";
    case Op::kLinearInt4:
      return "linear.int4";
    case Op::kCount:
      break;
  }
  return "unknown";
}

cudaError_t DeviceInfo::Query(int device, DeviceInfo* out) {
  cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) return err;
  out->device = device;
  out->sm = prop.major * 10 + prop.minor;
  out->num_sms = prop.multiProcessorCount;
  out->max_smem_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
  return cudaSuccess;
}

std::string ProblemKey::ClassString() const {
  std::string s;
  auto add = [&s](std::string_view part) {
    if (!s.empty()) s += ' ';
    s += part;
  };
  // A word and its number, appended in place: `"n" + std::to_string(n)` (a literal plus a
  // temporary) trips GCC 12's -Wrestrict false positive at -O3, an error in the release preset.
  auto add_num = [&add, &s](std::string_view word, int64_t v) {
    add(word);
    s += std::to_string(v);
  };
  if (op == Op::kAttentionDecode || op == Op::kAttentionPrefill) {
    add_num("hd", head_dim);
    add_num("page", page_size);
    add_num("gqa", group());
    add(window > 0 ? "window" : "full");
    if (op == Op::kAttentionDecode) add_num("q", max_query_len);
    if (flags & kFlagKFromV) add_num("kfromv", rope_pairs);
  } else {
    add_num("n", n);
    add_num("k", k);
    if (op == Op::kMoeExperts) {
      add_num("e", num_experts);
      s += "top";
      s += std::to_string(top_k);
    }
    if (op == Op::kLinearInt4) {
      add_num("g", group_size);
      add("scale");
      s += DTypeShortName(scale_type);
    }
  }
  add(DTypeShortName(in_type));
  s += '/';
  s += DTypeShortName(kv_type);
  s += "->";
  s += DTypeShortName(out_type);
  if (flags & kFlagAligned16) add("aligned16");
  if (flags & kFlagImageBlocks) add("imageblocks");
  return s;
}

std::span<const int> CompiledArchs() {
  static const std::vector<int> archs = ParseArchList(GANNET_COMPILED_CUDA_ARCHS);
  return archs;
}

namespace {
std::string ArchsString(std::span<const int> archs) {
  std::string s;
  for (int a : archs) s += (s.empty() ? "sm_" : " sm_") + std::to_string(a);
  return s;
}
}  // namespace

std::string CompiledArchsString() { return ArchsString(CompiledArchs()); }

int EffectiveArch(int device_sm) { return EffectiveArch(device_sm, CompiledArchs()); }

int EffectiveArch(int device_sm, std::span<const int> archs) {
  int best = 0;
  for (int a : archs) {
    if (a <= device_sm && a > best) best = a;
  }
  return best;
}

int Specificity(const ProblemPredicate& p) {
  return (p.head_dim != 0) + (p.max_group_rows != 0) + (p.page_size_multiple != 0) +
         (p.window != -1) + (p.max_m != 0) + (p.required_flags != 0);
}

KernelStatus CheckEntry(const KernelEntry& e, const ProblemKey& pk, const DeviceInfo& dev) {
  return CheckEntry(e, pk, dev, CompiledArchs());
}

KernelStatus CheckEntry(const KernelEntry& e, const ProblemKey& pk, const DeviceInfo& dev,
                        std::span<const int> archs) {
  if (e.op != pk.op) return KernelStatus::Fail(std::string("serves ") + OpName(e.op));
  const int arch = EffectiveArch(dev.sm, archs);
  if (arch == 0) {
    return KernelStatus::Fail("binary carries no arch <= sm_" + std::to_string(dev.sm) + " (" +
                              ArchsString(archs) + ")");
  }
  if (arch < e.min_sm || arch > e.max_sm) {
    return KernelStatus::Fail("needs sm_" + std::to_string(e.min_sm) + "..sm_" +
                              std::to_string(e.max_sm) + ", effective arch is sm_" +
                              std::to_string(arch));
  }
  const ProblemPredicate& p = e.predicate;
  if (pk.in_type != p.in_type || pk.kv_type != p.kv_type) {
    return KernelStatus::Fail("dtypes " + std::string(DTypeShortName(pk.in_type)) + "/" +
                              std::string(DTypeShortName(pk.kv_type)) + " unsupported");
  }
  if (p.head_dim != 0 && pk.head_dim != p.head_dim) {
    return KernelStatus::Fail("head_dim " + std::to_string(pk.head_dim) +
                              " != " + std::to_string(p.head_dim));
  }
  if (p.max_group_rows != 0 && pk.max_query_len * pk.group() > p.max_group_rows) {
    return KernelStatus::Fail("query_len x group " + std::to_string(pk.max_query_len * pk.group()) +
                              " > " + std::to_string(p.max_group_rows));
  }
  if (p.page_size_multiple != 0 && (pk.page_size <= 0 || pk.page_size % p.page_size_multiple)) {
    return KernelStatus::Fail("page size " + std::to_string(pk.page_size) + " not a multiple of " +
                              std::to_string(p.page_size_multiple));
  }
  if (p.window == 0 && pk.window > 0) return KernelStatus::Fail("no sliding window support");
  if (p.max_m != 0 && pk.num_tokens > p.max_m) {
    return KernelStatus::Fail("M " + std::to_string(pk.num_tokens) + " > " +
                              std::to_string(p.max_m));
  }
  if ((pk.flags & p.required_flags) != p.required_flags) {
    return KernelStatus::Fail("needs 16-byte aligned operands");
  }
  const uint32_t missing = pk.flags & kCapabilityFlags & ~p.capabilities;
  if (missing & kFlagImageBlocks) return KernelStatus::Fail("cannot apply the image-block mask");
  if (e.can_implement != nullptr) return e.can_implement(pk, dev);
  return KernelStatus::Ok();
}

Selection Select(const ProblemKey& pk, const DeviceInfo& dev) {
  return Select(pk, dev, CompiledArchs());
}

Selection Select(const ProblemKey& pk, const DeviceInfo& dev, std::span<const int> archs) {
  Selection sel;
  const std::vector<std::string> forced = ForcedNames();
  for (const std::string& name : forced) {
    const KernelEntry* e = FindEntry(name);
    if (e == nullptr) {
      sel.error = "GANNET_FORCE_KERNEL names unknown kernel '" + name + "'";
      return sel;
    }
    if (e->op != pk.op || sel.entry != nullptr) continue;
    KernelStatus st = CheckEntry(*e, pk, dev, archs);
    if (!st.ok) {
      sel.error += std::string(sel.error.empty() ? "" : "; ") + OpName(pk.op) + ": forced kernel " +
                   e->name + " cannot implement " + pk.ClassString() + ": " + st.reason;
      continue;
    }
    sel.entry = e;  // the first forced entry of the op that can run the problem
  }
  if (sel.entry == nullptr && !sel.error.empty()) return sel;
  sel.error.clear();
  if (sel.entry == nullptr) {
    long best = -1;
    for (const KernelEntry* e : AllEntries()) {
      if (e->op != pk.op) continue;
      KernelStatus st = CheckEntry(*e, pk, dev, archs);
      if (!st.ok) {
        sel.error += std::string(sel.error.empty() ? "" : "; ") + e->name + ": " + st.reason;
        continue;
      }
      // The most specific entry first, then the highest priority (the measured preference among
      // entries that do the same), then the newest arch, then the list's order.
      const long score =
          (static_cast<long>(Specificity(e->predicate)) * 100 + e->priority) * 10000 + e->min_sm;
      if (score > best) {
        sel.entry = e;
        best = score;
      }
    }
    if (sel.entry == nullptr) {
      sel.error = std::string(OpName(pk.op)) + ": no kernel for " + pk.ClassString() + " on sm_" +
                  std::to_string(dev.sm) + " (" + (sel.error.empty() ? "no entries" : sel.error) +
                  ")";
      return sel;
    }
    sel.error.clear();
  }
  const std::string cls = pk.ClassString();
  LogOnce(std::string(OpName(pk.op)) + "|" + cls + "|" + sel.entry->name,
          std::string(OpName(pk.op)) + ": " + sel.entry->name + " for " + cls + " (device sm_" +
              std::to_string(dev.sm) + ", binary " + ArchsString(archs) + ")");
  return sel;
}

void SetRegistryLogSink(void (*sink)(const char*)) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_sink = sink != nullptr ? sink : StderrSink;
}

}  // namespace gannet::kernels

// Fuzz target: request validation through the C ABI, gannet_request_check (lib/capi/
// capi_request.cc ReadRequest, lib/engine/request_check.cc CheckRequest): the versioned request
// and chat-message structs, pointers with counts, sampling values, UTF-8, limits, ids against a
// model. Submit runs the same reading and checks, so this covers what a caller can hand the engine.
//
// Input: a compact description of a gannet_request_t, read front to back (fuzz::Reader:
// little-endian, zeros past the end; make_corpus.py writes the seeds in this format):
//   u16 what       bit 0: check against a model info too; bit 1: that info has fuzzed facts
//                  (i64 vocab_size, i64 max_position_embeddings, u8 has_tokenizer, u32
//                  struct_size follow) instead of gannet_model_info of tests/data/tiny/e2b;
//                  bit 2: u32 request.struct_size follows; bit 3: prompt_tokens (u16 n, n x i32);
//                  bit 4: prompt_tokens NULL with u16 n; bit 5: prompt_text (u16-length string);
//                  bit 6: messages (below); bit 7: messages NULL with u8 n; bit 8: stop_token_ids
//                  (u16 n, n x i32); bit 9: NULL stop_token_ids with u16 n; bit 10: stop strings
//                  (u8 n, then per string u8 is_null and a u16-length string); bit 11: NULL
//                  stop_strings with u8 n; bit 12: the scalar fields (max_tokens i32, min_tokens
//                  i32, temperature f32, top_k i32, top_p f32, min_p f32, repetition_penalty f32,
//                  presence_penalty f32, frequency_penalty f32, seed_mode i32, seed u64,
//                  ignore_default_stop_tokens i32, logprobs i32, priority i32, deadline_ms i64,
//                  add_generation_prompt i32, enable_thinking i32, disable_speculation i32).
//   messages       u32 stride (messages[0].struct_size), u8 n (at most 16); per message u8 kind:
//                  bit 0 its struct_size is a u32 that follows (else the stride), bit 1 NULL role,
//                  bit 2 NULL content, bit 3 the role is a u8 index into the known roles (else a
//                  u16-length string); then the content string.
// Strings are C strings: a NUL inside ends them early, as it would for a caller.
//
// The fuzzer keeps to the ABI's contract, since gannet_request_check cannot defend against a
// caller who breaks it: every array holds as many elements as its count says (counts are
// capped: a count past the library's limit is rejected before the array is read), a message
// array holds n elements of `stride` bytes, and a request.struct_size never ends inside a
// pointer field (a struct of an older header ends at a field boundary; an odd size inside an
// integer field is harmless and kept). Sizes past sizeof(gannet_request_t) get a buffer that
// large, with zero tail bytes.
//
// Expected: a status. Properties checked: the status is a GANNET_* code other than INTERNAL and
// OUT_OF_MEMORY (an exception caught by the C ABI's firewall) with an error message when not OK;
// a request that passes against a model also passes without one (the model only adds checks).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gannet/gannet.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace gannet;

// The library's bounds (lib/capi/capi_internal.h, lib/engine/request_check.h): counts just past
// them still get real arrays, larger ones never reach a read.
constexpr uint32_t kMaxStructSize = 1u << 16;
constexpr size_t kMaxMessages = 16;

const gannet_model_info_t& TinyInfo() {
  static const gannet_model_info_t info = [] {
    gannet_model_info_t i = GANNET_MODEL_INFO_INIT;
    const std::string dir = fuzz::DataDir() + "/tiny/e2b";
    if (gannet_model_info(dir.c_str(), &i) != GANNET_OK) {
      fuzz::Fail("gannet_model_info failed on the tiny e2b", gannet_last_error_message());
    }
    return i;
  }();
  return info;
}

struct Storage {  // everything the request points to, alive until the checks return
  std::vector<int32_t> prompt_tokens, stop_ids;
  std::string prompt_text;
  std::deque<std::string> strings;  // push_back never moves the others (their c_str() is used)
  std::vector<const char*> stop_strings;
  std::vector<unsigned char> messages;  // n x stride bytes
  std::vector<unsigned char> request;   // max(sizeof, struct_size) bytes
};

std::vector<int32_t> Ids(fuzz::Reader& in, size_t n) {
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = in.I32();
  return ids;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  TinyInfo();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  Storage s;
  gannet_request_t r = GANNET_REQUEST_INIT;
  const uint16_t what = in.U16();

  const bool with_model = what & 1;
  gannet_model_info_t info = TinyInfo();
  if (what & 2) {
    info.vocab_size = in.I64();
    info.max_position_embeddings = in.I64();
    info.has_tokenizer = in.U8() & 1;
    info.struct_size = in.U32();  // the library copies at most sizeof: no pointers inside
  }
  uint32_t struct_size = sizeof(gannet_request_t);
  // Any size: one ending inside a field (a pointer's high bytes) is refused by the library.
  if (what & 4) struct_size = in.U32();

  if (what & 8) {
    s.prompt_tokens = Ids(in, in.U16());
    r.prompt_tokens = s.prompt_tokens.data();
    r.num_prompt_tokens = s.prompt_tokens.size();
  } else if (what & 16) {
    r.num_prompt_tokens = in.U16();
  }
  if (what & 32) {
    s.prompt_text = in.Str();
    r.prompt_text = s.prompt_text.c_str();
  }
  if (what & 64) {
    static constexpr const char* kRoles[] = {"system", "developer", "user", "assistant",
                                             "model",  "tool",      "",     "USER"};
    const uint32_t stride = in.U32();
    const size_t n = in.U8() % (kMaxMessages + 1);
    // A stride the library accepts gets exactly n x stride bytes; any other one is rejected after
    // reading messages[0].struct_size, so one header's worth is enough.
    const size_t alloc = stride >= sizeof(gannet_chat_message_t) && stride <= kMaxStructSize
                             ? stride
                             : sizeof(gannet_chat_message_t);
    s.messages.assign(std::max<size_t>(n, 1) * alloc, 0);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t kind = in.U8();
      gannet_chat_message_t m = GANNET_CHAT_MESSAGE_INIT;
      m.struct_size = (kind & 1) ? in.U32() : stride;
      if (kind & 8) {
        m.role = kRoles[in.U8() & 7];
      } else {
        s.strings.push_back(in.Str());
        m.role = s.strings.back().c_str();
      }
      s.strings.push_back(in.Str());
      m.content = s.strings.back().c_str();
      if (kind & 2) m.role = nullptr;
      if (kind & 4) m.content = nullptr;
      if (i == 0) m.struct_size = stride;
      std::memcpy(s.messages.data() + i * alloc, &m, sizeof(m));
    }
    r.messages = reinterpret_cast<const gannet_chat_message_t*>(s.messages.data());
    r.num_messages = n;
  } else if (what & 128) {
    r.num_messages = in.U8();
  }
  if (what & 256) {
    s.stop_ids = Ids(in, in.U16() % 1100);
    s.stop_ids.reserve(1);  // an empty list is a non-NULL array with 0 ids (no stop ids at all)
    r.stop_token_ids = s.stop_ids.data();
    r.num_stop_token_ids = s.stop_ids.size();
  } else if (what & 512) {
    r.num_stop_token_ids = in.U16();
  }
  if (what & 1024) {
    const size_t n = in.U8() % 80;
    for (size_t i = 0; i < n; ++i) {
      const bool null = in.U8() & 1;
      s.strings.push_back(in.Str());
      s.stop_strings.push_back(null ? nullptr : s.strings.back().c_str());
    }
    // Never a NULL array for n == 0: that is a different case (below).
    s.stop_strings.reserve(1);
    r.stop_strings = s.stop_strings.data();
    r.num_stop_strings = n;
  } else if (what & 2048) {
    r.num_stop_strings = in.U8();
  }
  if (what & 4096) {
    r.max_tokens = in.I32();
    r.min_tokens = in.I32();
    r.temperature = in.F32();
    r.top_k = in.I32();
    r.top_p = in.F32();
    r.min_p = in.F32();
    r.repetition_penalty = in.F32();
    r.presence_penalty = in.F32();
    r.frequency_penalty = in.F32();
    r.seed_mode = in.I32();
    r.seed = in.U64();
    r.ignore_default_stop_tokens = in.I32();
    r.logprobs = in.I32();
    r.priority = in.I32();
    r.deadline_ms = in.I64();
    r.add_generation_prompt = in.I32();
    r.enable_thinking = in.I32();
    r.disable_speculation = in.I32();
  }

  // The request in a buffer as large as its struct_size claims (within what the library reads).
  r.struct_size = struct_size;
  const size_t claimed = struct_size <= kMaxStructSize ? struct_size : 0;
  s.request.assign(std::max(sizeof(r), claimed), 0);
  std::memcpy(s.request.data(), &r, sizeof(r));
  const auto* req = reinterpret_cast<const gannet_request_t*>(s.request.data());

  // INTERNAL or OUT_OF_MEMORY would be an exception caught by the C ABI's firewall: a finding.
  auto valid = [](gannet_status_t st) {
    return st >= GANNET_OK && st <= GANNET_ERR_FAILED_PRECONDITION &&
           st != GANNET_ERR_OUT_OF_MEMORY;
  };
  const gannet_status_t alone = gannet_request_check(req, nullptr);
  if (!valid(alone)) fuzz::Fail("unexpected status", gannet_last_error_message());
  if (alone != GANNET_OK && gannet_last_error_message()[0] == '\0') {
    fuzz::Fail("a failed check left no error message");
  }
  if (with_model) {
    const gannet_status_t against = gannet_request_check(req, &info);
    if (!valid(against)) fuzz::Fail("unexpected status", gannet_last_error_message());
    if (against == GANNET_OK && alone != GANNET_OK) {
      fuzz::Fail("a request passes against a model but not without one");
    }
  }
  return 0;
}

#include "lib/parallel/step_message.h"

#include <cstring>

#include "lib/common/status.h"

namespace gannet::parallel {

namespace {

class Writer {
 public:
  explicit Writer(StepOp op) { Put<int32_t>(static_cast<int32_t>(op)); }
  // Bytes are appended one by one, not by resize + memcpy or a range insert: GCC 12 at -O3
  // reports those as overflowing the vector (-Wstringop-overflow, false positives).
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    for (size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(p[i]);
  }
  template <typename T>
  void PutArray(std::span<const T> v) {
    Put<int64_t>(static_cast<int64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size_bytes());
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> msg) : msg_(msg) {}
  template <typename T>
  absl::StatusOr<T> Get() {
    if (msg_.size() - at_ < sizeof(T)) return Truncated();
    T v;
    std::memcpy(&v, msg_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <typename T>
  absl::Status GetArray(std::vector<T>* out) {
    GANNET_ASSIGN_OR_RETURN(int64_t n, Get<int64_t>());
    if (n < 0 || static_cast<uint64_t>(n) > (msg_.size() - at_) / sizeof(T)) return Truncated();
    out->resize(n);
    if (n > 0) std::memcpy(out->data(), msg_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return absl::OkStatus();
  }
  absl::Status Done() const {
    if (at_ != msg_.size()) {
      return InternalError("tensor parallel: {} unread bytes at the end of a step message",
                           msg_.size() - at_);
    }
    return absl::OkStatus();
  }

 private:
  static absl::Status Truncated() {
    return InternalError("tensor parallel: a step message ends before its contents");
  }
  std::span<const uint8_t> msg_;
  size_t at_ = 0;
};

absl::Status Expect(std::span<const uint8_t> msg, StepOp op, Reader* r) {
  GANNET_ASSIGN_OR_RETURN(int32_t got, r->Get<int32_t>());
  if (got != static_cast<int32_t>(op)) {
    return InternalError("tensor parallel: message {} where {} was expected", got,
                         static_cast<int32_t>(op));
  }
  (void)msg;
  return absl::OkStatus();
}

}  // namespace

std::vector<uint8_t> EncodeOp(StepOp op) { return Writer(op).Take(); }

std::vector<uint8_t> EncodeInit(const runner::RunnerOptions& o) {
  Writer w(StepOp::kInit);
  for (int v : {o.max_tokens, o.max_seqs, o.max_logit_rows, o.max_pages_per_seq, o.page_size}) {
    w.Put<int32_t>(v);
  }
  w.Put<uint8_t>(o.enable_graphs);
  w.Put<uint8_t>(o.pad_decode_batches);
  return w.Take();
}

absl::Status DecodeInit(std::span<const uint8_t> msg, runner::RunnerOptions* o) {
  Reader r(msg);
  GANNET_RETURN_IF_ERROR(Expect(msg, StepOp::kInit, &r));
  for (int* v :
       {&o->max_tokens, &o->max_seqs, &o->max_logit_rows, &o->max_pages_per_seq, &o->page_size}) {
    GANNET_ASSIGN_OR_RETURN(const int32_t x, r.Get<int32_t>());
    *v = x;
  }
  GANNET_ASSIGN_OR_RETURN(uint8_t graphs, r.Get<uint8_t>());
  GANNET_ASSIGN_OR_RETURN(uint8_t pad, r.Get<uint8_t>());
  o->enable_graphs = graphs != 0;
  o->pad_decode_batches = pad != 0;
  return r.Done();
}

std::vector<uint8_t> EncodeAttachKv(const kv::KvLayout& l) {
  Writer w(StepOp::kAttachKv);
  w.Put<int32_t>(l.page_size);
  w.Put<int32_t>(l.sliding_window);
  w.Put<int32_t>(l.dtype_bytes);
  w.Put<int32_t>(static_cast<int32_t>(l.quant));
  w.Put<int32_t>(l.num_pages[0]);
  w.Put<int32_t>(l.num_pages[1]);
  std::vector<int32_t> layers;
  for (const kv::KvLayerGeometry& g : l.layers) {
    layers.insert(layers.end(), {static_cast<int32_t>(g.group), g.num_kv_heads, g.head_dim,
                                 g.source, g.k_from_v ? 1 : 0});
  }
  w.PutArray<int32_t>(layers);
  return w.Take();
}

absl::StatusOr<kv::KvLayout> DecodeAttachKv(std::span<const uint8_t> msg) {
  Reader r(msg);
  GANNET_RETURN_IF_ERROR(Expect(msg, StepOp::kAttachKv, &r));
  int32_t v[6];
  for (int32_t& x : v) {
    GANNET_ASSIGN_OR_RETURN(x, r.Get<int32_t>());
  }
  std::vector<int32_t> flat;
  GANNET_RETURN_IF_ERROR(r.GetArray(&flat));
  GANNET_RETURN_IF_ERROR(r.Done());
  if (flat.size() % 5 != 0) return InternalError("tensor parallel: a KV layout message is torn");
  std::vector<kv::KvLayerGeometry> layers;
  for (size_t i = 0; i < flat.size(); i += 5) {
    if (flat[i] != static_cast<int32_t>(kv::KvGroup::kSliding) &&
        flat[i] != static_cast<int32_t>(kv::KvGroup::kFull)) {
      return InternalError("tensor parallel: KV group {} in a layout message", flat[i]);
    }
    if (flat[i + 4] != 0 && flat[i + 4] != 1) {
      return InternalError("tensor parallel: K-from-V flag {} in a layout message", flat[i + 4]);
    }
    layers.push_back({static_cast<kv::KvGroup>(flat[i]), flat[i + 1], flat[i + 2], flat[i + 3],
                      flat[i + 4] != 0});
  }
  if (v[3] != static_cast<int32_t>(kv::KvQuant::kNone) &&
      v[3] != static_cast<int32_t>(kv::KvQuant::kFp8E4M3)) {
    return InternalError("tensor parallel: KV quantisation {} in a layout message", v[3]);
  }
  return kv::MakeKvLayout(std::move(layers), v[0], v[1], v[2], {v[4], v[5]},
                          static_cast<kv::KvQuant>(v[3]));
}

std::vector<uint8_t> EncodeStep(const runner::StepBatch& b) {
  Writer w(StepOp::kStep);
  w.Put<int64_t>(static_cast<int64_t>(b.seqs.size()));
  for (const runner::SeqStep& s : b.seqs) {
    w.PutArray<int32_t>(s.tokens);
    w.Put<int32_t>(s.start_pos);
    w.PutArray<int32_t>(s.page_table[0]);
    w.PutArray<int32_t>(s.page_table[1]);
    w.Put<uint8_t>(static_cast<uint8_t>(s.logits));
    w.PutArray<int32_t>(s.image_block);  // every rank applies the same image-block mask
  }
  w.PutArray<sampling::DrawParams>(b.device_sampling);
  w.PutArray<uint8_t>(b.host_logits);
  w.Put<int64_t>(static_cast<int64_t>(b.banned_tokens.size()));
  for (std::span<const int32_t> ban : b.banned_tokens) w.PutArray<int32_t>(ban);
  return w.Take();
}

absl::Status DecodeStep(std::span<const uint8_t> msg, DecodedStep* out) {
  Reader r(msg);
  GANNET_RETURN_IF_ERROR(Expect(msg, StepOp::kStep, &r));
  out->batch = runner::StepBatch();
  out->storage.clear();
  GANNET_ASSIGN_OR_RETURN(int64_t n, r.Get<int64_t>());
  // Every sequence takes at least 3 array headers: a count beyond the message is corrupt.
  if (n < 0 || n > static_cast<int64_t>(msg.size() / 24)) {
    return InternalError("tensor parallel: {} sequences in a step message", n);
  }
  out->storage.reserve(4 * n);
  auto array = [&]() -> absl::StatusOr<std::span<const int32_t>> {
    out->storage.emplace_back();
    GANNET_RETURN_IF_ERROR(r.GetArray(&out->storage.back()));
    return std::span<const int32_t>(out->storage.back());
  };
  for (int64_t i = 0; i < n; ++i) {
    runner::SeqStep s;
    GANNET_ASSIGN_OR_RETURN(s.tokens, array());
    GANNET_ASSIGN_OR_RETURN(s.start_pos, r.Get<int32_t>());
    GANNET_ASSIGN_OR_RETURN(s.page_table[0], array());
    GANNET_ASSIGN_OR_RETURN(s.page_table[1], array());
    GANNET_ASSIGN_OR_RETURN(uint8_t logits, r.Get<uint8_t>());
    if (logits > static_cast<uint8_t>(runner::SeqStep::Logits::kAll)) {
      return InternalError("tensor parallel: logits kind {} in a step message", logits);
    }
    s.logits = static_cast<runner::SeqStep::Logits>(logits);
    GANNET_ASSIGN_OR_RETURN(s.image_block, array());
    out->batch.seqs.push_back(s);
  }
  GANNET_RETURN_IF_ERROR(r.GetArray(&out->batch.device_sampling));
  GANNET_RETURN_IF_ERROR(r.GetArray(&out->batch.host_logits));
  GANNET_ASSIGN_OR_RETURN(int64_t bans, r.Get<int64_t>());
  if (bans < 0 || bans > static_cast<int64_t>(msg.size() / 8)) {
    return InternalError("tensor parallel: {} banned-token rows in a step message", bans);
  }
  // The ban arrays go into storage after the sequences' (reserve more so spans stay valid).
  out->storage.reserve(out->storage.size() + bans);
  for (int64_t i = 0; i < bans; ++i) {
    GANNET_ASSIGN_OR_RETURN(std::span<const int32_t> ban, array());
    out->batch.banned_tokens.push_back(ban);
  }
  return r.Done();
}

std::vector<uint8_t> EncodeAttachDrafter(const spec::DrafterOptions& o) {
  Writer w(StepOp::kAttachDrafter);
  w.Put<int32_t>(o.max_seqs);
  w.Put<int32_t>(o.max_steps);
  w.Put<uint8_t>(o.enable_graphs);
  return w.Take();
}

absl::StatusOr<spec::DrafterOptions> DecodeAttachDrafter(std::span<const uint8_t> msg) {
  Reader r(msg);
  GANNET_RETURN_IF_ERROR(Expect(msg, StepOp::kAttachDrafter, &r));
  spec::DrafterOptions o;
  GANNET_ASSIGN_OR_RETURN(o.max_seqs, r.Get<int32_t>());
  GANNET_ASSIGN_OR_RETURN(o.max_steps, r.Get<int32_t>());
  GANNET_ASSIGN_OR_RETURN(uint8_t graphs, r.Get<uint8_t>());
  o.enable_graphs = graphs != 0;
  GANNET_RETURN_IF_ERROR(r.Done());
  return o;
}

std::vector<uint8_t> EncodeDraft(std::span<const spec::DraftSeq> seqs, int steps) {
  Writer w(StepOp::kDraft);
  w.Put<int32_t>(steps);
  w.Put<int64_t>(static_cast<int64_t>(seqs.size()));
  for (const spec::DraftSeq& s : seqs) {
    w.Put<int32_t>(s.token);
    w.Put<int32_t>(s.hidden_row);
    w.Put<int64_t>(s.committed);
    w.PutArray<int32_t>(s.page_table[0]);
    w.PutArray<int32_t>(s.page_table[1]);
    w.PutArray<sampling::DrawParams>(s.draws);
    w.Put<uint8_t>(s.want_logits);
  }
  return w.Take();
}

absl::Status DecodeDraft(std::span<const uint8_t> msg, DecodedDraft* out) {
  Reader r(msg);
  GANNET_RETURN_IF_ERROR(Expect(msg, StepOp::kDraft, &r));
  out->seqs.clear();
  out->storage.clear();
  GANNET_ASSIGN_OR_RETURN(out->steps, r.Get<int32_t>());
  GANNET_ASSIGN_OR_RETURN(int64_t n, r.Get<int64_t>());
  // Every sequence takes at least 3 array headers: a count beyond the message is corrupt.
  if (n < 0 || n > static_cast<int64_t>(msg.size() / 24)) {
    return InternalError("tensor parallel: {} sequences in a draft message", n);
  }
  out->storage.reserve(2 * n);
  for (int64_t i = 0; i < n; ++i) {
    spec::DraftSeq s;
    GANNET_ASSIGN_OR_RETURN(s.token, r.Get<int32_t>());
    GANNET_ASSIGN_OR_RETURN(s.hidden_row, r.Get<int32_t>());
    GANNET_ASSIGN_OR_RETURN(s.committed, r.Get<int64_t>());
    for (int g = 0; g < 2; ++g) {
      out->storage.emplace_back();
      GANNET_RETURN_IF_ERROR(r.GetArray(&out->storage.back()));
      s.page_table[g] = std::span<const int32_t>(out->storage.back());
    }
    GANNET_RETURN_IF_ERROR(r.GetArray(&s.draws));
    GANNET_ASSIGN_OR_RETURN(uint8_t want, r.Get<uint8_t>());
    s.want_logits = want != 0;
    out->seqs.push_back(std::move(s));
  }
  return r.Done();
}

absl::StatusOr<StepOp> MessageOp(std::span<const uint8_t> msg) {
  Reader r(msg);
  GANNET_ASSIGN_OR_RETURN(int32_t op, r.Get<int32_t>());
  if (op < static_cast<int32_t>(StepOp::kInit) || op > static_cast<int32_t>(StepOp::kDraft)) {
    return InternalError("tensor parallel: unknown message {}", op);
  }
  return static_cast<StepOp>(op);
}

}  // namespace gannet::parallel

#include "lib/model/safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "fmt/ranges.h"
#include "lib/common/file_util.h"
#include "lib/common/status.h"

namespace gannet::model {
namespace {

// a * b with overflow detection.
bool MulOverflow(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<std::vector<TensorInfo>> ParseSafetensorsHeader(
    std::string_view header, uint64_t data_size, std::string_view source,
    std::map<std::string, std::string>* metadata) {
  auto parsed = Json::Parse(header);
  if (!parsed.ok()) {
    return DataLossError("{}: header is not valid JSON: {}", source, parsed.status().message());
  }
  const Json& root = *parsed;
  if (!root.is_object()) return DataLossError("{}: header must be a JSON object", source);

  std::vector<TensorInfo> tensors;
  for (const auto& [name, entry] : root.AsMembers()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return DataLossError("{}: __metadata__ must be an object", source);
      for (const auto& [k, v] : entry.AsMembers()) {
        if (!v.is_string()) {
          return DataLossError("{}: __metadata__['{}'] must be a string", source, k);
        }
        if (metadata) (*metadata)[k] = v.AsString();
      }
      continue;
    }
    if (!entry.is_object()) return DataLossError("{}: tensor '{}' entry is not an object", source, name);
    TensorInfo t;
    t.name = name;
    const Json* dtype = entry.Find("dtype");
    const Json* shape = entry.Find("shape");
    const Json* offsets = entry.Find("data_offsets");
    if (dtype == nullptr || !dtype->is_string()) {
      return DataLossError("{}: tensor '{}' has no string 'dtype'", source, name);
    }
    auto dt = DTypeFromSafetensorsName(dtype->AsString());
    if (!dt) return DataLossError("{}: tensor '{}' has unknown dtype '{}'", source, name, dtype->AsString());
    t.dtype = *dt;
    if (shape == nullptr || !shape->is_array()) {
      return DataLossError("{}: tensor '{}' has no 'shape' list", source, name);
    }
    uint64_t numel = 1;
    for (const Json& d : shape->AsArray()) {
      if (!d.is_int() || d.AsInt() < 0) {
        return DataLossError("{}: tensor '{}' shape has a non-integer or negative dimension", source, name);
      }
      t.shape.push_back(d.AsInt());
      if (MulOverflow(numel, static_cast<uint64_t>(d.AsInt()), &numel)) {
        return DataLossError("{}: tensor '{}' shape overflows", source, name);
      }
    }
    if (offsets == nullptr || !offsets->is_array() || offsets->AsArray().size() != 2 ||
        !offsets->AsArray()[0].is_int() || !offsets->AsArray()[1].is_int()) {
      return DataLossError("{}: tensor '{}' needs 'data_offsets' [begin, end] integers", source, name);
    }
    int64_t b = offsets->AsArray()[0].AsInt();
    int64_t e = offsets->AsArray()[1].AsInt();
    if (b < 0 || e < b) {
      return DataLossError("{}: tensor '{}' has invalid data_offsets [{}, {}]", source, name, b, e);
    }
    t.begin = static_cast<uint64_t>(b);
    t.end = static_cast<uint64_t>(e);
    uint64_t bits;
    if (MulOverflow(numel, static_cast<uint64_t>(DTypeBits(t.dtype)), &bits)) {
      return DataLossError("{}: tensor '{}' size overflows", source, name);
    }
    if (bits % 8 != 0) {
      return DataLossError("{}: tensor '{}': {} elements of {} do not fill whole bytes", source, name,
                           numel, DTypeName(t.dtype));
    }
    if (bits / 8 != t.nbytes()) {
      return DataLossError(
          "{}: tensor '{}': dtype {} x shape [{}] is {} bytes but data_offsets span {} bytes",
          source, name, DTypeName(t.dtype), fmt::join(t.shape, ", "), bits / 8, t.nbytes());
    }
    if (t.end > data_size) {
      return DataLossError(
          "{}: tensor '{}' data_offsets [{}, {}] lie outside the data buffer of {} bytes", source,
          name, t.begin, t.end, data_size);
    }
    tensors.push_back(std::move(t));
  }

  // Tensors must tile [0, data_size) exactly: no overlap, no gap (as the reference validates).
  std::vector<const TensorInfo*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin < cursor) {
      return DataLossError("{}: tensors '{}' and '{}' overlap (offset {} < {})", source, prev->name,
                           t->name, t->begin, cursor);
    }
    if (t->begin > cursor) {
      return DataLossError("{}: {} bytes before tensor '{}' (offset {}) belong to no tensor", source,
                           t->begin - cursor, t->name, t->begin);
    }
    cursor = t->end;
    prev = t;
  }
  if (cursor != data_size) {
    return DataLossError("{}: data buffer is {} bytes but the tensors cover {} bytes", source,
                         data_size, cursor);
  }
  return tensors;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  // A FIFO or directory in a shard's place is refused here, not waited on or mmap'ed.
  GANNET_ASSIGN_OR_RETURN(const OpenFile file, OpenRegularFile(path, "safetensors file"));
  const int fd = file.fd;
  f->file_size_ = static_cast<uint64_t>(file.size);
  if (f->file_size_ < 8) {
    ::close(fd);
    return DataLossError("{}: truncated: {} bytes is shorter than the 8-byte header length", path,
                         f->file_size_);
  }
  void* map = ::mmap(nullptr, f->file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return InternalError("cannot mmap {}: {}", path, std::strerror(map_err));
  f->map_ = map;
  const uint8_t* base = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > f->file_size_ - 8) {
    return DataLossError("{}: header length {} runs past the end of the file ({} bytes)", path,
                         header_len, f->file_size_);
  }
  if (header_len > kMaxHeaderBytes) {
    return DataLossError("{}: header length {} exceeds the {} byte limit", path, header_len,
                         kMaxHeaderBytes);
  }
  std::string_view header(reinterpret_cast<const char*>(base + 8), header_len);
  f->data_ = base + 8 + header_len;
  GANNET_RETURN_IF_ERROR(f->ParseHeader(header, f->file_size_ - 8 - header_len));
  return f;
}

const uint8_t* SafetensorsFile::Data(const TensorInfo& t) const { return data_ + t.begin; }

absl::Status SafetensorsFile::ParseHeader(std::string_view header, uint64_t data_size) {
  GANNET_ASSIGN_OR_RETURN(tensors_, ParseSafetensorsHeader(header, data_size, path_, &metadata_));
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return absl::OkStatus();
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, file_size_);
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  Json header = Json::MakeObject();
  if (!metadata.empty()) {
    Json meta = Json::MakeObject();
    for (const auto& [k, v] : metadata) meta.Set(k, Json::String(v));
    header.Set("__metadata__", std::move(meta));
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    if (numel * DTypeBits(t.dtype) / 8 != t.bytes.size()) {
      return InvalidArgumentError("WriteSafetensors: tensor '{}' has {} bytes, expected {}", t.name,
                                  t.bytes.size(), numel * DTypeBits(t.dtype) / 8);
    }
    Json entry = Json::MakeObject();
    entry.Set("dtype", Json::String(std::string(DTypeName(t.dtype))));
    Json shape = Json::MakeArray();
    for (int64_t d : t.shape) shape.Push(Json::Int(d));
    entry.Set("shape", std::move(shape));
    Json offs = Json::MakeArray();
    offs.Push(Json::Int(static_cast<int64_t>(offset)));
    offs.Push(Json::Int(static_cast<int64_t>(offset + t.bytes.size())));
    entry.Set("data_offsets", std::move(offs));
    header.Set(t.name, std::move(entry));
    offset += t.bytes.size();
  }
  std::string text = header.Dump();
  // Pad the header with spaces to 8-byte alignment, as the reference writer does.
  while ((text.size() % 8) != 0) text.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot create {}: {}", path, std::strerror(errno));
  uint64_t n = text.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out.write(len, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
  if (!out) return InternalError("error writing {}", path);
  return absl::OkStatus();
}

}  // namespace gannet::model

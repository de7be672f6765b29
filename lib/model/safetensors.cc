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
  const size_t first = header.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || header[first] != '{') {
    if (Json::Parse(header, 1 << 16).ok()) {
      return DataLossError("{}: header must be a JSON object", source);
    }
  }
  // Member by member (Json::ParseMembers): only the tensors' descriptions are kept, never the
  // whole JSON tree, which costs ~30 times the header's bytes (issue 56: a 61 MB header peaked
  // at 1.65 GB).
  std::vector<TensorInfo> tensors;
  bool seen_metadata = false;
  auto add = [&](std::string name, Json entry) -> absl::Status {
    if (name == "__metadata__") {
      if (seen_metadata) return DataLossError("{}: __metadata__ appears twice", source);
      seen_metadata = true;
      if (!entry.is_object()) return DataLossError("{}: __metadata__ must be an object", source);
      for (const auto& [k, v] : entry.AsMembers()) {
        if (!v.is_string()) {
          return DataLossError("{}: __metadata__['{}'] must be a string", source, k);
        }
        if (metadata) (*metadata)[k] = v.AsString();
      }
      return absl::OkStatus();
    }
    if (!entry.is_object())
      return DataLossError("{}: tensor '{}' entry is not an object", source, name);
    TensorInfo t;
    t.name = std::move(name);
    const std::string& name_ref = t.name;
    const Json* dtype = entry.Find("dtype");
    const Json* shape = entry.Find("shape");
    const Json* offsets = entry.Find("data_offsets");
    if (dtype == nullptr || !dtype->is_string()) {
      return DataLossError("{}: tensor '{}' has no string 'dtype'", source, name_ref);
    }
    auto dt = DTypeFromSafetensorsName(dtype->AsString());
    if (!dt) {
      return DataLossError("{}: tensor '{}' has unknown dtype '{}'", source, name_ref,
                           dtype->AsString());
    }
    t.dtype = *dt;
    if (shape == nullptr || !shape->is_array()) {
      return DataLossError("{}: tensor '{}' has no 'shape' list", source, name_ref);
    }
    uint64_t numel = 1;
    for (const Json& d : shape->AsArray()) {
      if (!d.is_int() || d.AsInt() < 0) {
        return DataLossError("{}: tensor '{}' shape has a non-integer or negative dimension",
                             source, name_ref);
      }
      t.shape.push_back(d.AsInt());
      if (MulOverflow(numel, static_cast<uint64_t>(d.AsInt()), &numel)) {
        return DataLossError("{}: tensor '{}' shape overflows", source, name_ref);
      }
    }
    if (offsets == nullptr || !offsets->is_array() || offsets->AsArray().size() != 2 ||
        !offsets->AsArray()[0].is_int() || !offsets->AsArray()[1].is_int()) {
      return DataLossError("{}: tensor '{}' needs 'data_offsets' [begin, end] integers", source,
                           name_ref);
    }
    int64_t b = offsets->AsArray()[0].AsInt();
    int64_t e = offsets->AsArray()[1].AsInt();
    if (b < 0 || e < b) {
      return DataLossError("{}: tensor '{}' has invalid data_offsets [{}, {}]", source, name_ref, b,
                           e);
    }
    t.begin = static_cast<uint64_t>(b);
    t.end = static_cast<uint64_t>(e);
    uint64_t bits;
    if (MulOverflow(numel, static_cast<uint64_t>(DTypeBits(t.dtype)), &bits)) {
      return DataLossError("{}: tensor '{}' size overflows", source, name_ref);
    }
    if (bits % 8 != 0) {
      return DataLossError("{}: tensor '{}': {} elements of {} do not fill whole bytes", source,
                           name_ref, numel, DTypeName(t.dtype));
    }
    if (bits / 8 != t.nbytes()) {
      return DataLossError(
          "{}: tensor '{}': dtype {} x shape [{}] is {} bytes but data_offsets span {} bytes",
          source, name_ref, DTypeName(t.dtype), fmt::join(t.shape, ", "), bits / 8, t.nbytes());
    }
    if (t.end > data_size) {
      return DataLossError(
          "{}: tensor '{}' data_offsets [{}, {}] lie outside the data buffer of {} bytes", source,
          name_ref, t.begin, t.end, data_size);
    }
    tensors.push_back(std::move(t));
    return absl::OkStatus();
  };
  // A tensor entry has a handful of values; __metadata__ may hold many strings.
  absl::Status parsed = Json::ParseMembers(header, int64_t{1} << 20, add);
  if (!parsed.ok()) {
    if (parsed.code() == absl::StatusCode::kDataLoss) return parsed;
    return DataLossError("{}: header is not valid JSON: {}", source, parsed.message());
  }
  {
    // Each name once (the JSON parser's duplicate-key check, which member-by-member reading
    // leaves to us).
    std::vector<const TensorInfo*> by_name;
    by_name.reserve(tensors.size());
    for (const auto& t : tensors) by_name.push_back(&t);
    std::sort(by_name.begin(), by_name.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
    for (size_t i = 1; i < by_name.size(); ++i) {
      if (by_name[i]->name == by_name[i - 1]->name) {
        return DataLossError("{}: header is not valid JSON: duplicate key \"{}\"", source,
                             by_name[i]->name);
      }
    }
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
      return DataLossError("{}: {} bytes before tensor '{}' (offset {}) belong to no tensor",
                           source, t->begin - cursor, t->name, t->begin);
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

namespace {

// pread until `n` bytes are in or the file ends: the bytes read; an I/O error is a status.
absl::StatusOr<uint64_t> ReadAt(int fd, uint8_t* dst, uint64_t n, uint64_t offset,
                                const std::string& path) {
  uint64_t done = 0;
  while (done < n) {
    // At most 1 GiB a call: some kernels cap a read at 2 GiB.
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, uint64_t{1} << 30));
    const ssize_t got = ::pread(fd, dst + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return DataLossError("{}: read error at byte {}: {}", path, offset + done,
                           std::strerror(errno));
    }
    if (got == 0) break;  // the end of the file
    done += static_cast<uint64_t>(got);
  }
  return done;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path,
                                                                       bool read_data) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  // A FIFO or directory in a shard's place is refused here, not waited on.
  GANNET_ASSIGN_OR_RETURN(const OpenFile file, OpenRegularFile(path, "safetensors file"));
  f->fd_ = file.fd;  // closed by the destructor, or once the tensors are read
  f->file_size_ = static_cast<uint64_t>(file.size);
  if (f->file_size_ < 8) {
    return DataLossError("{}: truncated: {} bytes is shorter than the 8-byte header length", path,
                         f->file_size_);
  }
  uint8_t prefix[8];
  GANNET_ASSIGN_OR_RETURN(uint64_t got, ReadAt(f->fd_, prefix, 8, 0, path));
  if (got != 8) return DataLossError("{}: the file shrank while it was opened", path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | prefix[i];
  // The number is not printed: in a file that is not safetensors it is just the first 8 bytes
  // (of a config file, a key, /etc/passwd) read as an integer.
  if (header_len > f->file_size_ - 8) {
    return DataLossError(
        "{}: not a safetensors file: its header length (the first 8 bytes) runs past the end of "
        "the file ({} bytes)",
        path, f->file_size_);
  }
  if (header_len > kMaxHeaderBytes) {
    return DataLossError(
        "{}: not a safetensors file gannet reads: its header length (the first 8 bytes) is over "
        "the {} byte limit",
        path, kMaxHeaderBytes);
  }
  std::string header(header_len, '\0');
  GANNET_ASSIGN_OR_RETURN(
      got, ReadAt(f->fd_, reinterpret_cast<uint8_t*>(header.data()), header_len, 8, path));
  if (got != header_len) return DataLossError("{}: the file shrank while it was opened", path);
  const uint64_t data_size = f->file_size_ - 8 - header_len;
  GANNET_RETURN_IF_ERROR(f->ParseHeader(header, data_size));
  header.clear();
  header.shrink_to_fit();
  // The tensors' bytes live in anonymous memory of this process, read from the file (ReadTensors),
  // never mapped from it: a file truncated or rewritten while an engine runs cannot raise SIGBUS
  // or change the weights under it (issue 56). The mapping reserves address space only; pages
  // are committed as tensors are read, so skipped tensors (towers) cost nothing. The data keeps
  // the file's alignment modulo 64 (a misaligned tensor stays misaligned, as safetensors.h says).
  f->shift_ = (8 + header_len) % 64;
  f->region_size_ = f->shift_ + std::max<uint64_t>(data_size, 1);
  void* region = ::mmap(nullptr, f->region_size_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) {
    return ResourceExhaustedError(
        "{}: cannot reserve {} bytes of address space for its tensors: {}", path, f->region_size_,
        std::strerror(errno));
  }
  f->region_ = region;
  f->data_ = static_cast<const uint8_t*>(region) + f->shift_;
  f->data_offset_ = 8 + header_len;
  if (read_data) {
    std::vector<const TensorInfo*> all;
    for (const TensorInfo& t : f->tensors_) all.push_back(&t);
    GANNET_RETURN_IF_ERROR(f->ReadTensors(all));
  }
  return f;
}

absl::Status SafetensorsFile::ReadTensors(std::vector<const TensorInfo*> tensors) {
  if (fd_ < 0) return FailedPreconditionError("{}: tensors were already read", path_);
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  uint8_t* data = static_cast<uint8_t*>(region_) + shift_;
  size_t i = 0;
  while (i < tensors.size()) {
    // One read for each run of adjacent tensors.
    const uint64_t begin = tensors[i]->begin;
    uint64_t end = tensors[i]->end;
    size_t j = i + 1;
    while (j < tensors.size() && tensors[j]->begin == end) end = tensors[j++]->end;
    GANNET_ASSIGN_OR_RETURN(uint64_t got,
                            ReadAt(fd_, data + begin, end - begin, data_offset_ + begin, path_));
    if (got != end - begin) {
      return DataLossError(
          "{}: the file ends at byte {} but was {} bytes when it was opened (it was truncated or "
          "replaced while the weights loaded)",
          path_, data_offset_ + begin + got, file_size_);
    }
    i = j;
  }
  ::close(fd_);
  fd_ = -1;
  // Read-only from here: nothing writes weights.
  ::mprotect(region_, region_size_, PROT_READ);
  return absl::OkStatus();
}

void SafetensorsFile::ReleaseData() {
  if (region_ == nullptr) return;
  // The pages go back to the system; a read of a released tensor faults (a bug: the device holds
  // the weights now), it never sees stale or zero weights.
  ::madvise(region_, region_size_, MADV_DONTNEED);
  ::mprotect(region_, region_size_, PROT_NONE);
}

uint64_t SafetensorsFile::ReleaseRange(const void* p, uint64_t n) {
  if (region_ == nullptr || fd_ >= 0) return 0;  // nothing read yet, or still being read
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto region = reinterpret_cast<uintptr_t>(region_);
  if (begin < region || n > region_size_ || begin - region > region_size_ - n) return 0;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + n) / page * page;
  if (last <= first) return 0;
  void* at = reinterpret_cast<void*>(first);
  ::madvise(at, last - first, MADV_DONTNEED);
  ::mprotect(at, last - first, PROT_NONE);
  return last - first;
}

const uint8_t* SafetensorsFile::Data(const TensorInfo& t) const { return data_ + t.begin; }

absl::Status SafetensorsFile::ParseHeader(std::string_view header, uint64_t data_size) {
  GANNET_ASSIGN_OR_RETURN(tensors_, ParseSafetensorsHeader(header, data_size, path_, &metadata_));
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return absl::OkStatus();
}

SafetensorsFile::~SafetensorsFile() {
  if (region_ != nullptr) ::munmap(region_, region_size_);
  if (fd_ >= 0) ::close(fd_);
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
  for (const auto& t : tensors)
    out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
  if (!out) return InternalError("error writing {}", path);
  return absl::OkStatus();
}

}  // namespace gannet::model

// A memory-mapped safetensors file (https://github.com/huggingface/safetensors format).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header, then the data buffer.
// Open() validates everything before any tensor is used, and reports the first problem naming the
// file and tensor: a file shorter than 8 bytes, a header length past the end of the file, bad
// JSON, an unknown dtype, a shape/dtype/byte-size disagreement, offsets outside the data buffer,
// overlapping tensors, or a gap (the reference implementation requires the tensors to tile the
// buffer exactly). Tensor bytes are only touched when a caller reads them, so tensors that are
// never bound (vision/audio towers) cost no I/O; the exception is a tensor whose bytes are not
// aligned to its element size in the file (legal, though the reference writer avoids it), copied
// at Open into aligned memory so that callers may read it through typed pointers. Immutable after
// Open: safe to share across threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/dtype.h"
#include "lib/common/json.h"

namespace gannet::model {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data buffer
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Largest header we accept; the reference implementation uses the same 100 MB bound.
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;

  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* Find(std::string_view name) const;
  // The tensor's bytes in the mapping (t must come from this file). The format does not require
  // a tensor to start at a multiple of its element size, so this may be misaligned for its type:
  // readers on the host copy elements out (LoadUnaligned, common/dtype.h: the backends'
  // LoadWeight, the drafter's token ordering), and nothing is copied here (a checkpoint of many
  // gigabytes may be misaligned throughout).
  const uint8_t* Data(const TensorInfo& t) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  absl::Status ParseHeader(std::string_view header, uint64_t data_size);

  std::string path_;
  void* map_ = nullptr;
  uint64_t file_size_ = 0;
  const uint8_t* data_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses one header without a file: used by Open() and by the fuzz target.
absl::StatusOr<std::vector<TensorInfo>> ParseSafetensorsHeader(
    std::string_view header, uint64_t data_size, std::string_view source,
    std::map<std::string, std::string>* metadata);

// Writes a safetensors file. Tensors are written in the order given, contiguously.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian data, size must match dtype x shape
};
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace gannet::model

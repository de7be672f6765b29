// A safetensors file (https://github.com/huggingface/safetensors format).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header, then the data buffer.
// Open() validates everything before any tensor is used, and reports the first problem naming the
// file and tensor: a file shorter than 8 bytes, a header length past the end of the file, bad
// JSON, an unknown dtype, a shape/dtype/byte-size disagreement, offsets outside the data buffer,
// overlapping tensors, or a gap (the reference implementation requires the tensors to tile the
// buffer exactly).
//
// Tensor bytes are READ into anonymous memory this process owns (pread), never mapped from the
// file: a checkpoint truncated or rewritten in place while an engine runs (`cp new old`,
// `rsync --inplace`, a re-download) can neither kill the process with SIGBUS nor change its
// weights; a file that shrinks while it is being read is a DataLoss error naming it (issue 56).
// Open reserves address space for the data buffer (no memory until pages are written) and, unless
// told not to, reads every tensor; a Checkpoint opens its files without reading and reads only
// the tensors it keeps (vision/audio towers cost no I/O and no memory). The cost: the weights are
// private memory of the process, not page cache that other processes share or the kernel can
// evict; on CUDA the host copy is given back once the device holds the weights (ReleaseData).
// Immutable after the tensors are read: safe to share across threads.
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
  // Largest header we accept. The reference implementation allows 100 MB; Gemma-4's headers are
  // well under 1 MB (a tensor's entry is ~150 bytes), and a header is parsed member by member
  // into ~4x its bytes of tensor descriptions, kept while the file is open (a 16 MB header of the
  // smallest entries: ~80 MB peak, measured in issue 56), never into a whole JSON tree (~30x).
  static constexpr uint64_t kMaxHeaderBytes = 16u << 20;

  // read_data = false: headers only (model info, a Checkpoint that reads what it keeps).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path,
                                                               bool read_data = true);
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
  // Its bytes are meaningful once ReadTensors read it (zeros before).
  const uint8_t* Data(const TensorInfo& t) const;
  // Reads these tensors (of this file) from the file, once; then closes it. DataLoss when the
  // file ends early (it was truncated or replaced since Open), naming the file.
  absl::Status ReadTensors(std::vector<const TensorInfo*> tensors);
  // Returns the tensors' memory to the system once nothing reads them again (the device holds
  // the weights); reading a tensor afterwards faults.
  void ReleaseData();
  // Gives back the pages wholly inside [p, p + n) when that range lies in this file's tensor
  // bytes (else nothing): a backend that copied a tensor into its own form no longer needs it
  // (the CPU's fused QKV and gate/up matrices), so the weights are not held twice. Pages shared
  // with a neighbouring tensor stay. A read of a released page faults, as after ReleaseData.
  // Returns the bytes given back.
  uint64_t ReleaseRange(const void* p, uint64_t n);
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  absl::Status ParseHeader(std::string_view header, uint64_t data_size);

  std::string path_;
  int fd_ = -1;             // open until the tensors are read
  void* region_ = nullptr;  // anonymous memory holding the data buffer
  uint64_t region_size_ = 0;
  uint64_t shift_ = 0;        // data_ - region_: the file's data offset modulo 64
  uint64_t data_offset_ = 0;  // where the data buffer starts in the file
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

// A checkpoint folder: config.json plus one safetensors file or a sharded set described by
// model.safetensors.index.json.
//
// The checkpoint indexes every tensor of every shard by name. With text_only (the default),
// tensors of the vision/audio towers and their embedders are skipped: they are never bound and
// never read (their pages are never faulted in), and the bytes skipped are reported. With
// vision_only, the opposite: only the vision tower and its embedder are kept (lib/vision binds
// them), so loading the tower never touches the text weights. Sharded
// checkpoints are validated against their index: a weight_map entry naming a missing shard or a
// tensor absent from its shard, a tensor in two shards, or a shard tensor the index does not list
// is an error. Immutable after Open: safe to share across threads.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/safetensors.h"

namespace gannet::model {

// model.safetensors.index.json lists every tensor once (~100 KB for Gemma-4 31B).
inline constexpr int64_t kMaxIndexJsonBytes = int64_t{16} << 20;

// A tensor's location inside a checkpoint.
struct TensorRef {
  const TensorInfo* info = nullptr;
  const SafetensorsFile* file = nullptr;
  const uint8_t* data() const { return file->Data(*info); }
};

struct CheckpointOptions {
  bool text_only = true;
  // Keep only model.vision_tower.* and model.embed_vision.* (overrides text_only).
  bool vision_only = false;
  // Read the kept tensors' bytes at Open; false: headers only (ReadData later, or never: model
  // info), so that a memory check can run before any weight is read.
  bool read_data = true;
};

class Checkpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir,
                                                          const CheckpointOptions& options = {});

  const std::string& dir() const { return dir_; }
  // nullptr if absent (or skipped as a tower tensor).
  const TensorRef* Find(std::string_view name) const;
  // All bindable tensor names, sorted.
  std::vector<std::string> Names() const;
  size_t num_shards() const { return files_.size(); }
  uint64_t skipped_bytes() const { return skipped_bytes_; }
  int64_t skipped_tensors() const { return skipped_tensors_; }
  uint64_t total_bytes() const;  // of the tensors kept
  // Reads the kept tensors from their files into this process's memory (safetensors.h), once.
  absl::Status ReadData();
  // Gives that memory back once the device holds the weights (nothing may read them after).
  void ReleaseData();
  // SafetensorsFile::ReleaseRange on the file holding [p, p + n); 0 when none does.
  uint64_t ReleaseRange(const void* p, uint64_t n);

  // True for names under the vision/audio towers or their embedders.
  static bool IsTowerTensor(std::string_view name);
  // True for names under the vision tower or its embedder (a subset of the tower tensors).
  static bool IsVisionTensor(std::string_view name);

 private:
  Checkpoint() = default;
  absl::Status AddFile(std::unique_ptr<SafetensorsFile> file, const CheckpointOptions& options);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorRef, std::less<>> tensors_;
  uint64_t skipped_bytes_ = 0;
  int64_t skipped_tensors_ = 0;
};

}  // namespace gannet::model

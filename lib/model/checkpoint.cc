#include "lib/model/checkpoint.h"

#include <set>

#include "lib/common/file_util.h"
#include "lib/common/json.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"

namespace gannet::model {
namespace {

constexpr std::string_view kSingleFile = "model.safetensors";
constexpr std::string_view kIndexFile = "model.safetensors.index.json";

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

bool Checkpoint::IsTowerTensor(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {
      "model.vision_tower.", "model.embed_vision.", "model.audio_tower.", "model.embed_audio.",
      "vision_tower.",       "embed_vision.",       "audio_tower.",       "embed_audio.",
  };
  for (auto p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  return false;
}

bool Checkpoint::IsVisionTensor(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {
      "model.vision_tower.",
      "model.embed_vision.",
      "vision_tower.",
      "embed_vision.",
  };
  for (auto p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  return false;
}

absl::Status Checkpoint::AddFile(std::unique_ptr<SafetensorsFile> file,
                                 const CheckpointOptions& options) {
  for (const TensorInfo& t : file->tensors()) {
    const bool skip =
        options.vision_only ? !IsVisionTensor(t.name) : options.text_only && IsTowerTensor(t.name);
    if (skip) {
      skipped_bytes_ += t.nbytes();
      ++skipped_tensors_;
      continue;
    }
    auto [it, inserted] = tensors_.emplace(t.name, TensorRef{&t, file.get()});
    if (!inserted) {
      return DataLossError("tensor '{}' appears in both {} and {}", t.name, it->second.file->path(),
                           file->path());
    }
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir,
                                                             const CheckpointOptions& options) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  std::string index_path = dir + "/" + std::string(kIndexFile);
  std::string single_path = dir + "/" + std::string(kSingleFile);

  if (FileExists(index_path)) {
    GANNET_ASSIGN_OR_RETURN(std::string text,
                            ReadFileToString(index_path, kMaxIndexJsonBytes, "safetensors index"));
    auto json = Json::Parse(text);
    if (!json.ok()) return DataLossError("{}: {}", index_path, json.status().message());
    const Json* wm = json->Find("weight_map");
    if (wm == nullptr || !wm->is_object()) {
      return DataLossError("{}: missing 'weight_map' object", index_path);
    }
    std::map<std::string, std::set<std::string>> by_shard;
    for (const auto& [name, shard] : wm->AsMembers()) {
      if (!shard.is_string()) {
        return DataLossError("{}: weight_map['{}'] must be a file name", index_path, name);
      }
      const std::string& s = shard.AsString();
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") {
        return DataLossError("{}: weight_map['{}'] names '{}', which is not a file in the folder",
                             index_path, name, s);
      }
      by_shard[s].insert(name);
    }
    if (by_shard.empty()) return DataLossError("{}: weight_map is empty", index_path);
    for (const auto& [shard, names] : by_shard) {
      std::string path = dir + "/" + shard;
      if (!FileExists(path)) {
        return DataLossError("{}: shard '{}' (holding '{}') does not exist", index_path, shard,
                             *names.begin());
      }
      GANNET_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path, /*read_data=*/false));
      for (const std::string& n : names) {
        if (file->Find(n) == nullptr) {
          return DataLossError("{}: tensor '{}' is mapped to {} but that file does not contain it",
                               index_path, n, shard);
        }
      }
      for (const TensorInfo& t : file->tensors()) {
        if (!names.count(t.name)) {
          return DataLossError("{}: tensor '{}' is in {} but the index does not list it",
                               index_path, t.name, shard);
        }
      }
      GANNET_RETURN_IF_ERROR(ckpt->AddFile(std::move(file), options));
    }
  } else if (FileExists(single_path)) {
    GANNET_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single_path, /*read_data=*/false));
    GANNET_RETURN_IF_ERROR(ckpt->AddFile(std::move(file), options));
  } else {
    return NotFoundError("{}: no {} or {} found", dir, kSingleFile, kIndexFile);
  }
  if (options.read_data) GANNET_RETURN_IF_ERROR(ckpt->ReadData());
  if (ckpt->skipped_tensors_ > 0) {
    GANNET_LOG_INFO("{}: {} load skipped {} {} tensors ({:.1f} MiB)", dir,
                    options.vision_only ? "vision-only" : "text-only", ckpt->skipped_tensors_,
                    options.vision_only ? "text/audio" : "vision/audio",
                    ckpt->skipped_bytes_ / 1048576.0);
  }
  return ckpt;
}

const TensorRef* Checkpoint::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [n, _] : tensors_) out.push_back(n);
  return out;
}

absl::Status Checkpoint::ReadData() {
  std::map<const SafetensorsFile*, std::vector<const TensorInfo*>> kept;
  for (const auto& [_, t] : tensors_) kept[t.file].push_back(t.info);
  for (const auto& file : files_) {
    GANNET_RETURN_IF_ERROR(file->ReadTensors(std::move(kept[file.get()])));
  }
  return absl::OkStatus();
}

void Checkpoint::ReleaseData() {
  for (const auto& file : files_) file->ReleaseData();
}

uint64_t Checkpoint::ReleaseRange(const void* p, uint64_t n) {
  uint64_t released = 0;
  for (const auto& file : files_) released += file->ReleaseRange(p, n);
  return released;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [_, t] : tensors_) n += t.info->nbytes();
  return n;
}

}  // namespace gannet::model

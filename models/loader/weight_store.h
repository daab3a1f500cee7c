// WeightStore: the tensors of a model directory, from `model.safetensors` or from the shards named
// by `model.safetensors.index.json`, looked up by name with their shape checked against what the
// config implies. Owns the file mappings; Tensors it returns live as long as the store.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/tensor.h"
#include "models/loader/safetensors_file.h"

namespace ls {

class WeightStore {
 public:
  // With shapes_only, only the files' headers are read (SafetensorsFile's header-only open): a
  // shapes-only checkpoint serves as well as a full one, and every tensor reads as zeros.
  static absl::StatusOr<std::unique_ptr<WeightStore>> Open(const std::string& model_dir, bool shapes_only = false);
  bool shapes_only() const { return shapes_only_; }

  // The tensor `name` with exactly the expected shape ([rows, cols], or [cols] when rows == 0).
  absl::StatusOr<Tensor> Get(const std::string& name, int64_t rows, int64_t cols) const;
  bool Has(const std::string& name) const { return where_.count(name) != 0; }
  // The entry of tensor `name` (dtype and shape unchecked), or null.
  const TensorEntry* Entry(const std::string& name) const;
  // The file holding tensor `name` (for messages); empty when there is none.
  std::string PathOf(const std::string& name) const;
  // Keeps bytes derived from the checkpoint at load (unpacked zero points) for the store's life.
  const void* Keep(std::vector<uint8_t> bytes) const;
  const std::string& dir() const { return dir_; }
  // Every tensor's name and entry, in name order.
  std::vector<std::pair<std::string, const TensorEntry*>> Entries() const;
  // Total bytes of every tensor in the store.
  size_t total_bytes() const;
  // Hints that a tensor's bytes will not be read again soon (the backend keeps its own copy):
  // the whole pages inside it leave the process's resident memory; a later read maps them in
  // again from the file.
  static void ReleaseResidentPages(const Tensor& t);

 private:
  WeightStore() = default;
  std::string dir_;
  bool shapes_only_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const SafetensorsFile*> where_;  // tensor name -> file
  mutable std::deque<std::vector<uint8_t>> kept_;
};

}  // namespace ls

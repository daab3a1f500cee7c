// WeightStore: single-file and sharded checkpoints, shape checks with precise messages.
#include "models/loader/weight_store.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace ls {

absl::StatusOr<std::unique_ptr<WeightStore>> WeightStore::Open(const std::string& model_dir, bool shapes_only) {
  namespace fs = std::filesystem;
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = model_dir;
  store->shapes_only_ = shapes_only;
  const std::string single = model_dir + "/model.safetensors";
  const std::string index = model_dir + "/model.safetensors.index.json";
  std::vector<std::string> shard_files;
  std::map<std::string, std::string> weight_map;  // tensor -> shard file (sharded only)
  if (fs::exists(index)) {
    std::ifstream in(index, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(index, ": invalid JSON"));
    auto wm = j.is_object() ? j.find("weight_map") : j.end();
    if (!j.is_object() || wm == j.end() || !wm->is_object())
      return absl::InvalidArgumentError(absl::StrCat(index, ": missing object 'weight_map'"));
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        return absl::InvalidArgumentError(absl::StrCat(index, ": weight_map entry '", it.key(), "' is not a file name"));
      const std::string file = it.value().get<std::string>();
      if (file.find('/') != std::string::npos || file == "..")
        return absl::InvalidArgumentError(absl::StrCat(index, ": shard name '", file, "' must be a plain file name"));
      weight_map[it.key()] = file;
      if (std::find(shard_files.begin(), shard_files.end(), file) == shard_files.end()) shard_files.push_back(file);
    }
  } else if (fs::exists(single)) {
    shard_files.push_back("model.safetensors");
  } else {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no model.safetensors or model.safetensors.index.json"));
  }
  std::map<std::string, const SafetensorsFile*> by_file;
  for (const auto& name : shard_files) {
    auto f = SafetensorsFile::Open(model_dir + "/" + name, shapes_only);
    if (!f.ok()) return f.status();
    by_file[name] = f->get();
    store->files_.push_back(std::move(*f));
  }
  if (weight_map.empty()) {
    for (const auto& [name, e] : store->files_[0]->entries()) store->where_[name] = store->files_[0].get();
  } else {
    for (const auto& [tensor, file] : weight_map) {
      const SafetensorsFile* f = by_file[file];
      if (!f->Find(tensor))
        return absl::InvalidArgumentError(
            absl::StrCat(f->path(), ": tensor '", tensor, "' listed in model.safetensors.index.json is missing"));
      store->where_[tensor] = f;
    }
  }
  return store;
}

absl::StatusOr<Tensor> WeightStore::Get(const std::string& name, int64_t rows, int64_t cols) const {
  auto it = where_.find(name);
  if (it == where_.end()) return absl::NotFoundError(absl::StrCat(dir_, ": missing tensor '", name, "'"));
  const TensorEntry* e = it->second->Find(name);
  const std::vector<int64_t> want = rows == 0 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
  if (e->shape != want)
    return absl::InvalidArgumentError(absl::StrCat(it->second->path(), ": tensor '", name, "' has shape [",
                                                   absl::StrJoin(e->shape, ", "), "] but config.json implies [",
                                                   absl::StrJoin(want, ", "), "]"));
  return Tensor{e->data, e->dtype, rows == 0 ? 1 : rows, cols};
}

const TensorEntry* WeightStore::Entry(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second->Find(name);
}

std::string WeightStore::PathOf(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? std::string() : it->second->path();
}

const void* WeightStore::Keep(std::vector<uint8_t> bytes) const {
  kept_.push_back(std::move(bytes));
  return kept_.back().data();
}

std::vector<std::pair<std::string, const TensorEntry*>> WeightStore::Entries() const {
  std::vector<std::pair<std::string, const TensorEntry*>> out;
  for (const auto& [name, file] : where_) out.emplace_back(name, file->Find(name));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

size_t WeightStore::total_bytes() const {
  size_t n = 0;
  for (const auto& f : files_)
    for (const auto& [name, e] : f->entries()) n += e.bytes;
  return n;
}

void WeightStore::ReleaseResidentPages(const Tensor& t) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.bytes()) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace ls

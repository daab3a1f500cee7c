// RewriteCheckpoint: shard by shard, through SafetensorsFile and SafetensorsWriter.
#include "models/loader/checkpoint_rewrite.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "models/loader/safetensors_file.h"
#include "models/loader/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace ls {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

// The module prefix of a tensor name ("a.b.gate.e_score_correction_bias" -> "a.b.gate.").
std::string ModulePrefix(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot + 1);
}

}  // namespace

absl::Status RewriteCheckpoint(const std::string& in_dir, const std::string& out_dir,
                               const std::map<std::string, std::vector<float>>& replaced, RewriteStats* stats) {
  std::error_code ec;
  if (fs::exists(out_dir) && fs::equivalent(in_dir, out_dir, ec))
    return absl::InvalidArgumentError("the output directory must differ from the model directory");
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(out_dir, ": ", ec.message()));

  // The shards and which tensor each holds.
  std::vector<std::string> shards;
  ojson index;
  const bool sharded = fs::exists(fs::path(in_dir) / kIndex);
  if (sharded) {
    auto text = ReadFile((fs::path(in_dir) / kIndex).string());
    if (!text.ok()) return text.status();
    index = ojson::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return absl::InvalidArgumentError(absl::StrCat(in_dir, "/", kIndex, ": missing object 'weight_map'"));
    std::set<std::string> seen;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string()) return absl::InvalidArgumentError(absl::StrCat(kIndex, ": entry '", tensor, "' is not a file"));
      if (seen.insert(file.get<std::string>()).second) shards.push_back(file.get<std::string>());
    }
  } else {
    shards.push_back(kSingle);
  }
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
  for (const std::string& s : shards) {
    auto f = SafetensorsFile::Open((fs::path(in_dir) / s).string());
    if (!f.ok()) return f.status();
    files[s] = std::move(*f);
  }
  // Where each replaced tensor goes: its own shard, else beside its module, else the first shard.
  std::map<std::string, std::vector<std::string>> into;  // shard -> replaced names
  for (const auto& [name, values] : replaced) {
    std::string target;
    for (const std::string& s : shards)
      if (files[s]->Find(name)) target = s;
    if (target.empty()) {
      const std::string prefix = ModulePrefix(name);
      for (const std::string& s : shards) {
        auto it = files[s]->entries().lower_bound(prefix);
        if (!prefix.empty() && it != files[s]->entries().end() && it->first.rfind(prefix, 0) == 0) {
          target = s;
          break;
        }
      }
      if (target.empty()) target = shards.front();
      if (sharded) index["weight_map"][name] = target;
    }
    into[target].push_back(name);
  }

  // Every other file as it is.
  for (const auto& e : fs::directory_iterator(in_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || files.count(name) || (sharded && name == kIndex)) continue;
    fs::copy_file(e.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat("copying ", name, ": ", ec.message()));
  }
  if (sharded) {
    std::ofstream out(fs::path(out_dir) / kIndex, std::ios::binary);
    out << index.dump(2) << "\n";
    if (!out) return absl::InternalError(absl::StrCat(out_dir, "/", kIndex, ": write failed"));
  }
  RewriteStats st;
  for (const std::string& s : shards) {
    const fs::path dst = fs::path(out_dir) / s;
    fs::remove(dst, ec);
    auto it = into.find(s);
    if (it == into.end()) {
      fs::create_hard_link(fs::path(in_dir) / s, dst, ec);
      if (ec) fs::copy_file(fs::path(in_dir) / s, dst, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::InternalError(absl::StrCat("copying ", s, ": ", ec.message()));
      ++st.shards_linked;
      continue;
    }
    SafetensorsWriter w;
    for (const auto& [name, e] : files[s]->entries())
      w.AddRaw(name, e.shape, e.dtype, std::string(static_cast<const char*>(e.data), e.bytes));
    for (const std::string& name : it->second) {
      const std::vector<float>& v = replaced.at(name);
      const TensorEntry* old = files[s]->Find(name);
      const DType dtype = old ? old->dtype : DType::kF32;
      if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16)
        return absl::InvalidArgumentError(absl::StrCat(s, ": tensor '", name, "' is stored as ", std::string(DTypeName(dtype)),
                                                       ", not a floating-point type it can be rewritten in"));
      if (old && (old->shape.size() != 1 || old->shape[0] != static_cast<int64_t>(v.size())))
        return absl::InvalidArgumentError(absl::StrCat(s, ": tensor '", name, "' does not hold ", v.size(), " values"));
      w.Add(name, {static_cast<int64_t>(v.size())}, v, dtype);
    }
    if (auto w_st = w.Write(dst.string()); !w_st.ok()) return w_st;
    ++st.shards_rewritten;
  }
  if (stats) *stats = st;
  return absl::OkStatus();
}

}  // namespace ls

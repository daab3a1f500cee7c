// QuantizationConfig: strict reading of config.json's quantization_config and module matching.
#include "models/loader/quantization_config.h"

#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ls {
namespace {

// A regular expression, or nullopt when the pattern does not compile (then it matches nothing but
// its literal text).
std::optional<std::regex> Compile(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error&) {
    return std::nullopt;
  }
}

// transformers' rule for FP8's modules_to_not_convert: the key matches from the start of the name
// up to a module boundary (as text or as a pattern), or the name ends with it.
bool Fp8Excluded(const std::string& module, const std::string& key) {
  if (module.size() >= key.size() && module.compare(module.size() - key.size(), key.size(), key) == 0) return true;
  const std::optional<std::regex> re = Compile(key);
  for (size_t i = 0; i <= module.size(); ++i) {
    if (i < module.size() && module[i] != '.') continue;
    const std::string prefix = module.substr(0, i);
    if (re ? std::regex_match(prefix, *re) : prefix == key) return true;
  }
  return false;
}

// Keys of a quantization_config that must be null (or absent, or an empty object): settings whose
// other values change the math.
void RequireNull(ConfigReader& r, std::initializer_list<const char*> keys, const char* what) {
  for (const char* key : keys) {
    r.Ignore({key});
    if (!r.Has(key)) continue;
    if (auto obj = r.Object(key); obj && obj->Keys().empty()) {
      continue;  // {}: nothing configured
    }
    r.Unsupported(key, what);
  }
}

void ReadFp8(ConfigReader& r, QuantizationConfig* q) {
  q->method = QuantizationConfig::Method::kFp8Block;
  const std::string fmt = r.String("fmt", "e4m3");
  if (fmt != "e4m3") r.Unsupported("fmt", "e4m3");
  // "dynamic": activations are quantized at run time by the reference kernels; nothing of it is
  // stored, and this server keeps activations in float32. "static" needs stored activation scales.
  const std::string act = r.String("activation_scheme", "dynamic");
  if (act != "dynamic") r.Unsupported("activation_scheme", "dynamic: weights only, activations in float32");
  const std::vector<int64_t> block = r.IntList("weight_block_size");
  if (!r.status().ok()) return;
  if (block.size() != 2 || block[0] <= 0 || block[1] <= 0 || block[0] > (1 << 20) || block[1] > (1 << 20)) {
    r.Fail(absl::StrCat("key '", r.Path("weight_block_size"), "' must be two positive integers [rows, cols] (",
                        block.empty() ? "absent: per-tensor FP8 scales are not supported" : "got another value", ")"));
    return;
  }
  q->block_rows = static_cast<int32_t>(block[0]);
  q->block_cols = static_cast<int32_t>(block[1]);
  for (const char* key : {"modules_to_not_convert", "ignored_layers"})
    if (auto list = r.StringList(key))
      q->modules_not_quantized.insert(q->modules_not_quantized.end(), list->begin(), list->end());
  r.Ignore({"dequantize"});
}

void ReadGroup(ConfigReader& g, const std::string& name, const std::string& format, QuantizationConfig* q) {
  QuantizationConfig::Group group;
  group.name = name;
  if (auto targets = g.StringList("targets")) group.targets = *targets;
  if (group.targets.empty()) g.Fail(absl::StrCat("key '", g.Path("targets"), "' must list at least one target"));
  const std::string group_format = g.String("format", format.c_str());
  if (group_format != format)
    g.Unsupported("format", absl::StrCat("the config's format \"", format, "\"; mixed formats are not supported"));
  RequireNull(g, {"input_activations", "output_activations"},
              "null: activation quantization is not supported; weights only");
  auto w = g.Object("weights");
  if (!w) {
    g.Fail(absl::StrCat("key '", g.Path("weights"), "' is required"));
    return;
  }
  const int64_t bits = w->Int("num_bits", true);
  const std::string type = w->String("type", "int");
  group.symmetric = w->Bool("symmetric", true);
  const std::string strategy = w->String("strategy", "group");
  const int64_t group_size = w->Int("group_size", false, 0);
  const bool dynamic = w->Bool("dynamic", false);
  RequireNull(*w, {"actorder", "block_structure"}, "null");
  w->Ignore({"observer", "observer_kwargs", "scale_dtype", "zp_dtype"});
  if (!g.status().ok()) return;
  if (dynamic) w->Unsupported("dynamic", "false: weights quantized ahead of time");
  if (format == "pack-quantized") {
    group.codes = DType::kU4;
    if (bits != 4) w->Unsupported("num_bits", "4 in pack-quantized");
    if (type != "int") w->Unsupported("type", "\"int\" in pack-quantized");
    if (strategy == "group") {
      if (group_size <= 0) w->Unsupported("group_size", "a positive group size with strategy \"group\"");
      group.group_size = static_cast<int32_t>(group_size);
    } else if (strategy != "channel") {
      w->Unsupported("strategy", "group or channel");
    }
  } else {  // mxfp4-pack-quantized
    group.codes = DType::kE2M1;
    if (bits != 4) w->Unsupported("num_bits", "4 in mxfp4-pack-quantized");
    if (type != "float") w->Unsupported("type", "\"float\" in mxfp4-pack-quantized");
    if (strategy != "group") w->Unsupported("strategy", "group in mxfp4-pack-quantized");
    if (group_size != 32) w->Unsupported("group_size", "32 in mxfp4-pack-quantized");
    if (!group.symmetric) w->Unsupported("symmetric", "true in mxfp4-pack-quantized");
    group.group_size = 32;
  }
  q->groups.push_back(std::move(group));
}

void ReadCompressedTensors(ConfigReader& r, QuantizationConfig* q) {
  q->method = QuantizationConfig::Method::kCompressedTensors;
  const std::string format = r.String("format", "");
  if (format != "pack-quantized" && format != "mxfp4-pack-quantized") {
    r.Unsupported("format", "pack-quantized or mxfp4-pack-quantized");
    return;
  }
  const std::string status = r.String("quantization_status", "compressed");
  if (status != "compressed") r.Unsupported("quantization_status", "compressed");
  RequireNull(r, {"kv_cache_scheme"}, "null: KV-cache quantization is not supported");
  RequireNull(r, {"sparsity_config", "moe_sparsity_config"}, "null or {}: sparse checkpoints are not supported");
  RequireNull(r, {"transform_config"}, "null or {}: transformed weights are not supported");
  r.Ignore({"version", "global_compression_ratio", "provider"});
  if (auto ignore = r.StringList("ignore")) q->ignore = *ignore;
  auto groups = r.Object("config_groups");
  if (!groups || groups->Keys().empty()) {
    r.Fail(absl::StrCat("key '", r.Path("config_groups"), "' must hold at least one config group"));
    return;
  }
  for (const std::string& name : groups->Keys()) {
    auto g = groups->Object(name.c_str());
    if (!g) return;
    ReadGroup(*g, name, format, q);
  }
}

}  // namespace

bool ModuleMatches(const std::string& module, const std::string& target) {
  if (target.rfind("re:", 0) == 0) {
    const std::optional<std::regex> re = Compile(target.substr(3));
    return re && std::regex_search(module, *re, std::regex_constants::match_continuous);
  }
  return module == target;
}

bool QuantizationConfig::Ignored(const std::string& module) const {
  if (method == Method::kFp8Block) {
    for (const std::string& key : modules_not_quantized)
      if (Fp8Excluded(module, key)) return true;
    return false;
  }
  for (const std::string& target : ignore)
    if (ModuleMatches(module, target)) return true;
  return false;
}

const QuantizationConfig::Group* QuantizationConfig::GroupFor(const std::string& module) const {
  for (const Group& g : groups)
    for (const std::string& t : g.targets)
      if (ModuleMatches(module, t)) return &g;
  for (const Group& g : groups)
    for (const std::string& t : g.targets)
      if (t == "Linear") return &g;
  return nullptr;
}

std::string QuantizationConfig::Describe() const {
  switch (method) {
    case Method::kNone:
      return "none";
    case Method::kFp8Block:
      return absl::StrCat("fp8 e4m3, ", block_rows, " x ", block_cols, " blocks");
    case Method::kCompressedTensors: {
      std::vector<std::string> parts;
      for (const Group& g : groups)
        parts.push_back(absl::StrCat(g.name, ": ", g.codes == DType::kE2M1 ? "mxfp4" : "int4",
                                     g.group_size ? absl::StrCat(" group ", g.group_size) : " per channel",
                                     g.symmetric ? "" : " asymmetric"));
      return absl::StrCat("compressed-tensors (", absl::StrJoin(parts, "; "), ")");
    }
  }
  return "?";
}

void ReadQuantizationConfig(ConfigReader& r, QuantizationConfig* q) {
  auto c = r.Object("quantization_config");
  if (!c) return;
  const std::string method = c->String("quant_method", "");
  if (method == "fp8") {
    ReadFp8(*c, q);
  } else if (method == "compressed-tensors") {
    ReadCompressedTensors(*c, q);
  } else {
    c->Unsupported("quant_method", "fp8 with weight_block_size, or compressed-tensors");
  }
}

}  // namespace ls

// QuantizationConfig: how a checkpoint's weights are stored when config.json carries a
// `quantization_config`, read strictly: FP8 e4m3 with block scales (`quant_method` "fp8", DeepSeek-V3
// and the -FP8 releases) and compressed-tensors' `pack-quantized` INT4 and `mxfp4-pack-quantized`
// (Kimi-K2-Thinking, Kimi K3). Any other method, format or setting that changes the math
// (activation or KV-cache quantization, sparsity, transforms, activation ordering) is a load error
// naming key and value. Also which modules each scheme covers (the config groups' targets and the
// `ignore` list, with compressed-tensors' "re:" patterns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "models/loader/config_reader.h"

namespace ls {

struct QuantizationConfig {
  enum class Method : uint8_t { kNone, kFp8Block, kCompressedTensors };
  Method method = Method::kNone;

  // kFp8Block: F8_E4M3 `weight` with F32/BF16 `weight_scale_inv`, one scale per block.
  int32_t block_rows = 0, block_cols = 0;          // weight_block_size
  std::vector<std::string> modules_not_quantized;  // modules_to_not_convert / ignored_layers

  // kCompressedTensors: `weight_packed` + `weight_scale` (+ `weight_shape`, `weight_zero_point`).
  struct Group {
    std::string name;                  // the config_groups key
    std::vector<std::string> targets;  // module names, "re:" patterns or the class name "Linear"
    DType codes = DType::kU4;          // kU4 (pack-quantized int4) or kE2M1 (mxfp4-pack-quantized)
    int32_t group_size = 0;            // scales per row: ceil(cols / group_size); 0: one per row (channel)
    bool symmetric = true;             // false: packed zero points (`weight_zero_point`)
  };
  std::vector<Group> groups;
  std::vector<std::string> ignore;  // modules stored unquantized

  bool quantized() const { return method != Method::kNone; }
  // Whether `module` ("model.layers.0.self_attn.q_proj") is listed as stored unquantized.
  bool Ignored(const std::string& module) const;
  // The config group whose targets name `module` (by name or pattern first, then by class
  // "Linear"); null when none does.
  const Group* GroupFor(const std::string& module) const;
  // A one-line description for logs ("fp8 e4m3, 128 x 128 blocks").
  std::string Describe() const;
};

// Reads `quantization_config` from the config (absent or null: not quantized).
void ReadQuantizationConfig(ConfigReader& r, QuantizationConfig* q);

// Whether a compressed-tensors target or ignore entry names `module`: "re:" + a regular
// expression matched at the start of the name (as Python's re.match), else the exact name.
bool ModuleMatches(const std::string& module, const std::string& target);

}  // namespace ls

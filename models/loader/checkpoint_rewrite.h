// RewriteCheckpoint: writes a copy of a model directory with some tensors replaced (calibration's
// new router biases), keeping the checkpoint's layout: every other file copied, a sharded
// checkpoint stays sharded, shards holding no replaced tensor are hard-linked (copied where links
// fail), and only the shards holding one are rewritten, byte for byte otherwise.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ls {

struct RewriteStats {
  int32_t shards_rewritten = 0;
  int32_t shards_linked = 0;  // hard-linked or, where linking failed, copied
};

// `replaced` maps tensor names to float32 values of 1-D tensors; each is stored in the dtype the
// checkpoint already has for it (rounded to nearest even), or as F32 when the checkpoint has no
// such tensor (it then joins the shard holding the first tensor of the same module prefix, else the
// first shard, and the index names it). `out_dir` is created and must not be `in_dir`.
absl::Status RewriteCheckpoint(const std::string& in_dir, const std::string& out_dir,
                               const std::map<std::string, std::vector<float>>& replaced, RewriteStats* stats = nullptr);

}  // namespace ls

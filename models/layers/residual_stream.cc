// NewResidualStream: the block shape a config asks for.
#include "models/layers/residual_stream.h"

#include "models/layers/attn_res.h"

namespace ls {

std::unique_ptr<ResidualStream> NewResidualStream(WeightBinder& b, const ModelConfig& config, Backend* backend) {
  if (config.attn_res_block_size > 0) return std::make_unique<AttnResStream>(b, config, backend);
  return std::make_unique<ResidualStream>();
}

}  // namespace ls

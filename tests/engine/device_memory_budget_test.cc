// EngineConfig::gpu_memory_utilization on a backend reporting device memory (the CPU backend
// counting its own allocations against a fixed total): the engine fills that fraction of the
// device, the KV cache taking what the weights and the warm-up step leave; and clear errors where
// the backend has no device memory, the fraction is out of range or leaves nothing.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/kv_cache.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// The CPU backend with a device memory of `total` bytes, of which its live allocations are in use.
class CountingBackend final : public CpuBackend {
 public:
  explicit CountingBackend(size_t total) : CpuBackend(2), total_(total) {}
  bool DeviceMemory(size_t* free_bytes, size_t* total_bytes) const override {
    std::lock_guard<std::mutex> lock(mu_);
    *total_bytes = total_;
    *free_bytes = live_ < total_ ? total_ - live_ : 0;
    return true;
  }
  void* Allocate(size_t bytes) override {
    void* p = CpuBackend::Allocate(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = bytes;
    live_ += bytes;
    return p;
  }
  void Free(void* p) override {
    if (p) {
      std::lock_guard<std::mutex> lock(mu_);
      live_ -= sizes_.at(p);
      sizes_.erase(p);
    }
    CpuBackend::Free(p);
  }
  size_t live() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_;
  }

 private:
  const size_t total_;
  mutable std::mutex mu_;
  std::map<void*, size_t> sizes_;
  size_t live_ = 0;
};

constexpr size_t kTotal = size_t{64} << 20;

EngineConfig Config(double utilization) {
  EngineConfig cfg;
  cfg.kv_cache_dtype = DType::kF32;
  cfg.gpu_memory_utilization = utilization;
  return cfg;
}

TEST(DeviceMemoryBudget, TheEngineFillsTheFractionOfTheDevice) {
  CountingBackend backend(kTotal);
  auto model = LoadModel(testing::FixtureDir("latent_sigmoid_situ_bf16"), &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  const size_t weights = backend.live();
  ASSERT_GT(weights, 0u);
  const size_t block_bytes = KvCache::BytesPerBlock((*model)->kv_layout(), 16, DType::kF32);
  int64_t last_tokens = 0;
  for (double u : {0.5, 0.8}) {
    auto engine = Engine::Create(model->get(), nullptr, Config(u));
    ASSERT_TRUE(engine.ok()) << engine.status();
    const double want = u * static_cast<double>(kTotal);
    // The cache has what was left: in use now is the fraction, less under a block (and the scheduler's rounding).
    EXPECT_LE(static_cast<double>(backend.live()), want) << u;
    EXPECT_GE(static_cast<double>(backend.live()), want - 2.0 * static_cast<double>(block_bytes)) << u;
    EXPECT_GT((*engine)->kv_cache_tokens(), last_tokens) << "a larger fraction, a larger cache";
    last_tokens = (*engine)->kv_cache_tokens();
    // And it serves.
    OutputQueue q;
    Request r;
    r.id = "a";
    r.prompt_ids = {1, 2, 3};
    r.params.max_tokens = 4;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    ASSERT_TRUE((*engine)->Submit(r, q.Callback()).ok());
    EXPECT_EQ(q.WaitFinal().completion_tokens, 4);
  }
  // The caches given back; the weights and the model's step buffers (grown by the warm-up) stay.
  EXPECT_LT(backend.live(), kTotal / 8);
}

TEST(DeviceMemoryBudget, ErrorsNameTheSetting) {
  CountingBackend backend(kTotal);
  auto model = LoadModel(testing::FixtureDir("latent_sigmoid_situ_bf16"), &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  auto nothing_left = Engine::Create(model->get(), nullptr, Config(0.001));
  ASSERT_FALSE(nothing_left.ok());
  EXPECT_EQ(nothing_left.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(nothing_left.status().message().find("leaves no room for the KV cache"), std::string::npos)
      << nothing_left.status();
  auto too_much = Engine::Create(model->get(), nullptr, Config(1.5));
  ASSERT_FALSE(too_much.ok());
  EXPECT_NE(too_much.status().message().find("gpu_memory_utilization must be in (0, 1]"), std::string::npos)
      << too_much.status();
  EngineConfig both = Config(0.5);
  both.num_kv_blocks = 10;
  EXPECT_FALSE(Engine::Create(model->get(), nullptr, both).ok());

  CpuBackend host(2);
  auto on_host = LoadModel(testing::FixtureDir("latent_sigmoid_situ_bf16"), &host);
  ASSERT_TRUE(on_host.ok()) << on_host.status();
  auto no_device = Engine::Create(on_host->get(), nullptr, Config(0.9));
  ASSERT_FALSE(no_device.ok());
  EXPECT_NE(no_device.status().message().find("the cpu backend has none"), std::string::npos) << no_device.status();
}

}  // namespace
}  // namespace ls

// WeightBinder: tensor lookup with the first error kept, and the check for unread tensors.
#include "models/loader/weight_binder.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ls {

Tensor WeightBinder::Get(const std::string& short_name, int64_t rows, int64_t cols) {
  const std::string name = prefix_ + short_name;
  taken_.insert(name);
  if (!status_.ok()) return {};
  auto b = BindWeight(store_, quantization_, name, rows, cols);
  if (!b.ok()) {
    status_ = b.status();
    return {};
  }
  taken_.insert(b->names.begin(), b->names.end());
  return b->tensor;
}

Tensor WeightBinder::GetShaped(const std::string& short_name, const std::vector<int64_t>& shape) {
  const std::string name = prefix_ + short_name;
  taken_.insert(name);
  if (!status_.ok()) return {};
  const TensorEntry* e = store_.Entry(name);
  if (!e) {
    status_ = absl::NotFoundError(absl::StrCat(store_.dir(), ": missing tensor '", name, "'"));
    return {};
  }
  if (e->shape != shape) {
    status_ = absl::InvalidArgumentError(absl::StrCat(store_.dir(), ": tensor '", name, "' has shape [",
                                                      absl::StrJoin(e->shape, ", "), "] but config.json implies [",
                                                      absl::StrJoin(shape, ", "), "]"));
    return {};
  }
  int64_t rest = 1;
  for (size_t i = 1; i < shape.size(); ++i) rest *= shape[i];
  return Tensor{e->data, e->dtype, shape.empty() ? 1 : shape[0], rest};
}

Tensor WeightBinder::GetVectorAtLeast(const std::string& short_name, int64_t n) {
  const std::string name = prefix_ + short_name;
  taken_.insert(name);
  if (!status_.ok()) return {};
  const TensorEntry* e = store_.Entry(name);
  if (!e) {
    status_ = absl::NotFoundError(absl::StrCat(store_.dir(), ": missing tensor '", name, "'"));
    return {};
  }
  int64_t count = 1, long_dims = 0;
  for (int64_t s : e->shape) {
    count *= s;
    long_dims += s != 1;
  }
  if (long_dims > 1 || count < n) {
    status_ = absl::InvalidArgumentError(absl::StrCat(store_.dir(), ": tensor '", name, "' has shape [",
                                                      absl::StrJoin(e->shape, ", "), "]; expected a vector of at least ",
                                                      n, " values"));
    return {};
  }
  return Tensor{e->data, e->dtype, 1, n};
}

Tensor WeightBinder::Optional(const std::string& name, int64_t rows, int64_t cols) {
  return Has(name) ? Get(name, rows, cols) : Tensor{};
}

absl::Status WeightBinder::CheckAllTaken(const std::function<bool(const std::string&)>& unused_ok) const {
  std::vector<std::string> unused;
  for (const auto& [name, entry] : store_.Entries())
    if (!taken_.count(name) && !(unused_ok && unused_ok(name))) unused.push_back(name);
  if (unused.empty()) return absl::OkStatus();
  const size_t shown = std::min<size_t>(unused.size(), 5);
  return absl::InvalidArgumentError(absl::StrCat(
      unused.size(), " checkpoint tensor(s) are not used by any layer of this architecture, so the model would ",
      "run without them: '", absl::StrJoin(unused.begin(), unused.begin() + shown, "', '"), "'",
      unused.size() > shown ? absl::StrCat(" and ", unused.size() - shown, " more") : ""));
}

}  // namespace ls

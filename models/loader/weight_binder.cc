// WeightBinder: tensor lookup with the first error kept, and the check for unread tensors.
#include "models/loader/weight_binder.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ls {
int64_t CheckpointBytes(const Tensor& t) {
  return static_cast<int64_t>(t.bytes() + (t.quantized() ? t.scale_bytes() + t.zero_bytes() : 0));
}

namespace {

// Columns [c0, c0 + n) of every row of a row-major grid of `rows` rows and `cols` elements of `dtype`.
std::vector<uint8_t> ColumnBlock(const void* data, DType dtype, int64_t rows, int64_t cols, int64_t c0, int64_t n) {
  const size_t row = DTypeBytes(dtype, cols), skip = DTypeBytes(dtype, c0), part = DTypeBytes(dtype, n);
  std::vector<uint8_t> out(static_cast<size_t>(rows) * part);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * part, static_cast<const uint8_t*>(data) + r * row + skip, part);
  return out;
}

}  // namespace

Tensor WeightBinder::Bind(const std::string& name, int64_t rows, int64_t cols, const CodeWindow& window) {
  taken_.insert(name);
  if (!status_.ok()) return {};
  auto b = BindWeight(store_, quantization_, name, rows, cols, window);
  if (!b.ok()) {
    status_ = b.status();
    return {};
  }
  taken_.insert(b->names.begin(), b->names.end());
  return b->tensor;
}

Tensor WeightBinder::Get(const std::string& short_name, int64_t rows, int64_t cols) {
  const Tensor t = Bind(prefix_ + short_name, rows, cols);
  bytes_bound_ += CheckpointBytes(t);
  return t;
}

Tensor WeightBinder::GetPart(const std::string& short_name, int64_t rows, int64_t cols, Split split, int64_t parts,
                             int64_t index) {
  if (parts == 1) return Get(short_name, rows, cols);
  const std::string name = prefix_ + short_name;
  const bool by_rows = split == Split::kRows && rows > 0;
  const int64_t length = by_rows ? rows : cols, n = length / parts, first = index * n;
  CodeWindow window;  // only this part's codes are read
  (by_rows ? window.row0 : window.col0) = first;
  (by_rows ? window.rows : window.cols) = n;
  const Tensor t = Bind(name, rows, cols, window);
  if (t.empty()) return {};
  const int32_t block = !t.quantized() ? 1 : by_rows ? t.quant.block_rows : t.quant.block_cols;
  const bool packed_pairs = DTypeBits(t.dtype) < 8 && !by_rows;  // two codes a byte: cut between bytes
  if (length % parts != 0 || n % block != 0 || (packed_pairs && n % 2 != 0)) {
    status_ = absl::InvalidArgumentError(absl::StrCat(
        store_.dir(), ": tensor '", name, "' cannot be split into ", parts, " tensor-parallel parts along its ",
        by_rows ? "rows" : "columns", " (", length, length % parts != 0 ? " is not a multiple of the parts" : "",
        length % parts == 0 && n % block != 0 ? absl::StrCat("; each part would cut its scale blocks of ", block) : "",
        length % parts == 0 && n % block == 0 ? "; each part would cut a byte of packed codes" : "", ")"));
    return {};
  }
  Tensor part;
  if (by_rows) {
    part = t.RowSlice(first, n);
  } else if (t.rows == 1 && !t.quantized()) {  // a vector: its part is contiguous
    part = Tensor{static_cast<const uint8_t*>(t.data) + DTypeBytes(t.dtype, first), t.dtype, 1, n};
  } else if (store_.shapes_only()) {  // zeros either way: no copy
    part = t;
    part.cols = n;
  } else {
    part = t;
    part.cols = n;
    part.data = store_.Keep(ColumnBlock(t.data, t.dtype, t.rows, t.cols, first, n));
    if (t.quantized()) {
      const int64_t grid_rows = t.scale_rows(), grid_cols = t.scale_cols(), b0 = first / block, bn = n / block;
      part.quant.scale = store_.Keep(ColumnBlock(t.quant.scale, t.quant.scale_dtype, grid_rows, grid_cols, b0, bn));
      if (t.quant.zero)
        part.quant.zero = store_.Keep(ColumnBlock(t.quant.zero, DType::kU8, grid_rows, grid_cols, b0, bn));
    }
  }
  bytes_bound_ += CheckpointBytes(part);
  return part;
}

Tensor WeightBinder::OptionalPart(const std::string& name, int64_t rows, int64_t cols, Split split, int64_t parts,
                                  int64_t index) {
  return Has(name) ? GetPart(name, rows, cols, split, parts, index) : Tensor{};
}

Tensor WeightBinder::GetShaped(const std::string& short_name, const std::vector<int64_t>& shape, int64_t parts,
                               int64_t index) {
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
  Tensor t{e->data, e->dtype, shape.empty() ? 1 : shape[0], rest};
  if (parts > 1) {
    if (t.rows % parts != 0) {
      status_ = absl::InvalidArgumentError(absl::StrCat(store_.dir(), ": tensor '", name, "' cannot be split into ",
                                                        parts, " tensor-parallel parts along its first dimension (",
                                                        t.rows, " is not a multiple of the parts)"));
      return {};
    }
    t = t.RowSlice(index * (t.rows / parts), t.rows / parts);
  }
  bytes_bound_ += CheckpointBytes(t);
  return t;
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
  bytes_bound_ += static_cast<int64_t>(DTypeBytes(e->dtype, n));
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

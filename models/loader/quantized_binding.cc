// BindWeight: plain, FP8 block-scaled and compressed-tensors packed weights, checked.
#include "models/loader/quantized_binding.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ls {
namespace {

constexpr char kWeight[] = ".weight";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The module a weight belongs to ("model.layers.0.mlp.down_proj" for its ".weight"); empty when the
// name is not a module's weight.
std::string ModuleOf(const std::string& name) {
  return EndsWith(name, kWeight) ? name.substr(0, name.size() - (sizeof(kWeight) - 1)) : std::string();
}

class Checker {
 public:
  Checker(const WeightStore& store, std::string weight) : store_(store), weight_(std::move(weight)) {}

  absl::Status Error(const std::string& msg) const {
    return absl::InvalidArgumentError(absl::StrCat(store_.dir(), ": weight '", weight_, "': ", msg));
  }
  // The entry `name`, of one of `dtypes` and exactly `shape`.
  absl::StatusOr<const TensorEntry*> Part(const std::string& name, std::initializer_list<DType> dtypes,
                                          const std::vector<int64_t>& shape) const {
    const TensorEntry* e = store_.Entry(name);
    if (!e) return Error(absl::StrCat("missing tensor '", name, "'"));
    bool ok = false;
    std::vector<std::string> names;
    for (DType t : dtypes) {
      ok |= e->dtype == t;
      names.emplace_back(DTypeName(t));
    }
    if (!ok)
      return Error(absl::StrCat("tensor '", name, "' in ", store_.PathOf(name), " has dtype ",
                                std::string(DTypeName(e->dtype)), ", expected ", absl::StrJoin(names, " or ")));
    if (e->shape != shape)
      return Error(absl::StrCat("tensor '", name, "' in ", store_.PathOf(name), " has shape [",
                                absl::StrJoin(e->shape, ", "), "], expected [", absl::StrJoin(shape, ", "), "]"));
    return e;
  }
  // Every scale, read as `as`, finite (so E8M0 not the NaN code 255).
  absl::Status CheckScales(const std::string& name, const TensorEntry& e, DType as) const {
    if (store_.shapes_only()) return absl::OkStatus();  // no values to check
    const int64_t n = static_cast<int64_t>(e.bytes / DTypeSize(e.dtype));
    for (int64_t i = 0; i < n; ++i) {
      const float s = LoadAsF32(e.data, as, i);
      if (!std::isfinite(s))
        return Error(absl::StrCat("scale ", i, " of '", name, "' is not a finite number",
                                  as == DType::kE8M0 ? " (E8M0 255 is NaN)" : ""));
    }
    return absl::OkStatus();
  }

 private:
  const WeightStore& store_;
  std::string weight_;
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::StatusOr<BoundWeight> BindFp8(const WeightStore& store, const QuantizationConfig& q, const std::string& name,
                                    int64_t rows, int64_t cols, const CodeWindow& window) {
  const Checker c(store, name);
  const std::string scale_name = name + "_scale_inv";
  if (q.Ignored(ModuleOf(name)))
    return c.Error("is listed in quantization_config.modules_to_not_convert but stored as FP8 with '" + scale_name +
                   "'");
  auto w = c.Part(name, {DType::kF8E4M3}, {rows, cols});
  if (!w.ok()) return w.status();
  const int64_t br = q.block_rows, bc = q.block_cols;
  auto s = c.Part(scale_name, {DType::kF32, DType::kBF16, DType::kF16}, {CeilDiv(rows, br), CeilDiv(cols, bc)});
  if (!s.ok()) return s.status();
  const auto* codes = static_cast<const uint8_t*>((*w)->data);
  const int64_t r1 = store.shapes_only() ? window.row0 : window.rows < 0 ? rows : window.row0 + window.rows;
  const int64_t c1 = window.cols < 0 ? cols : window.col0 + window.cols;
  for (int64_t r = window.row0; r < r1; ++r)
    for (int64_t j = window.col0; j < c1; ++j)
      if ((codes[r * cols + j] & 0x7f) == 0x7f)
        return c.Error(absl::StrCat("element [", r, ", ", j, "] is an FP8 NaN code"));
  if (auto st = c.CheckScales(scale_name, **s, (*s)->dtype); !st.ok()) return st;
  BoundWeight b;
  b.tensor = Tensor{(*w)->data,
                    DType::kF8E4M3,
                    rows,
                    cols,
                    Layout::kRowMajor,
                    QuantScales{(*s)->data, nullptr, (*s)->dtype, static_cast<int32_t>(br), static_cast<int32_t>(bc)}};
  b.names = {name, scale_name};
  return b;
}

absl::StatusOr<BoundWeight> BindPacked(const WeightStore& store, const QuantizationConfig& q, const std::string& name,
                                       int64_t rows, int64_t cols) {
  const Checker c(store, name);
  const std::string module = ModuleOf(name);
  const std::string packed = module + ".weight_packed", scale = module + ".weight_scale",
                    shape = module + ".weight_shape", zero = module + ".weight_zero_point";
  if (store.Has(name)) return c.Error(absl::StrCat("the checkpoint holds both '", name, "' and '", packed, "'"));
  if (q.Ignored(module))
    return c.Error(
        absl::StrCat("module '", module, "' is in quantization_config.ignore but stored packed ('", packed, "')"));
  const QuantizationConfig::Group* g = q.GroupFor(module);
  if (!g) return c.Error(absl::StrCat("no quantization_config.config_groups entry targets module '", module, "'"));
  BoundWeight b;
  b.names = {packed, scale};
  const int64_t group = g->group_size > 0 ? g->group_size : cols, groups = CeilDiv(cols, group);
  Tensor t{nullptr, g->codes, rows, cols};
  t.quant.block_rows = 1;
  t.quant.block_cols = static_cast<int32_t>(group);
  if (g->codes == DType::kU4) {
    if (cols % 8 != 0)
      return c.Error(absl::StrCat(cols, " columns: pack-quantized rows are read as whole int32 words of 8 codes"));
    auto p = c.Part(packed, {DType::kI32}, {rows, cols / 8});
    if (!p.ok()) return p.status();
    t.data = (*p)->data;
  } else {
    if (cols % 2 != 0) return c.Error(absl::StrCat(cols, " columns: mxfp4 rows hold two codes a byte"));
    auto p = c.Part(packed, {DType::kU8}, {rows, cols / 2});
    if (!p.ok()) return p.status();
    t.data = (*p)->data;
  }
  // The stored shape (required in pack-quantized, optional in mxfp4).
  if (g->codes == DType::kU4 || store.Has(shape)) {
    auto st = c.Part(shape, {DType::kI64, DType::kI32}, {2});
    if (!st.ok()) return st.status();
    const float r = LoadAsF32((*st)->data, (*st)->dtype, 0), k = LoadAsF32((*st)->data, (*st)->dtype, 1);
    if (!store.shapes_only() && (r != static_cast<float>(rows) || k != static_cast<float>(cols)))
      return c.Error(
          absl::StrCat("'", shape, "' says [", r, ", ", k, "], config.json implies [", rows, ", ", cols, "]"));
    b.names.push_back(shape);
  }
  auto s = g->codes == DType::kE2M1 ? c.Part(scale, {DType::kU8, DType::kE8M0}, {rows, groups})
                                    : c.Part(scale, {DType::kF32, DType::kBF16, DType::kF16}, {rows, groups});
  if (!s.ok()) return s.status();
  t.quant.scale = (*s)->data;
  t.quant.scale_dtype = g->codes == DType::kE2M1 ? DType::kE8M0 : (*s)->dtype;
  if (auto st = c.CheckScales(scale, **s, t.quant.scale_dtype); !st.ok()) return st;
  if (!g->symmetric) {
    // Zero points packed eight to an int32 word down the rows (offset by 8, as the codes are).
    auto z = c.Part(zero, {DType::kI32}, {CeilDiv(rows, 8), groups});
    if (!z.ok()) return z.status();
    std::vector<uint8_t> zeros(static_cast<size_t>(rows * groups));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < groups; ++j)
        zeros[r * groups + j] = LoadNibble((*z)->data, ((r / 8) * groups + j) * 8 + r % 8);
    t.quant.zero = store.Keep(std::move(zeros));
    b.names.push_back(zero);
  }
  b.tensor = t;
  return b;
}

}  // namespace

bool HasWeight(const WeightStore& store, const QuantizationConfig& q, const std::string& name) {
  if (store.Has(name)) return true;
  const std::string module = ModuleOf(name);
  return q.method == QuantizationConfig::Method::kCompressedTensors && !module.empty() &&
         store.Has(module + ".weight_packed");
}

absl::StatusOr<BoundWeight> BindWeight(const WeightStore& store, const QuantizationConfig& q, const std::string& name,
                                       int64_t rows, int64_t cols, const CodeWindow& window) {
  const std::string module = ModuleOf(name);
  const bool matrix = rows > 0 && !module.empty();
  if (matrix && q.method == QuantizationConfig::Method::kCompressedTensors && store.Has(module + ".weight_packed"))
    return BindPacked(store, q, name, rows, cols);
  if (matrix && q.method == QuantizationConfig::Method::kFp8Block && store.Has(name + "_scale_inv"))
    return BindFp8(store, q, name, rows, cols, window);
  auto t = store.Get(name, rows, cols);
  if (!t.ok()) return t.status();
  if (!IsFloatDType(t->dtype)) {
    const std::string need = q.method == QuantizationConfig::Method::kFp8Block && t->dtype == DType::kF8E4M3
                                 ? absl::StrCat("its block scales '", name, "_scale_inv' are missing")
                                 : "config.json's quantization_config does not say how to read it";
    return Checker(store, name).Error(absl::StrCat("stored as ", std::string(DTypeName(t->dtype)), ", but ", need));
  }
  if (matrix && q.method == QuantizationConfig::Method::kCompressedTensors && !q.Ignored(module)) {
    // A module a config group names explicitly (not just by class) must be stored packed.
    for (const QuantizationConfig::Group& g : q.groups)
      for (const std::string& target : g.targets)
        if (target != "Linear" && ModuleMatches(module, target))
          return Checker(store, name)
              .Error(absl::StrCat("config group '", g.name, "' targets module '", module,
                                  "' but the checkpoint stores it unquantized"));
  }
  return BoundWeight{*t, {name}};
}

}  // namespace ls

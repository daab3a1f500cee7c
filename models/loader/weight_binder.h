// WeightBinder: hands a model's layers their checkpoint tensors by name, shape-checked, keeping
// the first error so binding code reads as a list of tensors; remembers every name taken, so
// that the loader can refuse a checkpoint holding tensors no layer reads (docs/formats.md, "Strict loading"). A
// quantized checkpoint's weight comes back as one Tensor carrying its format and scales, made from
// the parts the checkpoint stores (models/loader/quantized_binding.h), so layers bind it by the
// plain name `X.weight`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "kernels/tensor.h"
#include "models/loader/quantization_config.h"
#include "models/loader/quantized_binding.h"
#include "models/loader/weight_store.h"

namespace ls {

// The checkpoint bytes a bound tensor views: its values or codes, scales and zero points.
int64_t CheckpointBytes(const Tensor& t);

// Along which dimension a tensor-parallel rank's part of a weight is cut.
enum class Split : uint8_t { kRows, kCols };

class WeightBinder {
 public:
  // `prefix` goes before every name asked for (a model nested in a wrapper, e.g. "language_model.").
  explicit WeightBinder(const WeightStore& store, const QuantizationConfig& quantization = {}, std::string prefix = {})
      : store_(store), quantization_(quantization), prefix_(std::move(prefix)) {}

  // The tensor `name` of shape [rows, cols] ([cols] when rows == 0); an empty tensor after an error.
  Tensor Get(const std::string& name, int64_t rows, int64_t cols);
  // As Get, or an empty tensor (and no error) when the checkpoint has no such tensor.
  Tensor Optional(const std::string& name, int64_t rows, int64_t cols);
  // Part `index` of `parts` equal parts of the tensor `name` [rows, cols] (a vector [cols] when
  // rows == 0, cut along its length whatever `split` says), cut along its rows or its columns:
  // what one rank of a tensor-parallel group holds. A row part is a view of the mapped checkpoint;
  // a column part is a copy of just its columns. A quantized weight is cut on its scale blocks'
  // boundaries. A dimension `parts` does not divide, or a cut through a scale block, is an error
  // naming the tensor and the number of parts. parts == 1: Get.
  Tensor GetPart(const std::string& name, int64_t rows, int64_t cols, Split split, int64_t parts, int64_t index);
  Tensor OptionalPart(const std::string& name, int64_t rows, int64_t cols, Split split, int64_t parts, int64_t index);
  bool Has(const std::string& name) const { return HasWeight(store_, quantization_, prefix_ + name); }
  // The checkpoint's name for `name` (with the prefix).
  std::string FullName(const std::string& name) const { return prefix_ + name; }
  // A tensor of exactly `shape` (any rank), viewed as [shape[0], product of the rest]; with
  // parts > 1, part `index` of its first dimension (a tensor-parallel rank's channels).
  Tensor GetShaped(const std::string& name, const std::vector<int64_t>& shape, int64_t parts = 1, int64_t index = 0);
  // A vector of at least n values (any shape whose dims other than one are 1, e.g. [1, 1, n, 1]),
  // viewed as [1, n]: the first n are used.
  Tensor GetVectorAtLeast(const std::string& name, int64_t n);

  const absl::Status& status() const { return status_; }
  // Bytes of checkpoint data in the tensors handed out so far (values or codes, scales, zero
  // points): a tensor-parallel part counts only its own.
  int64_t bytes_bound() const { return bytes_bound_; }
  // An error naming the checkpoint tensors not taken (the first few and their count), except
  // those `unused_ok` excuses.
  absl::Status CheckAllTaken(const std::function<bool(const std::string&)>& unused_ok) const;

 private:
  const WeightStore& store_;
  QuantizationConfig quantization_;
  std::string prefix_;
  absl::Status status_;
  // The tensor `name` (prefixed already), its names taken; empty after an error.
  Tensor Bind(const std::string& name, int64_t rows, int64_t cols, const CodeWindow& window = {});

  std::unordered_set<std::string> taken_;
  int64_t bytes_bound_ = 0;
};

}  // namespace ls

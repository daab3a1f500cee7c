// SafetensorsWriter implementation.
#include "models/loader/safetensors_writer.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls {

void SafetensorsWriter::Add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v,
                            DType dtype) {
  std::string bytes(v.size() * DTypeSize(dtype), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? F32ToBf16(v[i]) : F32ToF16(v[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  AddRaw(name, std::move(shape), dtype, std::move(bytes));
}

void SafetensorsWriter::AddRaw(const std::string& name, std::vector<int64_t> shape, DType dtype, std::string bytes) {
  items_[name] = Item{std::move(shape), dtype, std::move(bytes)};
}

absl::Status SafetensorsWriter::Write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const auto& [name, item] : items_) {
    header[name] = {{"dtype", std::string(DTypeName(item.dtype))},
                    {"shape", item.shape},
                    {"data_offsets", {offset, offset + item.bytes.size()}}};
    offset += item.bytes.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot open for writing"));
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((static_cast<uint64_t>(h.size()) >> (8 * i)) & 0xff);
  out.write(len, 8);
  out << h;
  for (const auto& [name, item] : items_) out.write(item.bytes.data(), static_cast<std::streamsize>(item.bytes.size()));
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace ls

// .npy version 1.0 reader/writer for '<f4', C order.
#include "tools/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"

namespace ls {

absl::Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  std::string header = absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (", dims, "), }");
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot open for writing"));
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(len & 0xff));
  out.put(static_cast<char>(len >> 8));
  out << header;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  out.write(reinterpret_cast<const char*>(data), n * static_cast<int64_t>(sizeof(float)));
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<NpyArray> ReadNpyF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an .npy file"));
  const size_t len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
  if (10 + len > bytes.size()) return absl::InvalidArgumentError(absl::StrCat(path, ": truncated header"));
  const std::string header = bytes.substr(10, len);
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(path, ": only little-endian float32 C-order arrays are read"));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'shape': \\(([^)]*)\\)")))
    return absl::InvalidArgumentError(absl::StrCat(path, ": no shape in header"));
  NpyArray a;
  int64_t n = 1;
  for (absl::string_view part : absl::StrSplit(m[1].str(), ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v)) return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape"));
    a.shape.push_back(v);
    n *= v;
  }
  if (bytes.size() != 10 + len + n * sizeof(float))
    return absl::InvalidArgumentError(absl::StrCat(path, ": data size does not match shape"));
  a.data.resize(n);
  std::memcpy(a.data.data(), bytes.data() + 10 + len, n * sizeof(float));
  return a;
}

}  // namespace ls

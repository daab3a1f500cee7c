// SafetensorsFile: mmap + header validation.
#include "models/loader/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace ls {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // as the reference implementation limits it

absl::Status Bad(const std::string& path, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", msg));
}

// The header length the file's first 8 bytes (`prefix`) give, checked against the file's size.
absl::StatusOr<uint64_t> HeaderLength(const unsigned char* prefix, size_t file_size, const std::string& path) {
  if (file_size < 8) return Bad(path, absl::StrCat("file too short (", file_size, " bytes) for a safetensors header"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | prefix[i];
  if (header_len > kMaxHeaderBytes) return Bad(path, absl::StrCat("header length ", header_len, " is implausibly large"));
  if (header_len > file_size - 8)
    return Bad(path, absl::StrCat("truncated: header length ", header_len, " exceeds the file size ", file_size));
  return header_len;
}

}  // namespace

absl::StatusOr<std::map<std::string, TensorEntry>> SafetensorsFile::ParseHeader(const unsigned char* file,
                                                                                size_t file_size,
                                                                                const std::string& path) {
  auto length = HeaderLength(file, file_size, path);
  if (!length.ok()) return length.status();
  const uint64_t header_len = *length;
  const char* h = reinterpret_cast<const char*>(file + 8);
  nlohmann::json j = nlohmann::json::parse(h, h + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(path, "header is not valid JSON");
  if (!j.is_object()) return Bad(path, "header is not a JSON object");

  const unsigned char* data = file + 8 + header_len;
  const size_t data_size = file_size - 8 - header_len;
  std::map<std::string, TensorEntry> entries;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const auto& v = it.value();
    const std::string where = absl::StrCat("tensor '", name, "': ");
    if (!v.is_object()) return Bad(path, where + "entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return Bad(path, where + "missing or non-string 'dtype'");
    if (sh == v.end() || !sh->is_array()) return Bad(path, where + "missing or non-array 'shape'");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return Bad(path, where + "'data_offsets' must be two non-negative integers");
    auto dtype = ParseDType(dt->get<std::string>());
    if (!dtype)
      return Bad(path, where + "unsupported dtype " + dt->get<std::string>() +
                           " (supported: F32, BF16, F16, F8_E4M3, F8_E8M0, U8, I8, I32, I64)");
    TensorEntry e{*dtype, {}, nullptr, 0};
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return Bad(path, where + "shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > (uint64_t{1} << 62) / dim) return Bad(path, where + "shape is too large");
      numel *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return Bad(path, absl::StrCat(where, "data_offsets [", begin, ", ", end, "] out of range (data section has ",
                                    data_size, " bytes)"));
    if (end - begin != numel * DTypeSize(*dtype))
      return Bad(path, absl::StrCat(where, "byte range of ", end - begin, " does not match shape [",
                                    absl::StrJoin(e.shape, ", "), "] of ", std::string(DTypeName(*dtype)), " (",
                                    numel * DTypeSize(*dtype), " bytes)"));
    e.data = data + begin;
    e.bytes = end - begin;
    if (e.bytes > 0) ranges.emplace_back(begin, end);
    entries.emplace(name, std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return Bad(path, "tensor byte ranges overlap");
  return entries;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path, bool header_only) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": cannot stat: ", std::strerror(errno)));
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (header_only) {
    auto size = HeaderOnlyMapping(fd, path, f->size_, &f->map_);
    ::close(fd);
    if (!size.ok()) return size.status();
    f->size_ = *size;
  } else if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(errno)));
    }
    f->map_ = m;
    ::close(fd);
  } else {
    ::close(fd);
  }
  auto entries = ParseHeader(static_cast<const unsigned char*>(f->map_), f->size_, path);
  if (!entries.ok()) return entries.status();
  f->entries_ = std::move(*entries);
  return f;
}

absl::StatusOr<size_t> SafetensorsFile::HeaderOnlyMapping(int fd, const std::string& path, size_t file_size,
                                                          void** map) {
  unsigned char prefix[8] = {};
  if (file_size >= 8 && ::pread(fd, prefix, 8, 0) != 8) return Bad(path, "cannot read the header");
  auto length = HeaderLength(prefix, file_size, path);
  if (!length.ok()) return length.status();
  const uint64_t header_len = *length;
  std::string header(header_len, '\0');
  if (::pread(fd, header.data(), header_len, 8) != static_cast<ssize_t>(header_len))
    return Bad(path, "cannot read the header");
  // The data the header describes ends at its largest offset; ParseHeader checks the rest.
  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  uint64_t end = 0;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto off = it.value().is_object() ? it.value().find("data_offsets") : it.value().end();
      if (off != it.value().end() && off->is_array() && off->size() == 2 && (*off)[1].is_number_unsigned())
        end = std::max(end, (*off)[1].get<uint64_t>());
    }
  // Anonymous memory that reserves nothing: untouched pages read as zeros without taking memory.
  const size_t size = 8 + header_len + end;
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return absl::InternalError(
        absl::StrCat(path, ": cannot reserve ", size, " bytes for its header: ", std::strerror(errno)));
  std::memcpy(m, prefix, 8);
  std::memcpy(static_cast<unsigned char*>(m) + 8, header.data(), header_len);
  *map = m;
  return size;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

const TensorEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace ls

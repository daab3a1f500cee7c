// ByteWriter and ByteReader: the byte encoding of the rank group's messages — fixed-width
// little-endian integers and floats as the host stores them (every rank of a group runs the same
// binary on the same architecture) and length-prefixed arrays. The reader checks every length
// against the bytes left and remembers the first problem instead of reading past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ls::dist {

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void PutArray(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint64_t>(v.size());
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    out_.append(s.data(), s.size());
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  template <typename T>
  T Get(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    T v{};
    if (!Need(sizeof(T), what)) return v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> GetArray(const char* what) {
    const uint64_t n = Get<uint64_t>(what);
    std::vector<T> v;
    if (!ok() || n > (in_.size() - pos_) / sizeof(T)) {
      Fail(what);
      return v;
    }
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));  // an empty vector's data() may be null
    pos_ += n * sizeof(T);
    return v;
  }
  std::string GetString(const char* what) {
    const uint64_t n = Get<uint64_t>(what);
    if (!ok() || n > in_.size() - pos_) {
      Fail(what);
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // Records a problem found by the caller (a value out of range); the first one is kept.
  void Fail(const char* what) {
    if (error_.empty()) error_ = what;
  }
  bool ok() const { return error_.empty(); }
  bool at_end() const { return pos_ == in_.size(); }
  // What could not be read (empty while everything could).
  const std::string& error() const { return error_; }

 private:
  bool Need(size_t n, const char* what) {
    if (ok() && in_.size() - pos_ >= n) return true;
    Fail(what);
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace ls::dist

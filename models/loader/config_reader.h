// ConfigReader: typed, strict access to a config.json object for the family config adapters.
// Every error names the file and the key path ("rope_scaling.factor"); the first error sticks.
// It records which keys were read or declared irrelevant, so the loader can list the rest.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace ls {

class ConfigReader {
 public:
  // `source` (the file path) prefixes every error message; `j` must outlive the reader.
  ConfigReader(const nlohmann::json& j, std::string source);

  // Present and not null.
  bool Has(const char* key) const;
  // Present with the value null (for keys whose null differs from their absence).
  bool IsNull(const char* key);
  // The value of the first present key among `keys` (the spellings families use for one
  // setting); `required` keys name every spelling when all are missing.
  int64_t Int(std::initializer_list<const char*> keys, bool required, int64_t def = 0);
  int64_t Int(const char* key, bool required, int64_t def = 0) { return Int({key}, required, def); }
  double Number(std::initializer_list<const char*> keys, bool required, double def);
  double Number(const char* key, bool required, double def) { return Number({key}, required, def); }
  bool Bool(std::initializer_list<const char*> keys, bool def);
  bool Bool(const char* key, bool def) { return Bool({key}, def); }
  std::string String(const char* key, const char* def);
  // A list of integers; an integer alone counts as a one-element list.
  std::vector<int64_t> IntList(const char* key);
  // A list of strings (absent or null: nullopt).
  std::optional<std::vector<std::string>> StringList(const char* key);
  // A nested object (absent or null: nullopt). The child shares this reader's status.
  std::optional<ConfigReader> Object(const char* key);
  // The keys of this object, in order (for objects keyed by name, such as config groups).
  std::vector<std::string> Keys() const;

  // Keys known to have no effect on inference (training, bookkeeping, generation defaults).
  void Ignore(std::initializer_list<const char*> keys);
  // An error naming `key` and its value, saying what is supported.
  void Unsupported(const char* key, const std::string& supported);
  void Fail(const std::string& message);

  absl::Status status() const { return state_->status; }
  const std::string& source() const { return state_->source; }
  // Keys neither read nor ignored, with their paths; objects entered with Object() are listed by
  // their own unread keys.
  std::vector<std::string> UnreadKeys() const;
  // The path of a key of this object, for messages ("rope_scaling.factor").
  std::string Path(const char* key) const { return prefix_ + key; }

 private:
  struct State {
    std::string source;
    absl::Status status;
    std::set<std::string> seen;     // key paths read or ignored
    std::set<std::string> entered;  // object paths read through Object()
  };
  void CollectUnread(const nlohmann::json& j, const std::string& prefix, std::vector<std::string>* out) const;
  ConfigReader(const nlohmann::json& j, std::shared_ptr<State> state, std::string prefix);
  const nlohmann::json* Find(std::initializer_list<const char*> keys, const char** found);

  const nlohmann::json* j_;
  std::shared_ptr<State> state_;
  std::string prefix_;
};

}  // namespace ls

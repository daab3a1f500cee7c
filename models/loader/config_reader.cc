// ConfigReader: typed reads with errors that name file and key path.
#include "models/loader/config_reader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ls {

using json = nlohmann::json;

ConfigReader::ConfigReader(const json& j, std::string source)
    : ConfigReader(j, std::make_shared<State>(State{std::move(source), absl::OkStatus(), {}, {}}), "") {}

ConfigReader::ConfigReader(const json& j, std::shared_ptr<State> state, std::string prefix)
    : j_(&j), state_(std::move(state)), prefix_(std::move(prefix)) {}

void ConfigReader::Fail(const std::string& message) {
  if (state_->status.ok()) state_->status = absl::InvalidArgumentError(absl::StrCat(state_->source, ": ", message));
}

bool ConfigReader::Has(const char* key) const {
  auto it = j_->find(key);
  return it != j_->end() && !it->is_null();
}

bool ConfigReader::IsNull(const char* key) {
  state_->seen.insert(Path(key));
  auto it = j_->find(key);
  return it != j_->end() && it->is_null();
}

const json* ConfigReader::Find(std::initializer_list<const char*> keys, const char** found) {
  const json* hit = nullptr;
  for (const char* k : keys) {
    state_->seen.insert(Path(k));
    auto it = j_->find(k);
    if (it == j_->end() || it->is_null()) continue;
    if (hit == nullptr) {
      hit = &*it;
      *found = k;
    } else if (*it != *hit) {
      // Two spellings of one setting that disagree: which one the model was trained with is unknown.
      Fail(absl::StrCat("keys '", Path(*found), "' (", hit->dump(), ") and '", Path(k), "' (", it->dump(),
                        ") name the same setting with different values"));
    }
  }
  return hit;
}

namespace {

std::string Spellings(const ConfigReader& r, std::initializer_list<const char*> keys) {
  std::vector<std::string> names;
  for (const char* k : keys) names.push_back(absl::StrCat("'", r.Path(k), "'"));
  return absl::StrJoin(names, " or ");
}

}  // namespace

int64_t ConfigReader::Int(std::initializer_list<const char*> keys, bool required, int64_t def) {
  const char* key = nullptr;
  const json* v = Find(keys, &key);
  if (!v) {
    if (required) Fail(absl::StrCat("missing required key ", Spellings(*this, keys)));
    return def;
  }
  // Integral floats (4.0) are accepted, as Python's json writes some integer settings that way.
  if (v->is_number_float() && v->get<double>() == static_cast<double>(static_cast<int64_t>(v->get<double>())))
    return static_cast<int64_t>(v->get<double>());
  if (!v->is_number_integer()) {
    Fail(absl::StrCat("key '", Path(key), "' must be an integer, got ", v->dump()));
    return def;
  }
  return v->get<int64_t>();
}

double ConfigReader::Number(std::initializer_list<const char*> keys, bool required, double def) {
  const char* key = nullptr;
  const json* v = Find(keys, &key);
  if (!v) {
    if (required) Fail(absl::StrCat("missing required key ", Spellings(*this, keys)));
    return def;
  }
  if (!v->is_number()) {
    Fail(absl::StrCat("key '", Path(key), "' must be a number, got ", v->dump()));
    return def;
  }
  return v->get<double>();
}

bool ConfigReader::Bool(std::initializer_list<const char*> keys, bool def) {
  const char* key = nullptr;
  const json* v = Find(keys, &key);
  if (!v) return def;
  if (!v->is_boolean()) {
    Fail(absl::StrCat("key '", Path(key), "' must be true or false, got ", v->dump()));
    return def;
  }
  return v->get<bool>();
}

std::string ConfigReader::String(const char* key, const char* def) {
  const char* found = nullptr;
  const json* v = Find({key}, &found);
  if (!v) return def;
  if (!v->is_string()) {
    Fail(absl::StrCat("key '", Path(key), "' must be a string, got ", v->dump()));
    return def;
  }
  return v->get<std::string>();
}

std::vector<int64_t> ConfigReader::IntList(const char* key) {
  const char* found = nullptr;
  const json* v = Find({key}, &found);
  std::vector<int64_t> out;
  if (!v) return out;
  if (v->is_number_integer()) return {v->get<int64_t>()};
  if (v->is_array()) {
    for (const json& e : *v) {
      if (!e.is_number_integer()) break;
      out.push_back(e.get<int64_t>());
    }
    if (out.size() == v->size()) return out;
  }
  Fail(absl::StrCat("key '", Path(key), "' must be an integer or a list of integers, got ", v->dump()));
  return {};
}

std::optional<std::vector<std::string>> ConfigReader::StringList(const char* key) {
  const char* found = nullptr;
  const json* v = Find({key}, &found);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_array())
    for (const json& e : *v)
      if (e.is_string()) out.push_back(e.get<std::string>());
  if (!v->is_array() || out.size() != v->size()) {
    Fail(absl::StrCat("key '", Path(key), "' must be a list of strings, got ", v->dump()));
    return std::nullopt;
  }
  return out;
}

std::optional<ConfigReader> ConfigReader::Object(const char* key) {
  const char* found = nullptr;
  const json* v = Find({key}, &found);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    Fail(absl::StrCat("key '", Path(key), "' must be an object, got ", v->dump()));
    return std::nullopt;
  }
  state_->entered.insert(Path(key));
  return ConfigReader(*v, state_, Path(key) + ".");
}

std::vector<std::string> ConfigReader::Keys() const {
  std::vector<std::string> keys;
  for (auto it = j_->begin(); it != j_->end(); ++it) keys.push_back(it.key());
  return keys;
}

void ConfigReader::Ignore(std::initializer_list<const char*> keys) {
  for (const char* k : keys) state_->seen.insert(Path(k));
}

void ConfigReader::Unsupported(const char* key, const std::string& supported) {
  auto it = j_->find(key);
  const std::string value = it == j_->end() ? "absent" : it->dump();
  Fail(absl::StrCat("key '", Path(key), "' = ", value, " is not supported (", supported, ")"));
}

void ConfigReader::CollectUnread(const json& j, const std::string& prefix, std::vector<std::string>* out) const {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string path = prefix + it.key();
    if (state_->entered.count(path)) {
      CollectUnread(it.value(), path + ".", out);
    } else if (!state_->seen.count(path)) {
      out->push_back(path);
    }
  }
}

std::vector<std::string> ConfigReader::UnreadKeys() const {
  std::vector<std::string> out;
  CollectUnread(*j_, prefix_, &out);
  return out;
}

}  // namespace ls

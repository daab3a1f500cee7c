// FromJson and json.dumps (see python_json.h).
#include "jinja/python_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

Value FromJsonAt(const nlohmann::ordered_json& j, int depth, int max_depth) {
  if (depth > max_depth) FailLimit("JSON input nested too deeply (more than " + std::to_string(max_depth) + " levels)");
  using J = nlohmann::ordered_json;
  switch (j.type()) {
    case J::value_t::null:
      return Value::None();
    case J::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case J::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case J::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::Int(static_cast<int64_t>(u))
                                                   : Value::Float(static_cast<double>(u));
    }
    case J::value_t::number_float:
      return Value::Float(j.get<double>());
    case J::value_t::string:
      return Value::Str(j.get<std::string>());
    case J::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonAt(e, depth + 1, max_depth));
      return Value::List(std::move(items));
    }
    case J::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.Append(Value::Str(it.key()), FromJsonAt(it.value(), depth + 1, max_depth));
      return Value::MakeDict(std::move(d));
    }
    default:
      Fail("JSON input holds a value of an unsupported type (binary or discarded)");
  }
}

// The two-character escapes json.dumps writes; false for any other character.
bool AppendShortEscape(char32_t c, std::string* out) {
  switch (c) {
    case '"': out->append("\\\""); return true;
    case '\\': out->append("\\\\"); return true;
    case '\n': out->append("\\n"); return true;
    case '\r': out->append("\\r"); return true;
    case '\t': out->append("\\t"); return true;
    case '\b': out->append("\\b"); return true;
    case '\f': out->append("\\f"); return true;
    default: return false;
  }
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  char buf[16];
  if (!ensure_ascii) {
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (AppendShortEscape(c, out)) continue;
      if (c < 0x20) {
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out->append(buf);
      } else {
        out->push_back(ch);
      }
    }
  } else {
    for (char32_t c : py::Decode(s)) {
      if (AppendShortEscape(c, out)) continue;
      if (c >= 0x20 && c < 0x7F) {
        out->push_back(static_cast<char>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out->append(buf);
      } else {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
        out->append(buf);
      }
    }
  }
  out->push_back('"');
}

std::string FloatJson(double d) {
  if (d != d) return "NaN";
  if (d == HUGE_VAL) return "Infinity";
  if (d == -HUGE_VAL) return "-Infinity";
  return py::FloatRepr(d);
}

// A dict key as json.dumps converts it.
std::string KeyString(const Value& k) {
  switch (k.type()) {
    case Value::Type::kString:
      return k.str();
    case Value::Type::kBool:
      return k.as_bool() ? "true" : "false";
    case Value::Type::kInt:
      return std::to_string(k.as_int());
    case Value::Type::kFloat:
      return FloatJson(k.as_float());
    case Value::Type::kNone:
      return "null";
    default:
      Fail("keys must be str, int, float, bool or None, not " + std::string(TypeName(k)));
  }
}

struct Dumper {
  const JsonDumpOptions& opt;
  std::string* out;
  Budget& budget;
  std::string item_sep, key_sep;

  void Newline(int level) {
    if (!opt.indent) return;
    out->push_back('\n');
    for (int i = 0; i < level; ++i) out->append(*opt.indent);
    if (out->size() > budget.max_bytes) budget.CheckBytes(out->size());
  }

  void Dump(const Value& v, int level) {
    if (level > budget.max_depth) FailLimit("value nested too deeply for tojson");
    budget.Step();
    if (out->size() > budget.max_bytes) budget.CheckBytes(out->size());
    switch (v.type()) {
      case Value::Type::kNone:
        out->append("null");
        return;
      case Value::Type::kBool:
        out->append(v.as_bool() ? "true" : "false");
        return;
      case Value::Type::kInt:
        out->append(std::to_string(v.as_int()));
        return;
      case Value::Type::kFloat:
        out->append(FloatJson(v.as_float()));
        return;
      case Value::Type::kString:
        AppendJsonString(v.str(), opt.ensure_ascii, out);
        return;
      case Value::Type::kList: {
        if (!v.is_sequence_list()) break;
        const ValueList& items = v.list();
        if (items.empty()) {
          out->append("[]");
          return;
        }
        out->push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out->append(item_sep);
          Newline(level + 1);
          Dump(items[i], level + 1);
        }
        Newline(level);
        out->push_back(']');
        return;
      }
      case Value::Type::kDict: {
        const auto& items = v.dict().items();
        if (items.empty()) {
          out->append("{}");
          return;
        }
        std::vector<const std::pair<Value, Value>*> order;
        for (const auto& kv : items) order.push_back(&kv);
        if (opt.sort_keys) {
          ValueList index;
          for (size_t i = 0; i < items.size(); ++i) index.push_back(Value::Int(static_cast<int64_t>(i)));
          StableSort(index, [&](const Value& a, const Value& b) {
            return Compare(items[a.as_int()].first, items[b.as_int()].first, budget, "<") < 0;
          });
          for (size_t i = 0; i < index.size(); ++i) order[i] = &items[index[i].as_int()];
        }
        out->push_back('{');
        for (size_t i = 0; i < order.size(); ++i) {
          if (i) out->append(item_sep);
          Newline(level + 1);
          AppendJsonString(KeyString(order[i]->first), opt.ensure_ascii, out);
          out->append(key_sep);
          Dump(order[i]->second, level + 1);
        }
        Newline(level);
        out->push_back('}');
        return;
      }
      default:
        break;
    }
    Fail("Object of type " + std::string(TypeName(v)) + " is not JSON serializable");
  }
};

}  // namespace

Value FromJson(const nlohmann::ordered_json& j, int max_depth) { return FromJsonAt(j, 0, max_depth); }

void DumpJson(const Value& v, const JsonDumpOptions& options, std::string* out, Budget& budget) {
  if (!options.invalid_indent.empty() && !v.is_string())
    Fail("can't multiply sequence by non-int of type '" + options.invalid_indent + "' (tojson indent)");
  Dumper d{options, out, budget, options.item_separator.value_or(options.indent ? "," : ", "),
           options.key_separator.value_or(": ")};
  d.Dump(v, 0);
}

}  // namespace ls::jinja

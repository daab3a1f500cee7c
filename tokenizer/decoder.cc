// The decoder steps and their streaming evaluation.
#include "tokenizer/decoder.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace ls::tok {

using json = nlohmann::json;

struct Decoder::Step {
  enum class Kind { kReplace, kByteFallback, kStrip, kMetaspace, kNoop } kind;
  std::string pattern;  // Replace: literal; Metaspace: the replacement character
  std::string content;  // Replace: what it becomes
  uint32_t strip_char = 0;
  size_t start = 0, stop = 0;  // Strip: characters strippable at either end
  bool drop_first = false;     // Metaspace: drop the replacement in the first token
};

namespace {

constexpr char kReplacementChar[] = "\xef\xbf\xbd";

absl::Status UnsupportedDecoder(const std::string& what) {
  return absl::InvalidArgumentError("unsupported: decoder " + what);
}

// The byte a "<0xXX>" token stands for, or -1 (the reference parses the two characters as a
// base-16 u8, which also takes a '+' sign).
int ByteToken(std::string_view t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') return hex(t[4]);
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string ReplaceAll(std::string_view s, const std::string& pattern, const std::string& content) {
  std::string out;
  size_t prev = 0;
  for (size_t at = s.find(pattern); at != std::string_view::npos && !pattern.empty(); at = s.find(pattern, prev)) {
    out.append(s, prev, at - prev);
    out += content;
    prev = at + pattern.size();
  }
  out.append(s, prev);
  return out;
}

std::string MetaspaceMap(std::string_view s, const std::string& replacement, bool drop) {
  return ReplaceAll(s, replacement, drop ? "" : " ");
}

// Strip on one whole token: up to `start` leading and `stop` trailing `c` characters.
std::string StripToken(std::string_view s, uint32_t c, size_t start, size_t stop) {
  std::vector<std::pair<size_t, uint32_t>> chars;  // (byte offset, code point)
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    chars.emplace_back(at, NextCodePoint(s, &i));
  }
  size_t first = 0;
  while (first < chars.size() && first < start && chars[first].second == c) ++first;
  size_t last = chars.size();
  for (size_t k = 0; k < stop && last > first && chars[last - 1].second == c; ++k) --last;
  const size_t b = first < chars.size() ? chars[first].first : s.size();
  const size_t e = last < chars.size() ? chars[last].first : s.size();
  return std::string(s.substr(b, e > b ? e - b : 0));
}

// The bytes a ByteLevel decoder reads from a token: its symbols' bytes when every character is in
// the byte-level alphabet, else the token's own UTF-8.
void ByteLevelBytes(std::string_view token, std::string* out) {
  const ByteLevel& bl = ByteLevel::Get();
  const size_t mark = out->size();
  for (size_t i = 0; i < token.size();) {
    const int b = bl.ByteOf(NextCodePoint(token, &i));
    if (b < 0) {
      out->resize(mark);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(b));
  }
}

absl::Status Flatten(const json& j, std::vector<json>* out) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return absl::InvalidArgumentError("decoder: expected an object with a \"type\"");
  if (j["type"] == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      return absl::InvalidArgumentError("decoder Sequence: missing \"decoders\" list");
    for (const auto& d : j["decoders"])
      if (auto s = Flatten(d, out); !s.ok()) return s;
    return absl::OkStatus();
  }
  out->push_back(j);
  return absl::OkStatus();
}

}  // namespace

Decoder::Decoder() = default;
Decoder::~Decoder() = default;

absl::StatusOr<std::unique_ptr<Decoder>> Decoder::FromJson(const json& j) {
  std::unique_ptr<Decoder> d(new Decoder());
  if (j.is_null()) {
    d->join_with_space_ = true;
    return d;
  }
  std::vector<json> steps;
  if (auto s = Flatten(j, &steps); !s.ok()) return s;
  for (const json& s : steps) {
    const std::string type = s["type"];
    const bool fused = d->fuse_ != Fuse::kNone;
    std::vector<Step>& list = fused ? d->fused_steps_ : d->token_steps_;
    Step step{};
    if (type == "ByteLevel") {
      if (fused) return UnsupportedDecoder("ByteLevel after Fuse or ByteLevel");
      d->fuse_ = Fuse::kByteLevel;
      continue;
    }
    if (type == "Fuse") {
      if (!fused) d->fuse_ = Fuse::kJoin;
      continue;
    }
    if (type == "Replace") {
      const json pat = s.value("pattern", json::object());
      if (!pat.contains("String") || !pat["String"].is_string() || !s.contains("content") || !s["content"].is_string())
        return UnsupportedDecoder("Replace without a String pattern and a content");
      step.kind = Step::Kind::kReplace;
      step.pattern = pat["String"];
      step.content = s["content"];
      size_t i = 0;
      if (fused && !step.pattern.empty() && (NextCodePoint(step.pattern, &i), i != step.pattern.size()))
        return UnsupportedDecoder("Replace of more than one character after Fuse or ByteLevel");
    } else if (type == "ByteFallback") {
      if (fused) return UnsupportedDecoder("ByteFallback after Fuse or ByteLevel");
      step.kind = Step::Kind::kByteFallback;
    } else if (type == "Strip") {
      const std::string c = s.value("content", std::string(" "));
      size_t i = 0;
      if (c.empty() || FindInvalidUtf8(c) != std::string::npos || (NextCodePoint(c, &i), i != c.size()))
        return absl::InvalidArgumentError("decoder Strip: \"content\" must be one character");
      step.kind = Step::Kind::kStrip;
      i = 0;
      step.strip_char = NextCodePoint(c, &i);
      step.start = s.value("start", size_t{0});
      step.stop = s.value("stop", size_t{0});
    } else if (type == "Metaspace") {
      if (!s.contains("replacement") || !s["replacement"].is_string() || s["replacement"].get<std::string>().empty())
        return absl::InvalidArgumentError("decoder Metaspace: missing \"replacement\" character");
      step.kind = Step::Kind::kMetaspace;
      step.pattern = s["replacement"];
      std::string scheme = s.value("prepend_scheme", std::string("always"));
      if (s.contains("add_prefix_space") && s["add_prefix_space"].is_boolean() && !s["add_prefix_space"].get<bool>())
        scheme = "never";
      step.drop_first = scheme != "never";
    } else {
      return UnsupportedDecoder(type);
    }
    list.push_back(std::move(step));
  }
  return d;
}

void Decoder::AppendPiece(std::string_view token, std::string* out) const {
  std::string t(token);
  for (const Step& s : token_steps_) {
    switch (s.kind) {
      case Step::Kind::kReplace:
        t = ReplaceAll(t, s.pattern, s.content);
        break;
      case Step::Kind::kByteFallback:
        if (const int b = ByteToken(t); b >= 0) t = std::string(1, static_cast<char>(b));
        break;
      case Step::Kind::kStrip:
        t = StripToken(t, s.strip_char, s.start, s.stop);
        break;
      case Step::Kind::kMetaspace:
        t = MetaspaceMap(t, s.pattern, false);
        break;
      case Step::Kind::kNoop:
        break;
    }
  }
  if (fuse_ == Fuse::kByteLevel) {
    std::string bytes;
    ByteLevelBytes(t, &bytes);
    t = std::move(bytes);
  }
  for (const Step& s : fused_steps_) {
    if (s.kind == Step::Kind::kReplace) t = ReplaceAll(t, s.pattern, s.content);
    if (s.kind == Step::Kind::kMetaspace) t = MetaspaceMap(t, s.pattern, false);
  }
  out->append(t);
}

Decoder::Stream::Stream(const Decoder* decoder)
    : d_(decoder),
      byte_runs_(decoder->token_steps_.size()),
      seen_(decoder->token_steps_.size()),
      strip_left_(decoder->fused_steps_.size()),
      strip_tail_(decoder->fused_steps_.size()) {
  for (size_t k = 0; k < d_->fused_steps_.size(); ++k) strip_left_[k] = d_->fused_steps_[k].start;
}

Decoder::Stream::~Stream() = default;

void Decoder::Stream::Push(std::string_view token, std::string* out) { Feed(0, std::string(token), out); }

// Runs `token` through the token-level steps from `step` on.
void Decoder::Stream::Feed(size_t step, std::string token, std::string* out) {
  if (step == d_->token_steps_.size()) {
    Fused(std::move(token), out);
    return;
  }
  const Step& s = d_->token_steps_[step];
  const bool first = seen_[step]++ == 0;  // the token is the first this step receives
  switch (s.kind) {
    case Step::Kind::kReplace:
      Feed(step + 1, ReplaceAll(token, s.pattern, s.content), out);
      return;
    case Step::Kind::kStrip:
      Feed(step + 1, StripToken(token, s.strip_char, s.start, s.stop), out);
      return;
    case Step::Kind::kMetaspace:
      Feed(step + 1, MetaspaceMap(token, s.pattern, first && s.drop_first), out);
      return;
    case Step::Kind::kNoop:
      Feed(step + 1, std::move(token), out);
      return;
    case Step::Kind::kByteFallback: {
      if (const int b = ByteToken(token); b >= 0) {
        byte_runs_[step].push_back(static_cast<char>(b));
        return;
      }
      std::string& run = byte_runs_[step];
      if (!run.empty()) {
        std::string pending = std::move(run);
        run.clear();
        if (FindInvalidUtf8(pending) == std::string::npos) {
          Feed(step + 1, std::move(pending), out);
        } else {
          for (size_t i = 0; i < pending.size(); ++i) Feed(step + 1, kReplacementChar, out);  // one per byte
        }
      }
      Feed(step + 1, std::move(token), out);
      return;
    }
  }
}

// The fusing step: joins tokens (or their ByteLevel bytes), then the fused steps.
void Decoder::Stream::Fused(std::string text, std::string* out) {
  switch (d_->fuse_) {
    case Fuse::kNone:
      if (d_->join_with_space_ && tokens_out_ > 0) out->push_back(' ');
      ++tokens_out_;
      out->append(text);
      return;
    case Fuse::kJoin:
      FusedSteps(0, std::move(text), false, out);
      return;
    case Fuse::kByteLevel: {
      ByteLevelBytes(text, &pending_bytes_);
      std::string decoded;
      pending_bytes_.erase(0, DecodeUtf8Lossy(pending_bytes_, /*final=*/false, &decoded));
      FusedSteps(0, std::move(decoded), false, out);
      return;
    }
  }
}

void Decoder::Stream::FusedSteps(size_t step, std::string text, bool final, std::string* out) {
  if (step == d_->fused_steps_.size()) {
    out->append(text);
    return;
  }
  const Step& s = d_->fused_steps_[step];
  switch (s.kind) {
    case Step::Kind::kReplace:
      text = ReplaceAll(text, s.pattern, s.content);
      break;
    case Step::Kind::kMetaspace:
      text = MetaspaceMap(text, s.pattern, s.drop_first);
      break;  // one token: the first
    case Step::Kind::kStrip: {
      // Leading: drop `start` content characters at the very beginning. Trailing: hold back the
      // run of content characters at the end until something else follows, or the stream ends.
      std::string kept;
      std::string& tail = strip_tail_[step];
      for (size_t i = 0; i < text.size();) {
        const size_t at = i;
        const uint32_t cp = NextCodePoint(text, &i);
        if (strip_left_[step] > 0) {
          if (cp == s.strip_char) {
            --strip_left_[step];
            continue;
          }
          strip_left_[step] = 0;
        }
        if (cp == s.strip_char && s.stop > 0) {
          tail.append(text, at, i - at);
          continue;
        }
        kept += tail;
        tail.clear();
        kept.append(text, at, i - at);
      }
      if (final) {
        // Drop up to `stop` characters of the held run (each is one code point, all equal).
        const size_t width = tail.empty() ? 0 : [&] {
          size_t i = 0;
          NextCodePoint(tail, &i);
          return i;
        }();
        const size_t n = width ? tail.size() / width : 0;
        kept.append(tail, 0, (n - std::min(n, s.stop)) * width);
        tail.clear();
      }
      text = std::move(kept);
      break;
    }
    case Step::Kind::kByteFallback:
    case Step::Kind::kNoop:
      break;
  }
  FusedSteps(step + 1, std::move(text), final, out);
}

void Decoder::Stream::Finish(std::string* out) {
  for (size_t step = 0; step < d_->token_steps_.size(); ++step) {
    std::string& run = byte_runs_[step];
    if (run.empty()) continue;
    std::string pending = std::move(run);
    run.clear();
    if (FindInvalidUtf8(pending) == std::string::npos) {
      Feed(step + 1, std::move(pending), out);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) Feed(step + 1, kReplacementChar, out);
    }
  }
  if (d_->fuse_ == Fuse::kNone) return;
  std::string rest;
  if (d_->fuse_ == Fuse::kByteLevel) {
    DecodeUtf8Lossy(pending_bytes_, /*final=*/true, &rest);
    pending_bytes_.clear();
  }
  FusedSteps(0, std::move(rest), true, out);
}

}  // namespace ls::tok

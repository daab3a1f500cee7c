// XtmlParser: the state machine over control ids and decoded text.
#include "chat/xtml_parser.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/utf8.h"

namespace ls::chat::xtml {
namespace {

using ojson = nlohmann::ordered_json;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::string FirstWord(std::string_view s) {
  s = Trim(s);
  return std::string(s.substr(0, s.find(' ')));
}

std::string Decode(std::string_view bytes) {
  std::string out;
  tok::DecodeUtf8Lossy(bytes, /*final=*/true, &out);
  return out;
}

}  // namespace

XtmlParser::XtmlParser(const tok::Tokenizer* tokenizer, const ControlIds& ids, PromptEnd start)
    : tokenizer_(tokenizer), ids_(ids), rng_(std::random_device{}()) {
  stack_.push_back({Kind::kTop, ""});
  if (start != PromptEnd::kOutside) {
    stack_.push_back({Kind::kMessage, std::string(kMessage)});
    if (start == PromptEnd::kThink) {
      stack_.push_back({Kind::kThink, std::string(kThink)});
    } else {
      stack_.push_back({Kind::kResponse, std::string(kResponse)});
    }
  }
}

void XtmlParser::Warn(std::string_view why) {
  if (warning_.find(why) != std::string::npos) return;
  if (warning_.size() > 2000) return;
  if (!warning_.empty()) warning_ += "; ";
  warning_ += why;
}

std::string XtmlParser::NewCallId() {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[rng_() % 62]);
  return id;
}

ChatDelta XtmlParser::Feed(int32_t token_id, std::string_view /*text*/) {
  ChatDelta out;
  if (mode_ == Mode::kDone) {
    if (!ignoring_) Warn("output after the end of the message was ignored");
    ignoring_ = true;
    return out;
  }
  if (token_id == ids_.open || token_id == ids_.close) {
    DecodeBody(/*final=*/true, &out);
    if (mode_ != Mode::kBody) UnterminatedHeader(&out);
    mode_ = token_id == ids_.open ? Mode::kOpenHeader : Mode::kCloseHeader;
    header_.clear();
    return out;
  }
  if (token_id == ids_.sep) {
    if (mode_ == Mode::kBody) {
      DecodeBody(/*final=*/true, &out);
      Warn("a <|sep|> outside a tag was ignored");
      return out;
    }
    const bool open = mode_ == Mode::kOpenHeader;
    mode_ = Mode::kBody;
    const std::string header = Decode(header_);
    header_.clear();
    if (open) {
      OnOpen(header, &out);
    } else {
      OnClose(header, &out);
    }
    return out;
  }
  if (token_id == ids_.end_of_msg) {
    End(&out);
    return out;
  }
  std::string bytes;
  if (!tokenizer_->AppendTokenBytes(token_id, /*skip_special=*/true, &bytes)) {
    Warn(absl::StrCat("token id ", token_id, " is outside the vocabulary and was ignored"));
    return out;
  }
  if (mode_ == Mode::kBody) {
    pending_ += bytes;
    DecodeBody(/*final=*/false, &out);
  } else {
    header_ += bytes;
    if (header_.size() > kMaxHeaderBytes) UnterminatedHeader(&out);
  }
  return out;
}

ChatDelta XtmlParser::Finish() {
  ChatDelta out;
  if (mode_ != Mode::kDone) End(&out);
  return out;
}

void XtmlParser::End(ChatDelta* out) {
  DecodeBody(/*final=*/true, out);
  if (mode_ != Mode::kBody) UnterminatedHeader(out);
  while (stack_.size() > 1) PopFrame(/*implicit=*/true, out);
  mode_ = Mode::kDone;
}

void XtmlParser::DecodeBody(bool final, ChatDelta* out) {
  if (pending_.empty()) return;
  std::string text;
  pending_.erase(0, tok::DecodeUtf8Lossy(pending_, final, &text));
  if (!text.empty()) OnText(text, out);
}

void XtmlParser::UnterminatedHeader(ChatDelta* out) {
  const bool open = mode_ == Mode::kOpenHeader;
  mode_ = Mode::kBody;
  const std::string text = Decode(header_);
  header_.clear();
  Unreadable(text, open ? "a tag was not terminated by <|sep|>" : "a closing tag was not terminated by <|sep|>", out);
}

// Text that is not part of any readable structure: part of the call being read, else content.
void XtmlParser::Unreadable(const std::string& text, std::string_view why, ChatDelta* out) {
  if (call_) {
    call_->raw += text;
    FailCall(std::string(why));
    return;
  }
  out->content += text;
  Warn(absl::StrCat(std::string(why), "; its text was returned as content"));
}

void XtmlParser::OnText(const std::string& text, ChatDelta* out) {
  switch (stack_.back().kind) {
    case Kind::kThink:
      out->reasoning += text;
      return;
    case Kind::kResponse:
      out->content += text;
      return;
    case Kind::kArgument:
      call_->raw += text;
      call_->value += text;
      return;
    case Kind::kJson:
      call_->raw += text;
      call_->value += text;
      return;
    case Kind::kUnknown:
      if (call_) {
        call_->raw += text;
      } else {
        out->content += text;
      }
      return;
    case Kind::kCall:
      Unreadable(text, "text between a call's arguments", out);
      return;
    case Kind::kTop:
    case Kind::kMessage:
    case Kind::kTools:
      Unreadable(text, "text outside the think and response channels", out);
      return;
  }
}

void XtmlParser::OnOpen(const std::string& header, ChatDelta* out) {
  const std::optional<Header> h = ParseHeader(header);
  const std::string name = h ? h->name : FirstWord(header);
  if (call_) {  // inside a call block: everything is the call's, read or not
    call_->raw += header;
    const Kind top = stack_.back().kind;
    const std::string* key = h ? h->Find("key") : nullptr;
    if (top == Kind::kCall && h && name == kArgument && key != nullptr) {
      const std::string* type = h->Find("type");
      call_->key = *key;
      call_->type = type != nullptr ? *type : "string";
      call_->value.clear();
      stack_.push_back({Kind::kArgument, name});
    } else if (top == Kind::kCall && h && name == kJson) {
      call_->value.clear();
      stack_.push_back({Kind::kJson, name});
    } else {
      FailCall(absl::StrCat("a '", name, "' tag inside a call"));
      stack_.push_back({Kind::kUnknown, name});
    }
    return;
  }
  Kind top = stack_.back().kind;
  if (h && (top == Kind::kThink || top == Kind::kResponse) && (name == kThink || name == kResponse || name == kTools)) {
    Warn(absl::StrCat("the ", stack_.back().name, " channel was not closed before '", name, "'"));
    stack_.pop_back();
    top = stack_.back().kind;
  }
  if (h && top == Kind::kTop && name == kMessage) {
    stack_.push_back({Kind::kMessage, name});
    return;
  }
  if (h && top == Kind::kMessage && (name == kThink || name == kResponse || name == kTools)) {
    stack_.push_back({name == kThink ? Kind::kThink : name == kResponse ? Kind::kResponse : Kind::kTools, name});
    return;
  }
  if (h && top == Kind::kTools && name == kCall) {
    call_.emplace();
    call_->raw = header;
    const std::string* tool = h->Find("tool");
    if (tool != nullptr && !tool->empty()) {
      call_->name = *tool;
    } else {
      FailCall("a call without a tool name");
    }
    stack_.push_back({Kind::kCall, name});
    return;
  }
  out->content += header;
  Warn(absl::StrCat(h ? "an unknown tag '" : "an unreadable tag '", name, "'; its text was returned as content"));
  stack_.push_back({Kind::kUnknown, name});
}

void XtmlParser::OnClose(const std::string& raw_name, ChatDelta* out) {
  const std::string name(Trim(raw_name));
  if (call_) call_->raw += raw_name;
  size_t depth = stack_.size() - 1;
  while (depth > 0 && stack_[depth].name != name) --depth;
  if (depth == 0) {
    if (call_) {
      FailCall(absl::StrCat("a stray closing tag '", name, "'"));
    } else {
      out->content += raw_name;
      Warn(absl::StrCat("a stray closing tag '", name, "'; its text was returned as content"));
    }
    return;
  }
  while (stack_.size() - 1 > depth) PopFrame(/*implicit=*/true, out);
  if (!call_ && stack_.back().kind == Kind::kUnknown) out->content += raw_name;  // as its header was
  PopFrame(/*implicit=*/false, out);
}

void XtmlParser::PopFrame(bool implicit, ChatDelta* out) {
  const Frame f = std::move(stack_.back());
  stack_.pop_back();
  switch (f.kind) {
    case Kind::kArgument:
      if (implicit) {
        FailCall(absl::StrCat("argument '", call_->key, "' was not closed"));
      } else {
        FinishArgument();
      }
      return;
    case Kind::kJson:
      if (implicit) {
        FailCall("a json block was not closed");
      } else {
        FinishJson();
      }
      return;
    case Kind::kCall:
      if (implicit) FailCall("the call was not closed");
      EmitCall(out);
      return;
    case Kind::kUnknown:
      if (implicit && !call_) Warn(absl::StrCat("tag '", f.name, "' was not closed"));
      return;
    case Kind::kTop:
      return;
    case Kind::kMessage:
    case Kind::kThink:
    case Kind::kResponse:
    case Kind::kTools:
      if (implicit) Warn(absl::StrCat("the ", f.name, " tag was not closed"));
      return;
  }
}

void XtmlParser::FailCall(std::string why) {
  if (call_ && call_->why.empty()) call_->why = std::move(why);
}

void XtmlParser::FinishArgument() {
  Call& c = *call_;
  if (c.type == "string") {
    c.args.emplace_back(c.key, JsonQuote(c.value));
    return;
  }
  ojson v = ojson::parse(c.value, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    FailCall(absl::StrCat("argument '", c.key, "' of type '", c.type, "' is not JSON"));
    return;
  }
  c.args.emplace_back(c.key, PythonJson(v));
}

void XtmlParser::FinishJson() {
  Call& c = *call_;
  ojson v = ojson::parse(c.value, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || !v.is_object()) {
    FailCall("a json block that is not a JSON object");
    return;
  }
  for (auto it = v.begin(); it != v.end(); ++it) c.args.emplace_back(it.key(), PythonJson(it.value()));
}

void XtmlParser::EmitCall(ChatDelta* out) {
  Call c = std::move(*call_);
  call_.reset();
  if (!c.why.empty()) {
    out->content += c.raw;
    Warn(absl::StrCat("a tool call was returned as content (", c.why, ")"));
    return;
  }
  const int32_t index = calls_sent_++;
  out->tool_calls.push_back({index, NewCallId(), c.name, ""});
  if (c.args.empty()) {
    out->tool_calls.push_back({index, "", "", "{}"});
    return;
  }
  for (size_t i = 0; i < c.args.size(); ++i)
    out->tool_calls.push_back(
        {index, "", "", absl::StrCat(i == 0 ? "{" : ", ", JsonQuote(c.args[i].first), ": ", c.args[i].second)});
  out->tool_calls.push_back({index, "", "", "}"});
}

}  // namespace ls::chat::xtml

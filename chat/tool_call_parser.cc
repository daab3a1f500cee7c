// ToolCallParser: the marker state machine over content, sections and calls.
#include "chat/tool_call_parser.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

}  // namespace

std::optional<std::string> ArgumentsJson(std::string_view text) {
  text = TrimSpace(text);
  if (text.empty()) return std::string("{}");
  ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  if (j.is_null()) return std::string("{}");
  if (j.is_string()) {  // arguments written as a string holding the object's JSON
    const std::string inner = j.get<std::string>();
    j = ojson::parse(inner, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return std::nullopt;
  }
  if (!j.is_object()) return std::nullopt;
  return j.dump();
}

bool IsCallName(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (c <= 0x20 || c == 0x7f) return false;
  return true;
}

std::string RandomCallId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("chatcmpl-tool-%016x%016x", rng(), rng());
}

ToolCallParser::ToolCallParser(ToolCallSyntax syntax, ToolParserOptions options)
    : syntax_(std::move(syntax)), options_(std::move(options)) {
  if (!options_.new_call_id) options_.new_call_id = RandomCallId;
}

ChatDelta ToolCallParser::Feed(int32_t token_id, std::string_view text) {
  ChatDelta out;
  scanner_.Push(options_.marker_tokens.Text(token_id, text));
  Process(/*final=*/false, &out);
  return out;
}

ChatDelta ToolCallParser::Finish() {
  ChatDelta out;
  Process(/*final=*/true, &out);
  if (state_ == State::kCall) CloseCall("", /*left_open=*/true, &out);
  if (in_section_) CloseSection("", &out);
  state_ = State::kContent;
  if (calls_ == 0) out.content += held_space_;  // without calls the text goes out exactly as written
  held_space_.clear();
  return out;
}

void ToolCallParser::Warn(const std::string& why) {
  if (!warning_.empty()) warning_ += "; ";
  warning_ += why;
}

void ToolCallParser::EmitContent(std::string_view text, ChatDelta* out) {
  const auto [body, space] = SplitTrailingSpace(text);
  if (body.empty()) {
    held_space_.append(space);
    return;
  }
  out->content += held_space_;
  out->content.append(body);
  held_space_.assign(space);
}

void ToolCallParser::Failed(std::string raw, ChatDelta* out) {
  if (!in_section_) {
    // As written, with the space before it, unless calls came before (space around calls is dropped).
    EmitContent(calls_ == 0 ? call_space_ + raw : raw, out);
  } else if (section_good_) {
    EmitContent(raw, out);
  } else {
    failed_raw_ += raw;  // the section comes back whole unless a later call in it reads well
  }
}

void ToolCallParser::CloseCall(std::string_view end, bool left_open, ChatDelta* out) {
  const std::string raw = absl::StrCat(syntax_.call_begin, call_text_, std::string(end));
  if (in_section_) section_raw_ += raw;
  std::string why = "it was left open";
  std::optional<ParsedToolCall> call;
  if (!left_open) call = syntax_.parse_call(call_text_, &why);
  if (!call) {
    Warn(absl::StrCat("a malformed tool call was returned as content (", why, ")"));
    Failed(raw, out);
  } else {
    if (in_section_ && !section_good_) {
      section_good_ = true;
      EmitContent(failed_raw_, out);
    }
    ToolCallDelta delta;
    delta.index = calls_;
    delta.id = call->id.empty() ? options_.new_call_id() : call->id;
    delta.name = std::move(call->name);
    delta.arguments = std::move(call->arguments);
    out->tool_calls.push_back(std::move(delta));
    ++calls_;
  }
  call_text_.clear();
  call_space_.clear();
}

void ToolCallParser::FlushGap(ChatDelta* out) {
  if (!IsAllSpace(section_gap_)) {
    Warn("text inside a tool-call section that is no call was returned as content");
    if (section_good_) {
      EmitContent(section_gap_, out);
    } else {
      failed_raw_ += section_gap_;
    }
  }
  section_gap_.clear();
}

void ToolCallParser::CloseSection(std::string_view end, ChatDelta* out) {
  FlushGap(out);
  if (!section_good_) {
    Warn("a tool-call section without a readable call was returned as content");
    EmitContent(section_raw_ + std::string(end), out);
  }
  in_section_ = false;
  section_good_ = false;
  section_raw_.clear();
  failed_raw_.clear();
}

void ToolCallParser::Process(bool final, ChatDelta* out) {
  const bool sections = !syntax_.section_begin.empty();
  for (;;) {
    std::vector<std::string_view> markers;
    switch (state_) {
      case State::kContent:
        markers = {syntax_.call_begin};
        if (sections) markers.push_back(syntax_.section_begin);
        break;
      case State::kSection:
        markers = {syntax_.call_begin, syntax_.section_end};
        break;
      case State::kCall:
        markers = {syntax_.call_end, syntax_.call_begin};
        if (in_section_) markers.push_back(syntax_.section_end);
        break;
    }
    MarkerScanner::Piece piece = scanner_.Next(markers, final);
    switch (state_) {
      case State::kContent:
        EmitContent(piece.text, out);
        break;
      case State::kSection:
        section_raw_ += piece.text;
        section_gap_ += piece.text;
        break;
      case State::kCall:
        call_text_ += piece.text;
        break;
    }
    if (piece.marker < 0) return;
    const std::string_view m = markers[static_cast<size_t>(piece.marker)];
    if (state_ == State::kContent) {
      if (sections && m == syntax_.section_begin) {
        in_section_ = true;
        section_raw_ = held_space_ + syntax_.section_begin;
        state_ = State::kSection;
      } else {  // a call outside any section
        call_space_ = held_space_;
        state_ = State::kCall;
      }
      held_space_.clear();
    } else if (state_ == State::kSection) {
      FlushGap(out);
      if (m == syntax_.call_begin) {
        state_ = State::kCall;
      } else {
        CloseSection(m, out);
        state_ = State::kContent;
      }
    } else if (m == syntax_.call_end) {
      CloseCall(m, /*left_open=*/false, out);
      state_ = in_section_ ? State::kSection : State::kContent;
    } else if (m == syntax_.call_begin) {  // a call began inside an unclosed one
      CloseCall("", /*left_open=*/true, out);
    } else {  // the section ended with a call open
      CloseCall("", /*left_open=*/true, out);
      CloseSection(m, out);
      state_ = State::kContent;
    }
  }
}

}  // namespace ls::chat

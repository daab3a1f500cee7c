// XtmlParser: reads Kimi K3's generated XTML back as an OpenAI message, token id by token id —
// the think channel as reasoning, the response channel as content, each call block as a tool
// call — and streams it as ChatDelta pieces. One parser per choice; not thread-safe.
//
// It reads ids, not the text it is given: the four control ids are structure and never text, and
// the text of every other id comes from the tokenizer's bytes (other special ids read as nothing),
// decoded per run between control ids, a UTF-8 character never split across pieces. Reasoning and
// content stream as their tokens arrive. A tool call is held until its <|close|>call<|sep|>, then
// sent as OpenAI streams one: a first delta with a fresh id ("call_" + 24 letters and digits) and
// the name, then the arguments object in pieces (`{"k": v`, `, "k2": v2`, `}`) that join into
// JSON text. An argument of type="string" is its raw text as a JSON string; any other type must
// be JSON, and is written back as json.dumps writes it.
//
// Output it cannot read is never an error: an unreadable or unknown tag, text outside the think
// and response channels, a stray close, or a call that is unclosed, has no tool name or holds an
// argument that is not JSON, becomes content — all its text, tag names and attributes included,
// control ids excluded — and warning() says why. <|end_of_msg|> ends the message; anything after
// it is ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_output_parser.h"
#include "chat/xtml_render.h"
#include "chat/xtml_syntax.h"
#include "tokenizer/tokenizer.h"

namespace ls::chat::xtml {

class XtmlParser final : public ChatOutputParser {
 public:
  // Longest tag header read as one; a longer one is text (and the output is malformed).
  static constexpr size_t kMaxHeaderBytes = 4096;

  // `tokenizer` must outlive the parser. `start`: where the prompt left the model.
  XtmlParser(const tok::Tokenizer* tokenizer, const ControlIds& ids, PromptEnd start);

  // `text` is not read (see above).
  ChatDelta Feed(int32_t token_id, std::string_view text) override;
  ChatDelta Finish() override;
  const std::string& warning() const override { return warning_; }

 private:
  enum class Kind { kTop, kMessage, kThink, kResponse, kTools, kCall, kArgument, kJson, kUnknown };
  struct Frame {
    Kind kind;
    std::string name;  // the tag name its close must give
  };
  // A call block being read; sent whole when it closes.
  struct Call {
    std::string name;
    std::string raw;                                        // all its text so far, for when it falls back to content
    std::string why;                                        // non-empty once it cannot be read as a call
    std::vector<std::pair<std::string, std::string>> args;  // key, JSON text of the value
    std::string key, type, value;                           // the argument being read
  };
  enum class Mode { kBody, kOpenHeader, kCloseHeader, kDone };

  void Warn(std::string_view why);
  void DecodeBody(bool final, ChatDelta* out);
  void OnText(const std::string& text, ChatDelta* out);
  void OnOpen(const std::string& header, ChatDelta* out);
  void OnClose(const std::string& name, ChatDelta* out);
  void Unreadable(const std::string& text, std::string_view why, ChatDelta* out);
  void UnterminatedHeader(ChatDelta* out);
  void PopFrame(bool implicit, ChatDelta* out);
  void FailCall(std::string why);
  void FinishArgument();
  void FinishJson();
  void EmitCall(ChatDelta* out);
  void End(ChatDelta* out);
  std::string NewCallId();

  const tok::Tokenizer* tokenizer_;
  ControlIds ids_;
  Mode mode_ = Mode::kBody;
  std::string pending_;  // body bytes not yet decoded (an incomplete UTF-8 character)
  std::string header_;   // the header being read, as bytes
  std::vector<Frame> stack_;
  std::optional<Call> call_;
  int32_t calls_sent_ = 0;
  bool ignoring_ = false;
  std::string warning_;
  std::mt19937_64 rng_;
};

}  // namespace ls::chat::xtml

// How a chat template reads a message's content: as one string, or as OpenAI's list of parts
// ([{"type": "text", "text": ...}, ...]). A request's list content is passed to a template of the
// second kind as it came and joined into one string for the first, as vLLM's
// --chat-template-content-format auto does. The decision reads the template's syntax tree: a value
// that flows from a message's `content` (directly, through `set`, `with`, `or`/`if` and `default`,
// and into a macro's parameters, by position or by name) and is then looped over, indexed by
// position or by a part's key ("type", "text"), or given to a filter that takes a list (map,
// selectattr, rejectattr, select, reject, first, last, batch, slice) marks the second kind.
#pragma once

#include <string>
#include <string_view>

namespace ls::chat {

// kAuto: decided from the template (DetectContentFormat).
enum class ContentFormat { kAuto, kString, kOpenAi };

// --chat_template_content_format: auto, string or openai; false with *error naming the value.
bool ParseContentFormat(std::string_view value, ContentFormat* out, std::string* error);
std::string_view ContentFormatName(ContentFormat f);

// What a template reads, kString or kOpenAi (a template that does not parse: kString; rendering
// reports its error).
ContentFormat DetectContentFormat(std::string_view template_source);

}  // namespace ls::chat

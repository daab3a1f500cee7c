// The structured-output fields of a request, as vLLM and OpenAI name them, read into one
// OutputConstraint: response_format ({"type": "text" | "json_object" | "json_schema"}),
// structured_outputs ({"json" | "regex" | "choice" | "grammar" | "json_object" |
// "structural_tag"}) and vLLM's older guided_json / guided_regex / guided_choice / guided_grammar /
// structural_tag; at most one of them. response_format may also be {"type": "structural_tag", ...}. Then the
// compiled grammar (the ApiContext's cache) goes into the sampling parameters; a constraint the
// compilers do not support is a 400 naming what.
#pragma once

#include "engine/sampling_params.h"
#include "nlohmann/json.hpp"
#include "server/api_context.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "structured/output_constraint.h"

namespace ls::server {

// Reads `key`'s value (one of the fields above) into *out; false with *error naming the field.
bool ReadConstraintField(const std::string& key, const nlohmann::ordered_json& value, structured::OutputConstraint* out,
                         ApiError* error);
// A structural tag (an object, or its JSON text) into *out; false with *error naming `field`.
bool ReadStructuralTag(const std::string& field, const nlohmann::ordered_json& v, structured::OutputConstraint* out,
                       ApiError* error);
// Compiles `c` (none: nothing) into params->grammar; false with a 400 naming the field `field`.
bool ApplyConstraint(const structured::OutputConstraint& c, const ApiContext& ctx, const char* field,
                     SamplingParams* params, ApiError* error);
// A chat's reply grammar (ChatFormat::ReplyGrammar: reasoning left free, then `content`'s
// constraint or the tool calls tool_choice asks for), compiled into params->grammar and advanced
// over the prompt's prefill. False with a 400 naming `field` (the content's field, or "tools").
bool ApplyReplyConstraint(const ChatSession& chat, const structured::OutputConstraint& content, const ApiContext& ctx,
                          const char* field, SamplingParams* params, ApiError* error);

}  // namespace ls::server

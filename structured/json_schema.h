// JSON Schema → Grammar: the values a schema accepts, written as JSON text. The subset: type
// (one or a list), properties / required / additionalProperties, enum / const, anyOf / oneOf
// (oneOf as anyOf: exclusivity is not checked), items / prefixItems / minItems / maxItems,
// strings with minLength / maxLength / pattern / format (date, time, date-time, email, uuid,
// ipv4), integer bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum), number bounds with
// integer values (minimum, maximum), $ref into $defs / definitions (recursion included), and the
// annotations (title, description, default, examples, ...). Anything else is an error naming the
// keyword and where it is. Properties come in the schema's order; a property an object does not
// declare is allowed only when additionalProperties says so (true or a schema). Whitespace between
// tokens is allowed but bounded (none, a space, or a line break and up to 32 characters of
// indentation), so that a model cannot loop on it.
// json_object (any JSON object) is JsonObjectGrammar.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "structured/grammar.h"

namespace ls::structured {

absl::StatusOr<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
absl::StatusOr<Grammar> JsonObjectGrammar();
// A rule of `b` matching the JSON values `schema` accepts (for grammars that embed them, such as
// tool calls' arguments). Errors name the unsupported keyword and its place ("at /properties/x").
// Whitespace between a value's tokens: flexible (none, a space, or a line break and indentation,
// bounded) or compact (none or one space: what `json.dumps` and a template's tojson write).
enum class JsonWhitespace { kFlexible, kCompact };
absl::StatusOr<Symbol> AddJsonSchema(GrammarBuilder& b, const nlohmann::ordered_json& schema, const std::string& name,
                                     JsonWhitespace ws = JsonWhitespace::kFlexible);

}  // namespace ls::structured

// application/x-www-form-urlencoded text: the dashboard's login form and the query strings of GET
// routes (the stored responses' input_items pages).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ls::server {

// Decodes urlencoded text ('+' is a space, %XX a byte); nullopt when a percent sign is not
// followed by two hex digits.
std::optional<std::string> FormDecode(std::string_view s);
// The value of `name` in a urlencoded form or query string, decoded; nullopt when absent or malformed.
std::optional<std::string> FormValue(std::string_view form, std::string_view name);

}  // namespace ls::server

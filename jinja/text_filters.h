// The text and number filters (text_filters.cc), for the filter registry in filters.cc.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"

namespace ls::jinja {

const std::vector<std::pair<std::string_view, FilterFn>>& TextFilters();

}  // namespace ls::jinja

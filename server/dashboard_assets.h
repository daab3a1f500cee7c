// The dashboard's files, compiled into the binary: server/dashboard/index.html (the page) and
// server/dashboard/login.html (the key form), embedded by cmake/embed_file.cmake at build time.
#pragma once

#include <cstddef>

namespace ls::server {

extern const char kDashboardHtml[];
extern const size_t kDashboardHtmlSize;
extern const char kLoginHtml[];
extern const size_t kLoginHtmlSize;

}  // namespace ls::server

// CorsPolicy: --allowed_origins parsing (what browsers send as Origin, or *), and the headers of
// replies and preflights for allowed and other origins.
#include "server/cors_policy.h"

#include <gtest/gtest.h>

#include <map>

namespace ls::server {
namespace {

std::map<std::string, std::string> AsMap(const CorsPolicy::Headers& h) { return {h.begin(), h.end()}; }

TEST(CorsPolicy, OffByDefaultAndWhenEmpty) {
  for (const char* spec : {"", " ", ","}) {
    auto p = CorsPolicy::Parse(spec);
    ASSERT_TRUE(p.ok()) << spec;
    EXPECT_FALSE(p->enabled());
    EXPECT_TRUE(p->ReplyHeaders("https://app.example").empty());
  }
  EXPECT_TRUE(CorsPolicy().ReplyHeaders("https://app.example").empty());
}

TEST(CorsPolicy, AListAllowsItsOriginsByName) {
  auto p = CorsPolicy::Parse("https://app.example, http://localhost:3000,http://[::1]:8080");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->enabled());
  auto h = AsMap(p->ReplyHeaders("http://localhost:3000"));
  EXPECT_EQ(h["Access-Control-Allow-Origin"], "http://localhost:3000");
  EXPECT_EQ(h["Vary"], "Origin");
  EXPECT_NE(h["Access-Control-Expose-Headers"].find("X-Request-Id"), std::string::npos);
  EXPECT_FALSE(h.contains("Access-Control-Allow-Credentials"));
  EXPECT_EQ(AsMap(p->ReplyHeaders("http://[::1]:8080"))["Access-Control-Allow-Origin"], "http://[::1]:8080");
  for (const char* other :
       {"", "https://evil.example", "http://localhost:3001", "https://app.example.evil", "http://app.example", "null"})
    EXPECT_TRUE(p->ReplyHeaders(other).empty()) << other;
}

TEST(CorsPolicy, StarAllowsEveryOriginWithoutVary) {
  auto p = CorsPolicy::Parse("*");
  ASSERT_TRUE(p.ok());
  auto h = AsMap(p->ReplyHeaders("https://anything.example"));
  EXPECT_EQ(h["Access-Control-Allow-Origin"], "*");
  EXPECT_FALSE(h.contains("Vary"));
  EXPECT_TRUE(p->ReplyHeaders("").empty());  // no Origin: not a cross-origin call
}

TEST(CorsPolicy, PreflightsSayWhatMaySend) {
  auto p = CorsPolicy::Parse("https://app.example");
  ASSERT_TRUE(p.ok());
  auto h = AsMap(p->PreflightHeaders("https://app.example", "authorization, content-type"));
  EXPECT_EQ(h["Access-Control-Allow-Origin"], "https://app.example");
  EXPECT_EQ(h["Access-Control-Allow-Headers"], "authorization, content-type");
  EXPECT_NE(h["Access-Control-Allow-Methods"].find("POST"), std::string::npos);
  EXPECT_NE(h["Access-Control-Allow-Methods"].find("DELETE"), std::string::npos);
  EXPECT_EQ(h["Access-Control-Max-Age"], "600");
  EXPECT_FALSE(AsMap(p->PreflightHeaders("https://app.example", "")).contains("Access-Control-Allow-Headers"));
  EXPECT_TRUE(p->PreflightHeaders("https://other.example", "content-type").empty());
}

TEST(CorsPolicy, BadEntriesAreRefusedByName) {
  for (const auto& [spec, named] :
       std::vector<std::pair<std::string, std::string>>{{"app.example", "'app.example'"},
                                                        {"https://app.example/", "'https://app.example/'"},
                                                        {"https://app.example/path", "'https://app.example/path'"},
                                                        {"ftp://app.example", "'ftp://app.example'"},
                                                        {"https://App.Example", "'https://App.Example'"},
                                                        {"https://app.example:80a", "'https://app.example:80a'"},
                                                        {"https://", "'https://'"},
                                                        {"https://user@app.example", "'https://user@app.example'"},
                                                        {"*, https://app.example", "list no others"}}) {
    auto p = CorsPolicy::Parse(spec);
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_NE(p.status().message().find("--allowed_origins"), std::string::npos) << p.status();
    EXPECT_NE(p.status().message().find(named), std::string::npos) << p.status();
  }
}

}  // namespace
}  // namespace ls::server

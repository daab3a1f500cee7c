// The stored responses' routes without a server: reading, paging the input items of, deleting and
// cancelling responses in a ResponseStore, and the errors that name what was wrong. (Cancelling a
// response that is still generating needs an engine: tests/server/test_responses_api.py.)
#include "server/stored_response_routes.h"

#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"
#include "server/responses_api.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

struct StoredCall : WebCall {
  StoredCall(std::string_view m, std::string_view p, std::string_view q = "") {
    method = m;
    path = p;
    query = q;
    authorization = "Bearer sk-right";
  }
};

std::string StoredResponse(const std::string& id, const std::string& status, bool background) {
  return ojson{{"id", id}, {"object", "response"}, {"status", status}, {"background", background}}.dump();
}

class StoredResponseRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.Put("resp_done", {StoredResponse("resp_done", "completed", false), "[]",
                             R"([{"id":"m1","type":"message"},{"id":"m2","type":"message"},)"
                             R"({"id":"m3","type":"message"}])"});
    store_.Put("resp_bg_done", {StoredResponse("resp_bg_done", "completed", true), "[]", "[]"});
    store_.Put("resp_bg_cancelled", {StoredResponse("resp_bg_cancelled", "cancelled", true), "[]", "[]"});
  }
  ApiKeys keys_ = ApiKeys::FromList({"sk-right"});
  ResponseStore store_{1 << 20};
  StoredResponseRoutes routes_{&keys_, nullptr, &store_};
};

TEST_F(StoredResponseRoutesTest, ServesOnlyPathsBelowThePrefix) {
  EXPECT_TRUE(StoredResponseRoutes::Serves("/v1/responses/resp_x"));
  EXPECT_TRUE(StoredResponseRoutes::Serves("/v1/responses/resp_x/cancel"));
  EXPECT_FALSE(StoredResponseRoutes::Serves("/v1/responses"));
  EXPECT_FALSE(StoredResponseRoutes::Serves("/v1/responses/"));
  EXPECT_FALSE(StoredResponseRoutes::Serves("/v1/chat/completions"));
}

TEST_F(StoredResponseRoutesTest, EveryRouteAsksForAKey) {
  for (const auto& [method, path] : {std::pair{"GET", "/v1/responses/resp_done"},
                                     {"GET", "/v1/responses/resp_done/input_items"},
                                     {"POST", "/v1/responses/resp_done/cancel"},
                                     {"DELETE", "/v1/responses/resp_done"}}) {
    StoredCall call(method, path);
    call.authorization = "Bearer sk-wrong";
    const WebReply r = routes_.Handle(call);
    ASSERT_TRUE(r.error) << method << " " << path;
    EXPECT_EQ(r.error->http_status, 401) << method << " " << path;
  }
  EXPECT_TRUE(store_.Get("resp_done")) << "a refused DELETE removes nothing";
}

TEST_F(StoredResponseRoutesTest, GetReturnsTheStoredResponseAndDeleteRemovesIt) {
  WebReply r = routes_.Handle(StoredCall("GET", "/v1/responses/resp_done"));
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, StoredResponse("resp_done", "completed", false));
  r = routes_.Handle(StoredCall("DELETE", "/v1/responses/resp_done"));
  ASSERT_FALSE(r.error);
  EXPECT_EQ(ojson::parse(r.body), (ojson{{"id", "resp_done"}, {"object", "response.deleted"}, {"deleted", true}}));
  EXPECT_FALSE(store_.Get("resp_done"));
  for (const char* method : {"GET", "DELETE"}) {
    r = routes_.Handle(StoredCall(method, "/v1/responses/resp_done"));
    ASSERT_TRUE(r.error) << method;
    EXPECT_EQ(r.error->http_status, 404);
    EXPECT_NE(r.error->message.find("'resp_done' is not stored here"), std::string::npos) << r.error->message;
  }
}

TEST_F(StoredResponseRoutesTest, InputItemsArePagedByTheQuery) {
  WebReply r = routes_.Handle(StoredCall("GET", "/v1/responses/resp_done/input_items", "order=asc&limit=2"));
  ASSERT_FALSE(r.error);
  ojson page = ojson::parse(r.body);
  ASSERT_EQ(page["data"].size(), 2u);
  EXPECT_EQ(page["data"][0]["id"], "m1");
  EXPECT_EQ(page["has_more"], true);
  r = routes_.Handle(StoredCall("GET", "/v1/responses/resp_done/input_items", "after=m2&order=asc"));
  ASSERT_FALSE(r.error);
  page = ojson::parse(r.body);
  ASSERT_EQ(page["data"].size(), 1u);
  EXPECT_EQ(page["data"][0]["id"], "m3");
  r = routes_.Handle(StoredCall("GET", "/v1/responses/resp_done/input_items", "order=sideways"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->http_status, 400);
  EXPECT_EQ(r.error->param, "order");
  r = routes_.Handle(StoredCall("GET", "/v1/responses/resp_gone/input_items"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->http_status, 404);
}

TEST_F(StoredResponseRoutesTest, OnlyARunningBackgroundResponseCanBeCancelled) {
  WebReply r = routes_.Handle(StoredCall("POST", "/v1/responses/resp_done/cancel"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->http_status, 400);
  EXPECT_NE(r.error->message.find("not created with background: true"), std::string::npos) << r.error->message;
  r = routes_.Handle(StoredCall("POST", "/v1/responses/resp_bg_done/cancel"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->http_status, 400);
  EXPECT_NE(r.error->message.find("already finished (status completed)"), std::string::npos) << r.error->message;
  r = routes_.Handle(StoredCall("POST", "/v1/responses/resp_bg_cancelled/cancel"));
  ASSERT_FALSE(r.error) << "cancelling twice answers the cancelled response";
  EXPECT_EQ(ojson::parse(r.body)["status"], "cancelled");
  r = routes_.Handle(StoredCall("POST", "/v1/responses/resp_gone/cancel"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->http_status, 404);
}

TEST_F(StoredResponseRoutesTest, WrongMethodsAndDeeperPathsAreRefusedByName) {
  const auto status = [&](const char* method, const char* path) {
    const WebReply r = routes_.Handle(StoredCall(method, path));
    return r.error ? r.error->http_status : 200;
  };
  EXPECT_EQ(status("POST", "/v1/responses/resp_done"), 405);
  EXPECT_EQ(status("DELETE", "/v1/responses/resp_done/input_items"), 405);
  EXPECT_EQ(status("GET", "/v1/responses/resp_bg_done/cancel"), 405);
  EXPECT_EQ(status("GET", "/v1/responses/resp_done/extra/input_items"), 404);
  EXPECT_EQ(status("GET", "/v1/responses/resp_done/other"), 404);
  const WebReply r = routes_.Handle(StoredCall("PUT", "/v1/responses/resp_done"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->message, "use GET or DELETE for /v1/responses/{id}");
  EXPECT_TRUE(store_.Get("resp_done")) << "nothing refused changes the store";
}

TEST(StillRunningTest, OnlyQueuedAndInProgressAreRunning) {
  EXPECT_TRUE(StillRunning(ojson{{"status", "queued"}}));
  EXPECT_TRUE(StillRunning(ojson{{"status", "in_progress"}}));
  for (const char* s : {"completed", "incomplete", "cancelled", "failed"})
    EXPECT_FALSE(StillRunning(ojson{{"status", s}}));
  EXPECT_FALSE(StillRunning(ojson::object()));
}

}  // namespace
}  // namespace ls::server

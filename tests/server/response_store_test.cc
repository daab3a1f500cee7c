// The Responses API's store keeps what it was given until its byte budget runs out, then drops
// the least recently used responses first; deleted and dropped responses are gone.
#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace ls::server {
namespace {

// An entry of exactly `bytes` bytes under a 4-character id.
ResponseStore::Entry EntryOf(size_t bytes, char fill) { return {std::string(bytes - 4 - 4, fill), "[]", "[]"}; }

TEST(ResponseStoreTest, KeepsReturnsAndDeletes) {
  ResponseStore store(1000);
  EXPECT_TRUE(store.enabled());
  store.Put("r001", {"{\"id\":\"r001\"}", "[{\"role\":\"user\"}]", "[{\"type\":\"message\"}]"});
  auto e = store.Get("r001");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->response, "{\"id\":\"r001\"}");
  EXPECT_EQ(e->conversation, "[{\"role\":\"user\"}]");
  EXPECT_EQ(e->input_items, "[{\"type\":\"message\"}]");
  EXPECT_FALSE(store.Get("r002").has_value());
  EXPECT_TRUE(store.Erase("r001"));
  EXPECT_FALSE(store.Erase("r001"));
  EXPECT_FALSE(store.Get("r001").has_value());
  EXPECT_EQ(store.bytes(), 0u);
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResponseStoreTest, DropsTheLeastRecentlyUsedPastItsBudget) {
  ResponseStore store(1000);
  store.Put("r001", EntryOf(300, 'a'));
  store.Put("r002", EntryOf(300, 'b'));
  store.Put("r003", EntryOf(300, 'c'));
  EXPECT_EQ(store.bytes(), 900u);
  ASSERT_TRUE(store.Get("r001").has_value());  // now the most recently used: r002 is the oldest
  store.Put("r004", EntryOf(300, 'd'));
  EXPECT_FALSE(store.Get("r002").has_value());
  for (const char* id : {"r001", "r003", "r004"}) EXPECT_TRUE(store.Get(id).has_value()) << id;
  EXPECT_EQ(store.dropped(), 1u);
  EXPECT_EQ(store.bytes(), 900u);
  // Replacing an entry counts its new size only.
  store.Put("r003", EntryOf(100, 'e'));
  EXPECT_EQ(store.bytes(), 700u);
  EXPECT_EQ(store.Get("r003")->response, std::string(92, 'e'));
  // One entry larger than the whole budget is not kept, and drops nothing.
  store.Put("r005", EntryOf(1001, 'f'));
  EXPECT_FALSE(store.Get("r005").has_value());
  EXPECT_EQ(store.size(), 3u);
  // One that needs every byte drops all the others.
  store.Put("r006", EntryOf(1000, 'g'));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.dropped(), 4u);
  EXPECT_EQ(store.bytes(), 1000u);
}

TEST(ResponseStoreTest, ReplaceKeepsOnlyWhatIsStillThere) {
  ResponseStore store(1000);
  EXPECT_FALSE(store.Replace("r001", EntryOf(100, 'a')));  // never stored
  EXPECT_FALSE(store.Get("r001").has_value());
  store.Put("r001", EntryOf(100, 'a'));
  EXPECT_TRUE(store.Replace("r001", EntryOf(200, 'b')));
  EXPECT_EQ(store.Get("r001")->response, std::string(192, 'b'));
  EXPECT_EQ(store.bytes(), 200u);
  ASSERT_TRUE(store.Erase("r001"));
  EXPECT_FALSE(store.Replace("r001", EntryOf(100, 'c')));  // deleted meanwhile: stays gone
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResponseStoreTest, ABudgetOfZeroKeepsNothing) {
  ResponseStore store(0);
  EXPECT_FALSE(store.enabled());
  store.Put("r001", EntryOf(10, 'a'));
  EXPECT_FALSE(store.Get("r001").has_value());
  EXPECT_EQ(store.size(), 0u);
}

}  // namespace
}  // namespace ls::server

// ResponseStore: the Responses API's stored responses. A response created with store: true (the
// API's default) is kept here, as JSON text, with the conversation it ended, so that
// GET /v1/responses/{id} returns it (and /input_items its input), DELETE removes it, and a later
// request's previous_response_id continues that conversation. Memory is bounded by bytes: past the budget,
// the least recently used responses go first. Owned by the HTTP server; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/mutex.h"

namespace ls::server {

class ResponseStore {
 public:
  struct Entry {
    std::string response;      // the Response object, as returned
    std::string conversation;  // the chat messages up to and including its reply (JSON array)
    std::string input_items;   // the request's input as Responses items, with ids (JSON array)
  };

  // max_bytes 0: nothing is stored (store: true is refused).
  explicit ResponseStore(size_t max_bytes) : max_bytes_(max_bytes) {}

  bool enabled() const { return max_bytes_ > 0; }
  // Keeps `e` under `id` (replacing an entry of that id), then drops the least recently used
  // entries until the store fits its budget; an entry larger than the whole budget is not kept.
  void Put(const std::string& id, Entry e);
  // Put, but only where `id` is stored now (a response deleted or dropped meanwhile stays gone);
  // false when it was not.
  bool Replace(const std::string& id, Entry e);
  // The entry of `id`, now the most recently used; nullopt when it was never stored, was deleted
  // or was dropped for room.
  std::optional<Entry> Get(const std::string& id);
  // Removes `id`; false when it was not there.
  bool Erase(const std::string& id);

  size_t bytes() const;
  size_t size() const;
  uint64_t dropped() const;  // entries dropped for room since the start

 private:
  using Item = std::pair<std::string, Entry>;
  static size_t Bytes(const Item& item) {
    return item.first.size() + item.second.response.size() + item.second.conversation.size() +
           item.second.input_items.size();
  }
  void EraseLocked(std::list<Item>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PutLocked(const std::string& id, Entry e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  mutable Mutex mu_;
  std::list<Item> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<std::string, std::list<Item>::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ls::server

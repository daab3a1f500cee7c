// ResponseStore: a byte-bounded least-recently-used map from response id to its stored JSON.
#include "server/response_store.h"

namespace ls::server {

void ResponseStore::EraseLocked(std::list<Item>::iterator it) {
  bytes_ -= Bytes(*it);
  index_.erase(it->first);
  lru_.erase(it);
}

void ResponseStore::Put(const std::string& id, Entry e) {
  MutexLock lock(&mu_);
  PutLocked(id, std::move(e));
}

bool ResponseStore::Replace(const std::string& id, Entry e) {
  MutexLock lock(&mu_);
  if (!index_.count(id)) return false;
  PutLocked(id, std::move(e));
  return true;
}

void ResponseStore::PutLocked(const std::string& id, Entry e) {
  if (auto found = index_.find(id); found != index_.end()) EraseLocked(found->second);
  Item item{id, std::move(e)};
  const size_t size = Bytes(item);
  if (size > max_bytes_) return;
  while (bytes_ + size > max_bytes_) {
    EraseLocked(std::prev(lru_.end()));
    ++dropped_;
  }
  lru_.push_front(std::move(item));
  index_[id] = lru_.begin();
  bytes_ += size;
}

std::optional<ResponseStore::Entry> ResponseStore::Get(const std::string& id) {
  MutexLock lock(&mu_);
  auto found = index_.find(id);
  if (found == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, found->second);
  return found->second->second;
}

bool ResponseStore::Erase(const std::string& id) {
  MutexLock lock(&mu_);
  auto found = index_.find(id);
  if (found == index_.end()) return false;
  EraseLocked(found->second);
  return true;
}

size_t ResponseStore::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

uint64_t ResponseStore::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

size_t ResponseStore::size() const {
  MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace ls::server

// Channel: the engine's outputs for one HTTP request, handed from the engine's loop thread to the
// connection's strand. The engine calls each choice's callback; the connection's coroutine waits
// for what has arrived. Shared by the callbacks and the request in flight (shared_ptr).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "engine/request.h"

namespace ls::server {

class Channel : public std::enable_shared_from_this<Channel> {
 public:
  explicit Channel(boost::asio::any_io_executor ex) : timer_(ex) {}
  // The callback of choice `index`: queues its outputs and wakes the waiting coroutine.
  OutputCallback Callback(int32_t index) {
    auto self = shared_from_this();
    return [self, index](RequestOutput o) {
      {
        MutexLock lock(&self->mu_);
        self->items_.emplace_back(index, std::move(o));
      }
      boost::asio::post(self->timer_.get_executor(), [self] { self->timer_.cancel(); });
    };
  }
  // Every output queued since the last call, oldest first, as (choice index, output); waits for one.
  boost::asio::awaitable<std::vector<std::pair<int32_t, RequestOutput>>> Wait() {
    for (;;) {
      {
        MutexLock lock(&mu_);
        if (!items_.empty()) {
          std::vector<std::pair<int32_t, RequestOutput>> out(std::make_move_iterator(items_.begin()),
                                                             std::make_move_iterator(items_.end()));
          items_.clear();
          co_return out;
        }
      }
      timer_.expires_at(std::chrono::steady_clock::time_point::max());
      boost::system::error_code ec;
      co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    }
  }

 private:
  Mutex mu_;
  std::deque<std::pair<int32_t, RequestOutput>> items_ ABSL_GUARDED_BY(mu_);
  boost::asio::steady_timer timer_;
};

}  // namespace ls::server

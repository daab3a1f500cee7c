// Generation: a generation request of the HTTP API in flight, shared by the connection that
// serves it and, for a background Response, by the coroutine that collects it after the request
// was answered: what was asked, its engine requests and where their outputs arrive.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_protocol.h"
#include "server/output_channel.h"
#include "server/request_tally.h"
#include "server/responses_api.h"

namespace ls::server {

struct Generation {
  Generation(ParsedRequest parsed, std::string request_id, boost::asio::any_io_executor ex,
             std::optional<ResponsesRequest> responses_request = std::nullopt)
      : r(std::move(parsed)),
        responses(std::move(responses_request)),
        id(std::move(request_id)),
        created(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                    .count()),
        channel(std::make_shared<Channel>(ex)),
        tally(r, id) {}
  ParsedRequest r;
  const std::optional<ResponsesRequest> responses;  // a /v1/responses request (its reply is a Response)
  const std::string id;
  const int64_t created;
  std::shared_ptr<Channel> channel;
  std::shared_ptr<std::vector<std::string>> ids = std::make_shared<std::vector<std::string>>();  // engine ids
  std::shared_ptr<bool> done = std::make_shared<bool>(false);  // every output is in: stop watching the socket
  RequestTally tally;
};

}  // namespace ls::server

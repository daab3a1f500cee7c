// RequestTally: what an HTTP generation request adds up to from its choices' final outputs — the
// usage it reports (prompt tokens of every prompt, completion tokens of every choice, cached
// tokens once per prompt), its log line's latencies, and whether it failed. Owned by the request
// in flight; not thread-safe (the connection's strand feeds it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/request.h"
#include "server/api_context.h"
#include "server/api_error.h"
#include "server/openai_protocol.h"

namespace ls::server {

class RequestTally {
 public:
  // `r` must outlive the tally.
  RequestTally(const ParsedRequest& r, const std::string& id);

  // What an output says went wrong: an engine error (500) or the server's own cancellation as it
  // shuts down, which carries its reason (503); a client's cancellation carries none and is no
  // failure.
  static std::optional<ApiError> FailureOf(const RequestOutput& o);

  // Choice `i` finished with output `o`.
  void Finished(int32_t i, const RequestOutput& o);
  bool all_finished() const { return finished_ == r_.num_choices(); }

  Usage usage;
  RequestLogEntry log;
  std::optional<ApiError> failure;  // the last failing choice's

 private:
  const ParsedRequest& r_;
  int32_t finished_ = 0;
};

}  // namespace ls::server

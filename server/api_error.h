// ApiError: a client-facing error of either front end — HTTP status, OpenAI error type, message
// and the offending request field — and the one mapping from the absl::Status codes the engine
// and the chat layer return to HTTP statuses and gRPC codes, shared by both front ends.
#pragma once

#include <grpcpp/support/status.h>

#include <exception>
#include <string>

#include "absl/status/status.h"

namespace ls::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the request field at fault, if one
  std::string type = "invalid_request_error";
};

// How one absl::StatusCode reaches clients.
struct StatusMapping {
  int http_status;
  const char* http_type;  // OpenAI's error "type"
  grpc::StatusCode grpc_code;
};
StatusMapping MapStatusCode(absl::StatusCode code);

// `st` (not OK) as the HTTP API's error, naming `param` when given.
ApiError ToApiError(const absl::Status& st, std::string param = "");
// `st` as a gRPC status (OK stays OK).
grpc::Status ToGrpcStatus(const absl::Status& st);
// A client error as a gRPC status: the code its HTTP status stands for, its message.
grpc::Status ToGrpcStatus(const ApiError& e);

// An exception that escaped a request's handler: a fault of the server's, never the client's (bad
// input is refused by name before it could throw). Both front ends answer it as this Internal
// status, which names `where` (the route or method) and what was thrown.
absl::Status UnexpectedFailure(const std::string& where, const std::exception_ptr& thrown);

}  // namespace ls::server

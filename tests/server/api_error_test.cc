// The one status mapping both front ends use: each engine error code reaches HTTP and gRPC
// clients as the same kind of error.
#include "server/api_error.h"

#include <gtest/gtest.h>

namespace ls::server {
namespace {

TEST(ApiErrorTest, EngineRefusalsMapToTheSameKindOnBothFrontEnds) {
  struct Case {
    absl::Status status;
    int http;
    const char* type;
    grpc::StatusCode grpc;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("top_p must be in (0, 1]"), 400, "invalid_request_error",
       grpc::StatusCode::INVALID_ARGUMENT},
      {absl::ResourceExhaustedError("the waiting queue is full"), 429, "rate_limit_error",
       grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::UnavailableError("the server is shutting down"), 503, "service_unavailable",
       grpc::StatusCode::UNAVAILABLE},
      {absl::AlreadyExistsError("request id 'x' is already in use"), 409, "invalid_request_error",
       grpc::StatusCode::ALREADY_EXISTS},
      {absl::InternalError("model step failed"), 500, "server_error", grpc::StatusCode::INTERNAL},
  };
  for (const Case& c : cases) {
    const ApiError e = ToApiError(c.status, "field");
    EXPECT_EQ(e.http_status, c.http) << c.status;
    EXPECT_EQ(e.type, c.type) << c.status;
    EXPECT_EQ(e.message, c.status.message());
    EXPECT_EQ(e.param, "field");
    const grpc::Status g = ToGrpcStatus(c.status);
    EXPECT_EQ(g.error_code(), c.grpc) << c.status;
    EXPECT_EQ(g.error_message(), c.status.message());
    EXPECT_EQ(ToGrpcStatus(e).error_code(), c.grpc) << "an ApiError keeps its kind on gRPC: " << c.status;
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace ls::server

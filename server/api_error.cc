// The status mapping table.
#include "server/api_error.h"

#include "absl/strings/str_cat.h"
#include "base/exception_message.h"

namespace ls::server {

StatusMapping MapStatusCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return {200, "", grpc::StatusCode::OK};
    case absl::StatusCode::kResourceExhausted:
      return {429, "rate_limit_error", grpc::StatusCode::RESOURCE_EXHAUSTED};
    case absl::StatusCode::kUnavailable:
      return {503, "service_unavailable", grpc::StatusCode::UNAVAILABLE};
    case absl::StatusCode::kAlreadyExists:
      return {409, "invalid_request_error", grpc::StatusCode::ALREADY_EXISTS};
    case absl::StatusCode::kNotFound:
      return {404, "not_found_error", grpc::StatusCode::NOT_FOUND};
    case absl::StatusCode::kFailedPrecondition:
      return {400, "invalid_request_error", grpc::StatusCode::FAILED_PRECONDITION};
    case absl::StatusCode::kUnauthenticated:
      return {401, "authentication_error", grpc::StatusCode::UNAUTHENTICATED};
    case absl::StatusCode::kInternal:
      return {500, "server_error", grpc::StatusCode::INTERNAL};
    default:
      return {400, "invalid_request_error", grpc::StatusCode::INVALID_ARGUMENT};
  }
}

ApiError ToApiError(const absl::Status& st, std::string param) {
  const StatusMapping m = MapStatusCode(st.code());
  return ApiError{m.http_status, std::string(st.message()), std::move(param), m.http_type};
}

grpc::Status ToGrpcStatus(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(MapStatusCode(st.code()).grpc_code, std::string(st.message()));
}

grpc::Status ToGrpcStatus(const ApiError& e) {
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
  for (absl::StatusCode c :
       {absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnavailable, absl::StatusCode::kAlreadyExists,
        absl::StatusCode::kNotFound, absl::StatusCode::kUnauthenticated, absl::StatusCode::kInternal}) {
    if (MapStatusCode(c).http_status == e.http_status) code = MapStatusCode(c).grpc_code;
  }
  return grpc::Status(code, e.message);
}

absl::Status UnexpectedFailure(const std::string& where, const std::exception_ptr& thrown) {
  return absl::InternalError(absl::StrCat("internal error while serving ", where, ": ", ExceptionMessage(thrown)));
}

}  // namespace ls::server

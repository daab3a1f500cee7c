// Conversion of gRPC GenerateRequest messages into engine Requests (prompt from text, token ids
// or chat; sampling fields), with INVALID_ARGUMENT errors that name the field. Used by the gRPC
// service and its fuzz target.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "engine/request.h"
#include "latentserve/v1/generation.pb.h"
#include "server/api_context.h"

namespace ls::server {

// Fills *out (id assigned when the request has none); sampling values are range-checked by the
// engine on submission.
grpc::Status GrpcToEngineRequest(const latentserve::v1::GenerateRequest& req, const ApiContext& ctx, ls::Request* out);
// Renders a chat with the model's template.
grpc::Status RenderGrpcChat(const latentserve::v1::Chat& chat, const ApiContext& ctx, std::string* text);

}  // namespace ls::server

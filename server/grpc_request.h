// Conversion of gRPC requests into engine Requests (prompt from text, token ids or chat; sampling
// fields, with the model's generation defaults where they are unset) and chat sessions, with
// INVALID_ARGUMENT errors that name the field. A chat goes through the same reading and rendering
// as /v1/chat/completions (server/chat_request.h). Used by the gRPC service and its fuzz target.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "engine/request.h"
#include "latentserve/v1/generation.pb.h"
#include "server/api_context.h"
#include "server/chat_request.h"

namespace ls::server {

// INVALID_ARGUMENT with a message naming what was wrong.
inline grpc::Status InvalidArgument(const std::string& msg) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, msg);
}

// Fills *out (id assigned when the request has none); sampling values are range-checked by the
// engine on submission. A chat prompt's session (for its reply's parser) goes to *chat when given.
grpc::Status GrpcToEngineRequest(const latentserve::v1::GenerateRequest& req, const ApiContext& ctx, ls::Request* out,
                                 std::shared_ptr<const ChatSession>* chat = nullptr);
// Reads and renders a chat; `for_tokenize`: only the prompt is wanted (tools render even when no
// parser reads calls).
grpc::Status RenderGrpcChat(const latentserve::v1::Chat& chat, const ApiContext& ctx,
                            std::optional<bool> add_special_tokens, bool for_tokenize,
                            std::shared_ptr<const ChatSession>* session);

}  // namespace ls::server

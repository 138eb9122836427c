// POST /v1/chat/completions and POST /v1/completions (serving.md §3.1, §3.2): the request body
// becomes engine requests (one row per prompt and choice), and their results or streamed chunks
// become the OpenAI response objects. The engine thread only queues bytes on the Exchange; it
// never touches a socket.
#pragma once

#include <memory>

#include "server/http.h"
#include "server/serve_context.h"

namespace wick::server {

// Parse, submit and answer a chat completion. Throws ApiError for a request refused before any
// row runs (bad fields, queue full, draining); later failures are answered through `ex`.
void handle_chat_completions(ServeContext& ctx, const HttpRequest& req,
                             const std::shared_ptr<Exchange>& ex);
void handle_completions(ServeContext& ctx, const HttpRequest& req,
                        const std::shared_ptr<Exchange>& ex);

}  // namespace wick::server

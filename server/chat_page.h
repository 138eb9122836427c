// The chat page served at GET / : one static HTML page, embedded in the binary, that streams
// from /v1/chat/completions (no build step, no framework). It asks for the API key when the
// server wants one and keeps it in the tab's sessionStorage.
#pragma once

#include <string_view>

namespace wick::server {

std::string_view chat_page_html();

}  // namespace wick::server

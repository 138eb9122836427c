// The RWKV World chat format (docs/tasks.md §2.6; the convention of ChatRWKV API_DEMO_CHAT.py,
// RWKV-Runner and the RWKV-X SFT data): a user turn is fed as "User: {message}\n\nAssistant:",
// the model answers " {reply}\n\n", and generation stops on the stop string "\n\n". Pair it with
// SamplingConfig::chatrwkv_chat().
#pragma once

#include <string>
#include <string_view>

namespace wick {

// The stop string that ends a reply.
inline constexpr std::string_view kChatStopString = "\n\n";

// ChatRWKV's canned first exchange, for a chat that starts without an initial state.
extern const std::string_view kChatIntro;

// Message cleaning before feeding, in order: "\r\n" -> "\n", strip leading and trailing
// whitespace, collapse every run of "\n" into one (a blank line would read as the end of a turn).
std::string chat_clean_message(std::string_view message);

// "User: " + chat_clean_message(message) + "\n\nAssistant:" (no trailing space).
std::string chat_user_turn(std::string_view message);

}  // namespace wick

// How chat messages become one prompt (serving.md §3.1). The default is the RWKV World chat
// format of ChatRWKV and RWKV-Runner:
//
//   System: {system}\n\nUser: {user}\n\nAssistant: {reply}\n\nUser: {user}\n\nAssistant:
//
// Each message's text is cleaned as ChatRWKV does (wick/chat.h chat_clean_message: "\r\n" ->
// "\n", stripped, every run of newlines collapsed to one, so no message can contain the turn
// separator); generation stops on "\n\n" and on "\nUser:"; the model's answer begins with a space
// after "Assistant:", which the reply drops. When the last message is the assistant's, the prompt
// ends with its text (no separator, no "Assistant:"), so the model continues that message.
//
// `wick serve --chat-template FILE` replaces it with a JSON file (every key optional; the
// defaults are the World format above):
//   {"roles": {"system": "System", "user": "User", "assistant": "Assistant"},
//    "record": "{role}: {content}",   // one message; {role} and {content} are replaced
//    "sep": "\n\n",                   // after each message
//    "prefix": "Assistant:",          // after the last separator: where the reply starts
//    "stop": ["\n\n", "\nUser:"],     // stop strings of every chat request (plus the request's)
//    "clean": true,                   // ChatRWKV's message cleaning
//    "strip_reply_space": true}       // drop one leading space of the reply
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace wick::server {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant" ("developer" reads as "system")
  std::string content;  // the text
};

struct RenderedChat {
  std::string prompt;
  std::vector<size_t> boundaries;  // byte offsets where each message (with its separator) ends
  bool continues = false;  // the last message is the assistant's: the reply continues it (no
                           // space to strip)
};

struct ChatTemplate {
  std::string system_name = "System", user_name = "User", assistant_name = "Assistant";
  std::string record = "{role}: {content}";
  std::string sep = "\n\n";
  std::string prefix = "Assistant:";
  std::vector<std::string> stop = {"\n\n", "\nUser:"};
  bool clean = true;
  bool strip_reply_space = true;

  // Reads a template file (format above). Throws FileError (unreadable) and InputError naming the
  // key (not JSON, a key of the wrong type, a record without {content}, an empty stop string).
  static ChatTemplate load(const std::string& path);

  // The prompt of `messages` (non-empty; roles already checked). Throws InputError for an
  // unknown role.
  RenderedChat render(const std::vector<ChatMessage>& messages) const;
};

}  // namespace wick::server

#include "wick/chat.h"

namespace wick {

const std::string_view kChatIntro =
    "User: hi\n\nAssistant: Hi. I am your assistant and I will provide expert full response in "
    "full details. Please feel free to ask any question and I will always answer it.\n\n";

std::string chat_clean_message(std::string_view message) {
  std::string s;
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] == '\r' && i + 1 < message.size() && message[i + 1] == '\n') continue;
    s += message[i];
  }
  constexpr const char* kSpace = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string::npos) return "";
  s = s.substr(b, s.find_last_not_of(kSpace) - b + 1);
  std::string out;
  for (char c : s)
    if (!(c == '\n' && !out.empty() && out.back() == '\n')) out += c;
  return out;
}

std::string chat_user_turn(std::string_view message) {
  return "User: " + chat_clean_message(message) + "\n\nAssistant:";
}

}  // namespace wick

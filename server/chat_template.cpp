#include "server/chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wick/chat.h"
#include "wick/errors.h"

namespace wick::server {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

std::string str_key(const nlohmann::json& j, const char* key, const std::string& path,
                    std::string fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_string())
    throw InputError(path + ": \"" + key + "\" must be a string, found " + it->type_name());
  return it->get<std::string>();
}

bool bool_key(const nlohmann::json& j, const char* key, const std::string& path, bool fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_boolean())
    throw InputError(path + ": \"" + key + "\" must be true or false, found " + it->type_name());
  return it->get<bool>();
}

}  // namespace

ChatTemplate ChatTemplate::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot read the chat template (--chat-template)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InputError(path + ": expected a JSON object of template keys");
  ChatTemplate t;
  if (auto it = j.find("roles"); it != j.end()) {
    if (!it->is_object()) throw InputError(path + ": \"roles\" must be an object");
    t.system_name = str_key(*it, "system", path, t.system_name);
    t.user_name = str_key(*it, "user", path, t.user_name);
    t.assistant_name = str_key(*it, "assistant", path, t.assistant_name);
  }
  t.record = str_key(j, "record", path, t.record);
  if (t.record.find("{content}") == std::string::npos)
    throw InputError(path + ": \"record\" must contain {content}, found \"" + t.record + "\"");
  t.sep = str_key(j, "sep", path, t.sep);
  t.prefix = str_key(j, "prefix", path, t.prefix);
  if (auto it = j.find("stop"); it != j.end()) {
    if (!it->is_array()) throw InputError(path + ": \"stop\" must be an array of strings");
    t.stop.clear();
    for (const auto& s : *it) {
      if (!s.is_string() || s.get<std::string>().empty())
        throw InputError(path + ": \"stop\" must hold non-empty strings");
      t.stop.push_back(s.get<std::string>());
    }
  }
  // Without their own keys, the reply prefix and the turn stops follow the roles and separator.
  if (j.find("prefix") == j.end()) t.prefix = t.assistant_name + ":";
  if (j.find("stop") == j.end()) {
    t.stop.clear();
    if (!t.sep.empty()) t.stop.push_back(t.sep);
    t.stop.push_back("\n" + t.user_name + ":");
  }
  t.clean = bool_key(j, "clean", path, t.clean);
  t.strip_reply_space = bool_key(j, "strip_reply_space", path, t.strip_reply_space);
  return t;
}

RenderedChat ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  RenderedChat out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string* name = nullptr;
    if (m.role == "system" || m.role == "developer") {
      name = &system_name;
    } else if (m.role == "user") {
      name = &user_name;
    } else if (m.role == "assistant") {
      name = &assistant_name;
    } else {
      throw InputError("unknown chat role '" + m.role + "'");
    }
    const std::string content = clean ? chat_clean_message(m.content) : m.content;
    std::string rec = record;
    replace_all(rec, "{role}", *name);
    const bool last_assistant = i + 1 == messages.size() && m.role == "assistant";
    if (last_assistant) {
      // The model continues this message: the record up to and including its content.
      const size_t at = rec.find("{content}");
      out.prompt += rec.substr(0, at) + content;
      out.continues = true;
      return out;
    }
    replace_all(rec, "{content}", content);
    out.prompt += rec + sep;
    out.boundaries.push_back(out.prompt.size());
  }
  out.prompt += prefix;
  return out;
}

}  // namespace wick::server

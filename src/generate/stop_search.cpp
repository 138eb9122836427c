#include "generate/stop_search.h"

#include <algorithm>

#include "base/utf8.h"
#include "wick/generation.h"

namespace wick {
namespace gen {

StopHit find_stop(std::string_view bytes, size_t from, const std::vector<std::string>& stops) {
  StopHit best;
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty() || from > bytes.size()) continue;
    const size_t p = bytes.find(stops[i], from);
    if (p != std::string_view::npos && (!best.found() || p < best.pos)) best = StopHit{p, i};
  }
  return best;
}

size_t partial_stop_start(std::string_view bytes, const std::vector<std::string>& stops) {
  size_t best = bytes.size();
  for (const std::string& s : stops) {
    if (s.size() < 2) continue;
    // Longest suffix first: the first match is this stop string's earliest start.
    for (size_t len = std::min(s.size() - 1, bytes.size()); len > 0; --len) {
      const size_t start = bytes.size() - len;
      if (start >= best) break;  // no earlier start than one already found
      if (bytes.compare(start, len, s, 0, len) == 0) {
        best = start;
        break;
      }
    }
  }
  return best;
}

}  // namespace gen

size_t utf8_boundary(std::string_view bytes, size_t limit) {
  // Hold back only a character that more bytes can still complete (the rule of StreamDecoder).
  return base::utf8::truncated_tail_start(bytes.substr(0, std::min(limit, bytes.size())));
}

}  // namespace wick

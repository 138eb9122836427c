#include "generate/stop_search.h"

#include <algorithm>

#include "wick/generate.h"

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
  const size_t end = std::min(limit, bytes.size());
  if (end == 0) return 0;
  // Walk back over at most 4 bytes to the lead byte of the last code point.
  for (size_t steps = 0; steps < 4 && steps < end; ++steps) {
    const size_t i = end - 1 - steps;
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) return i + 1;             // ASCII: whatever follows it is incomplete
    if ((b & 0xC0) == 0x80) continue;       // continuation byte: keep walking
    size_t need = 0;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    else return end;                        // 0xF8..0xFF: no valid lead; nothing to wait for
    return end - i >= need ? end : i;       // complete sequence, or hold from its lead byte
  }
  return end;  // four continuation bytes: no lead can complete them
}

}  // namespace wick

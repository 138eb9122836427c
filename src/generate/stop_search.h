// Byte-stream helpers of the generation loop (docs/tasks.md §2.3-2.4).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace wick::gen {

struct StopHit {
  size_t pos = std::string_view::npos;  // start of the match in the byte stream; npos = none
  size_t index = 0;                     // which stop string matched
  bool found() const { return pos != std::string_view::npos; }
};

// The earliest occurrence, starting at or after `from`, of any of `stops` in `bytes`; on equal
// starts the string listed first wins. Empty stop strings never match.
StopHit find_stop(std::string_view bytes, size_t from, const std::vector<std::string>& stops);

// Where the longest tail of `bytes` that could still grow into one of `stops` begins: the start
// of the longest suffix that is a proper prefix of a stop string (bytes.size() when there is
// none). Streaming holds back exactly the bytes from there on. Looks at no more than the longest
// stop string's length - 1 bytes.
size_t partial_stop_start(std::string_view bytes, const std::vector<std::string>& stops);

}  // namespace wick::gen

// A one-line progress bar for long commands (ppl, kl): label, bar, done/total, percentage, rate
// and time left, redrawn in place with '\r' at most about 10 times a second and closed with a
// newline. It draws only on a terminal: when stderr is redirected (a file, a pipe, a test) every
// call is a no-op, so logs and scripts never see carriage returns.
//
// Thread-safety: none; update() from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace wick::cli {

class ProgressBar {
 public:
  // A bar on stderr, enabled when stderr is a terminal (isatty). `unit` is singular ("window").
  ProgressBar(std::string label, int64_t total, std::string unit);
  // A bar on `out`, drawn when `enabled` (tests); `columns` is the width of the line.
  ProgressBar(std::FILE* out, bool enabled, std::string label, int64_t total, std::string unit,
              int columns = 80);
  // Ends the line where it stands (the run failed or stopped early) unless finish() was called.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` (0..total) units are finished. Redraws when 100 ms have passed since the last draw, and
  // always for done == total.
  void update(int64_t done);
  // Draws the final state ("in m:ss" instead of the ETA) and ends the line. Later calls (and the
  // destructor) do nothing.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void draw();

  std::FILE* out_;
  bool enabled_;
  std::string label_, unit_;
  int64_t total_, done_ = 0;
  int columns_;
  Clock::time_point start_, last_draw_;
  size_t last_length_ = 0;  // characters of the previous line, to blank a shorter one
  bool finished_ = false;
};

// The bar's line for `done` of `total` after `elapsed_s` seconds, at most `columns` - 1
// characters: "label [#####.....] done/total  pct%  rate  ETA m:ss" (with `final`, "in m:ss"
// instead of the ETA). Rate is "x.y units/s", or "x.y s/unit" when slower than one a second.
std::string progress_line(std::string_view label, int64_t done, int64_t total,
                          std::string_view unit, double elapsed_s, bool final, int columns);
// "m:ss", or "h:mm:ss" from an hour on; "--:--" for a negative or non-finite time.
std::string format_duration(double seconds);

}  // namespace wick::cli

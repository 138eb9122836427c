#include "progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace wick::cli {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

int terminal_columns(std::FILE* out) {
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string rate_text(int64_t done, double elapsed_s, std::string_view unit) {
  if (done <= 0 || !(elapsed_s > 0)) return fmt::format("-- {}s/s", unit);
  const double per_s = static_cast<double>(done) / elapsed_s;
  if (per_s >= 1) return fmt::format("{:.1f} {}s/s", per_s, unit);
  return fmt::format("{:.1f} s/{}", 1 / per_s, unit);
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string progress_line(std::string_view label, int64_t done, int64_t total,
                          std::string_view unit, double elapsed_s, bool final, int columns) {
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 1.0;
  std::string time;
  if (final) {
    time = "in " + format_duration(elapsed_s);
  } else {
    const double eta =
        done > 0 ? elapsed_s * static_cast<double>(total - done) / static_cast<double>(done) : -1;
    time = "ETA " + format_duration(eta);
  }
  const std::string tail = fmt::format("{}/{}  {:3.0f}%  {}  {}", done, total, 100 * fraction,
                                       rate_text(done, elapsed_s, unit), time);
  // "label [bar] tail": the bar takes what is left of the line, 10 to 30 cells.
  const int room = columns - 1 - static_cast<int>(label.size() + tail.size()) - 4;
  std::string line(label);
  if (room >= 10) {
    const int width = std::min(room, 30);
    const int filled = static_cast<int>(std::floor(fraction * width));
    line += " [" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
  }
  line += " " + tail;
  if (columns > 1 && line.size() > static_cast<size_t>(columns - 1)) line.resize(columns - 1);
  return line;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : ProgressBar(stderr, isatty(fileno(stderr)) == 1, std::move(label), total, std::move(unit),
                  isatty(fileno(stderr)) == 1 ? terminal_columns(stderr) : 80) {}

ProgressBar::ProgressBar(std::FILE* out, bool enabled, std::string label, int64_t total,
                         std::string unit, int columns)
    : out_(out),
      enabled_(enabled),
      label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      columns_(columns),
      start_(Clock::now()),
      last_draw_(start_) {
  if (enabled_) draw();
}

ProgressBar::~ProgressBar() {
  if (!enabled_ || finished_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::update(int64_t done) {
  if (!enabled_ || finished_) return;
  done_ = done;
  const Clock::time_point now = Clock::now();
  if (done_ < total_ && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  draw();
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  draw();
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::draw() {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const std::string line =
      progress_line(label_, done_, total_, unit_, elapsed, finished_, columns_);
  std::string text = "\r" + line;
  if (line.size() < last_length_) text += std::string(last_length_ - line.size(), ' ');
  last_length_ = line.size();
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

}  // namespace wick::cli

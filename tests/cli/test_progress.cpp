// The progress bar of the long commands (cli/progress.h): its line, and that it writes nothing
// when disabled (stderr not a terminal). Nothing here depends on timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/progress.h"

namespace wick::cli {
namespace {

TEST(Progress, LineShowsLabelBarCountPercentageRateAndEta) {
  const std::string line = progress_line("ppl", 3, 12, "window", 6.0, false, 80);
  EXPECT_EQ(line.rfind("ppl [", 0), 0u) << line;
  EXPECT_NE(line.find("3/12"), std::string::npos) << line;
  EXPECT_NE(line.find(" 25%"), std::string::npos) << line;
  EXPECT_NE(line.find("2.0 s/window"), std::string::npos) << line;  // slower than 1/s
  EXPECT_NE(line.find("ETA 0:18"), std::string::npos) << line;
  EXPECT_LE(line.size(), 79u);
  const std::string fast = progress_line("kl", 50, 100, "window", 2.0, false, 80);
  EXPECT_NE(fast.find("25.0 windows/s"), std::string::npos) << fast;
  const std::string done = progress_line("ppl", 12, 12, "window", 75.0, true, 80);
  EXPECT_NE(done.find("100%"), std::string::npos) << done;
  EXPECT_NE(done.find("in 1:15"), std::string::npos) << done;
  EXPECT_NE(done.find("[##############################]"), std::string::npos) << done;
  const std::string start = progress_line("ppl", 0, 12, "window", 0.0, false, 80);
  EXPECT_NE(start.find("ETA --:--"), std::string::npos) << start;
  // A narrow terminal drops the bar, then cuts the line.
  const std::string narrow = progress_line("ppl", 3, 12, "window", 6.0, false, 40);
  EXPECT_EQ(narrow.find('['), std::string::npos) << narrow;
  EXPECT_LE(narrow.size(), 39u);
}

TEST(Progress, DurationsReadAsClockTimes) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65.4), "1:05");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "--:--");
}

std::string written(bool enabled) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, enabled, "ppl", 4, "window");
    for (int i = 1; i <= 4; ++i) bar.update(i);
    bar.finish();
  }
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  std::fclose(f);
  return out;
}

TEST(Progress, DrawsInPlaceAndEndsTheLineOnlyWhenEnabled) {
  EXPECT_EQ(written(false), "");
  const std::string out = written(true);
  EXPECT_EQ(out.front(), '\r');
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_NE(out.find("4/4"), std::string::npos) << out;
  EXPECT_NE(out.find("100%"), std::string::npos) << out;
}

}  // namespace
}  // namespace wick::cli

// wick_fuzz_replay: runs fuzz inputs through their target's contract check without libFuzzer, in
// any build (README "Reliability"). The test suite replays every target's seed corpus and kept
// regression inputs with it, under an address-space limit in plain builds (a loader that
// allocates from an unchecked size then fails with std::bad_alloc, which breaks the contract).
//
//   wick_fuzz_replay [--max-as-mib N] TARGET PATH...   files, or folders (every file inside)
//   wick_fuzz_replay --list                            the targets, one "name<TAB>input" a line
//   wick_fuzz_replay --check-corpora DIR               every target has DIR/<name>/ and no other
//                                                      folder is there
//   wick_fuzz_replay --write-seeds DIR                 writes the seeds the library makes
//                                                      (tests/fuzz/make_corpus.sh)
// Exit status: 0 when every input kept the contract; a violation aborts (SIGABRT); 1 for usage
// errors and unreadable paths.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_models.h"
#include "fuzz/fuzz_target.h"

namespace fs = std::filesystem;
using wick::fuzz::Target;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: wick_fuzz_replay [--max-as-mib N] TARGET PATH...\n"
               "       wick_fuzz_replay --list\n"
               "       wick_fuzz_replay --check-corpora DIR\n"
               "       wick_fuzz_replay --write-seeds DIR\n");
  return 1;
}

int check_corpora(const fs::path& dir) {
  int bad = 0;
  for (const Target& t : wick::fuzz::targets())
    if (!fs::is_directory(dir / std::string(t.name))) {
      std::fprintf(stderr, "target '%s' has no seed corpus %s\n", std::string(t.name).c_str(),
                   (dir / std::string(t.name)).c_str());
      ++bad;
    }
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && !wick::fuzz::find_target(e.path().filename().string())) {
      std::fprintf(stderr, "corpus folder %s belongs to no target\n", e.path().c_str());
      ++bad;
    }
  if (bad == 0)
    std::printf("%zu targets, each with its corpus in %s\n", wick::fuzz::targets().size(),
                dir.c_str());
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--list") {
    for (const Target& t : wick::fuzz::targets())
      std::printf("%s\t%s\n", std::string(t.name).c_str(), std::string(t.input).c_str());
    return 0;
  }
  if (args.size() == 2 && args[0] == "--check-corpora") return check_corpora(args[1]);
  if (args.size() == 2 && args[0] == "--write-seeds") {
    wick::fuzz::write_library_seeds(args[1]);
    return 0;
  }
  size_t at = 0;
  if (args.size() >= 2 && args[0] == "--max-as-mib") {
    const rlim_t mib = std::stoull(args[1]);
    const rlimit lim{mib << 20, mib << 20};
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
      std::perror("setrlimit(RLIMIT_AS)");
      return 1;
    }
    at = 2;
  }
  if (args.size() < at + 2) return usage();
  const Target* t = wick::fuzz::find_target(args[at]);
  if (!t) {
    std::fprintf(stderr, "no fuzz target named '%s' (--list shows them)\n", args[at].c_str());
    return 1;
  }
  std::vector<fs::path> files;
  for (size_t i = at + 1; i < args.size(); ++i) {
    const fs::path p(args[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else if (!fs::exists(p, ec)) {
      continue;  // e.g. a target without kept regression inputs yet
    }
  }
  std::sort(files.begin(), files.end());
  size_t bytes = 0, accepted = 0, rejected = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", f.c_str());
      return 1;
    }
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    const std::string refused = wick::fuzz::run(*t, wick::fuzz::Bytes(data.data(), data.size()));
    std::fprintf(stderr, "%s: %s%s\n", f.c_str(), refused.empty() ? "accepted" : "refused: ",
                 refused.c_str());
    (refused.empty() ? accepted : rejected) += 1;
    bytes += data.size();
  }
  std::printf("%s: %zu inputs (%zu bytes) replayed, %zu accepted, %zu refused with wick's errors; "
              "contract held\n",
              std::string(t->name).c_str(), files.size(), bytes, accepted, rejected);
  return 0;
}

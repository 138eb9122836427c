// Deterministic mutation fuzz of wick::Model::load over the fixture checkpoints: the tiny .pth
// (zip directory + pickle), the tiny .safetensors (length prefix + JSON header) and the
// HuggingFace folder's config.json. Each mutant (byte flips, truncations, length-field and number
// edits, mostly in the header / pickle / central-directory bytes) is written to the scratch folder
// and loaded; when it loads, a short forward pass runs on it. The only exceptions allowed out are
// wick::Error subclasses; anything else (std::bad_alloc, std::out_of_range, a JSON library
// exception, ...) fails the test naming the iteration, the mutation and the kept mutant file.
// Crashes and sanitizer reports show up as such (the suite also runs under ASan/UBSan).
//
// 2000 mutants in all, fixed seeds. Most of them go to the .pth, the cheapest to load; a
// safetensors or HF-folder load parses the whole JSON header, ~30 ms each under ASan. Budget:
// < 10 s in Release, < 60 s under ASan/UBSan (Debug).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "io/mapped_file.h"
#include "io/zip_reader.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/state.h"

namespace wick {
namespace {

namespace fs = std::filesystem;

struct Region {
  size_t begin = 0, end = 0;  // [begin, end)
  double weight = 1;          // relative share of the mutations
};

// A length or offset field: `width` little-endian bytes at `at`.
struct Field {
  size_t at = 0;
  int width = 4;
};

// What to mutate in one file: hot regions (90% of the mutations land there, by weight), known
// binary length fields, and the share of JSON-aware edits (numbers, values, whole lines).
struct Target {
  std::string bytes;
  std::vector<Region> hot;
  std::vector<Field> fields;
  int json_percent = 0;
};

uint64_t le(const std::string& s, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  // Sets `s` to a mutant of `t.bytes` (reusing its buffer); `what` describes the mutations (for
  // failure messages).
  void mutate(const Target& t, std::string& s, std::string* what) {
    s.assign(t.bytes);
    what->clear();
    const int n = 1 + static_cast<int>(below(3));
    for (int k = 0; k < n && !s.empty(); ++k) {
      if (below(100) < static_cast<uint64_t>(t.json_percent)) {
        edit_json_token(s, t, what);
        continue;
      }
      const uint64_t pick = below(100);
      if (pick < 75 && pick >= 50 && !t.fields.empty()) {
        edit_field(s, t, what);
      } else if (pick < 75) {
        flip_bytes(s, t, what);
      } else if (pick < 85) {
        truncate(s, t, what);
        break;  // further edits would mostly land past the end
      } else {
        splice(s, t, what);
      }
    }
  }

 private:
  uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }

  // A position: 90% inside a hot region, else anywhere.
  size_t position(const std::string& s, const Target& t) {
    if (!t.hot.empty() && below(10) != 0) {
      double total = 0;
      for (const Region& r : t.hot) total += r.weight;
      double x = std::uniform_real_distribution<double>(0, total)(rng_);
      size_t i = 0;
      while (i + 1 < t.hot.size() && x >= t.hot[i].weight) x -= t.hot[i++].weight;
      const Region& r = t.hot[i];
      const size_t b = std::min(r.begin, s.size() - 1);
      const size_t e = std::min(std::max(r.end, b + 1), s.size());
      return b + below(e - b);
    }
    return below(s.size());
  }

  uint64_t interesting(uint64_t size, uint64_t old) {
    static const uint64_t kValues[] = {0,          1,           2,           7,
                                       0x7f,       0x80,        0xff,        0x100,
                                       0x7fff,     0xffff,      0x10000,     0x7fffffff,
                                       0x80000000, 0xffffffff,  1ull << 32,  1ull << 40,
                                       1ull << 62, 1ull << 63,  ~0ull,       ~0ull - 7};
    switch (below(4)) {
      case 0:
        return size + below(64) - 32;  // around the file size
      case 1:
        return old + below(17) - 8;  // off by a little
      case 2:
        return rng_();
      default:
        return kValues[below(sizeof kValues / sizeof kValues[0])];
    }
  }

  void flip_bytes(std::string& s, const Target& t, std::string* what) {
    const int n = 1 + static_cast<int>(below(4));
    for (int i = 0; i < n; ++i) {
      const size_t p = position(s, t);
      if (below(2)) {
        s[p] = static_cast<char>(s[p] ^ (1 << below(8)));
      } else {
        s[p] = static_cast<char>(rng_());
      }
      *what += "flip@" + std::to_string(p) + " ";
    }
  }

  void edit_field(std::string& s, const Target& t, std::string* what) {
    const Field f = t.fields[below(t.fields.size())];
    if (f.at + f.width > s.size()) return;
    uint64_t v = interesting(s.size(), le(s, f.at, f.width));
    for (int i = 0; i < f.width; ++i) s[f.at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    *what += "field@" + std::to_string(f.at) + "/" + std::to_string(f.width) + "=" +
             std::to_string(v) + " ";
  }

  void truncate(std::string& s, const Target& t, std::string* what) {
    const size_t keep = below(3) ? position(s, t) : below(s.size() + 1);
    s.resize(keep);
    *what += "truncate@" + std::to_string(keep) + " ";
  }

  // Deletes or duplicates a short run of bytes (shifts everything after it).
  void splice(std::string& s, const Target& t, std::string* what) {
    const size_t p = position(s, t);
    const size_t n = std::min<size_t>(1 + below(16), s.size() - p);
    if (below(2)) {
      s.erase(p, n);
      *what += "delete@" + std::to_string(p) + "+" + std::to_string(n) + " ";
    } else {
      s.insert(p, s.substr(p, n));
      *what += "dup@" + std::to_string(p) + "+" + std::to_string(n) + " ";
    }
  }

  // Replaces a number (or a short token) in a JSON region with an extreme one, or deletes a line
  // (a key of a pretty-printed object).
  void edit_json_token(std::string& s, const Target& t, std::string* what) {
    if (below(5) == 0) {
      const size_t p = position(s, t);
      const size_t b = s.rfind('\n', p);
      const size_t e = s.find('\n', p);
      if (b != std::string::npos && e != std::string::npos) {
        s.erase(b, e - b);
        *what += "delete-line@" + std::to_string(b) + " ";
        return;
      }
    }
    static const char* kNumbers[] = {"0",
                                     "-1",
                                     "1",
                                     "3",
                                     "65",
                                     "4294967295",
                                     "4294967296",
                                     "9223372036854775807",
                                     "-9223372036854775808",
                                     "18446744073709551615",
                                     "18446744073709551616",
                                     "99999999999999999999999999",
                                     "1e308",
                                     "-1e400",
                                     "0.5",
                                     "1.0",
                                     "null",
                                     "true",
                                     "\"x\"",
                                     "[]",
                                     "{}",
                                     ""};
    // Find the digit run at or after a hot position.
    size_t p = position(s, t);
    while (p < s.size() && !(s[p] >= '0' && s[p] <= '9')) ++p;
    if (p >= s.size()) return;
    size_t b = p, e = p;
    while (b > 0 && ((s[b - 1] >= '0' && s[b - 1] <= '9') || s[b - 1] == '-' || s[b - 1] == '.'))
      --b;
    while (e < s.size() && ((s[e] >= '0' && s[e] <= '9') || s[e] == '.' || s[e] == 'e')) ++e;
    const char* rep = kNumbers[below(sizeof kNumbers / sizeof kNumbers[0])];
    s.replace(b, e - b, rep);
    *what += "number@" + std::to_string(b) + "='" + rep + "' ";
  }

  std::mt19937_64 rng_;
};

// Length and offset fields of a zip archive (APPNOTE 4.3.7, 4.3.12, 4.3.14-16) and of the
// pickle's opcodes with a length or index argument (found by a naive scan).
void add_zip_fields(const std::string& s, std::vector<Field>* f) {
  for (size_t p = s.find("PK\x03\x04"); p != std::string::npos; p = s.find("PK\x03\x04", p + 4)) {
    for (size_t o : {18, 22}) f->push_back({p + o, 4});
    for (size_t o : {8, 26, 28}) f->push_back({p + o, 2});
  }
  for (size_t p = s.find("PK\x01\x02"); p != std::string::npos; p = s.find("PK\x01\x02", p + 4)) {
    for (size_t o : {20, 24, 42}) f->push_back({p + o, 4});
    for (size_t o : {10, 28, 30, 32}) f->push_back({p + o, 2});
    // ZIP64 extra field after the name: sizes and offset (8 bytes each).
    const size_t extra = p + 46 + le(s, p + 28, 2);
    if (extra + 4 <= s.size() && le(s, extra, 2) == 1) {
      for (size_t o = 4; o + 8 <= 4 + le(s, extra + 2, 2); o += 8) f->push_back({extra + o, 8});
    }
  }
  const size_t eocd = s.rfind(std::string("PK\x05\x06", 4));
  if (eocd != std::string::npos) {
    for (size_t o : {8, 10, 20}) f->push_back({eocd + o, 2});
    for (size_t o : {12, 16}) f->push_back({eocd + o, 4});
  }
  const size_t z64 = s.rfind(std::string("PK\x06\x06", 4));
  if (z64 != std::string::npos) {
    for (size_t o : {4, 24, 32, 40, 48}) f->push_back({z64 + o, 8});
  }
  const size_t loc = s.rfind(std::string("PK\x06\x07", 4));
  if (loc != std::string::npos) f->push_back({loc + 8, 8});
}

void add_pickle_fields(const std::string& s, Region pkl, std::vector<Field>* f) {
  for (size_t p = pkl.begin; p + 1 < pkl.end; ++p) {
    switch (static_cast<uint8_t>(s[p])) {
      case 'X': case 'B': case 'T': case 'r': case 'j': case 'J':
        f->push_back({p + 1, 4});
        break;
      case 'q': case 'h': case 'K': case 'U': case 'C': case 0x8c: case 0x8a: case 0x80:
        f->push_back({p + 1, 1});
        break;
      case 'M':
        f->push_back({p + 1, 2});
        break;
      case 0x95: case 0x8d: case 0x8e:
        f->push_back({p + 1, 8});
        break;
      default:
        break;
    }
  }
}

Target pth_target() {
  const std::string path = test::fixture("tiny-rwkv7/tiny-rwkv7-834K.pth");
  Target t;
  t.bytes = test::read_file(path);
  io::ZipReader zip(io::MappedFile::open(path));
  size_t data_end = 0;
  for (const io::ZipEntry& e : zip.entries()) {
    data_end = std::max<size_t>(data_end, e.data_offset + e.compressed_size);
    if (e.name.size() >= 9 && e.name.compare(e.name.size() - 9, 9, "/data.pkl") == 0) {
      // Its local header and the pickle: half of the mutations.
      const Region r{static_cast<size_t>(e.local_header_offset),
                     static_cast<size_t>(e.data_offset + e.compressed_size), 50};
      t.hot.push_back(r);
      add_pickle_fields(t.bytes, {static_cast<size_t>(e.data_offset), r.end}, &t.fields);
    } else {  // the other local headers: 10% together
      t.hot.push_back({static_cast<size_t>(e.local_header_offset),
                       static_cast<size_t>(e.data_offset), 10.0 / zip.entries().size()});
    }
  }
  // The central directory and the end records.
  t.hot.push_back({data_end, t.bytes.size(), 40});
  add_zip_fields(t.bytes, &t.fields);
  return t;
}

Target safetensors_target() {
  Target t;
  t.bytes = test::read_file(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"));
  const size_t header = 8 + static_cast<size_t>(le(t.bytes, 0, 8));
  t.hot.push_back({0, std::min(header, t.bytes.size())});
  t.fields.push_back({0, 8});
  t.json_percent = 35;
  return t;
}

Target config_target() {
  Target t;
  t.bytes = test::read_file(test::fixture("tiny-rwkv7/hf/config.json"));
  t.hot.push_back({0, t.bytes.size()});
  t.json_percent = 70;
  return t;
}

struct Tally {
  int loaded = 0, refused = 0;
};

// Loads `path` and runs a short forward pass; only wick::Error may escape. On failure the
// mutated file `mutant` is kept as `keep_as`.
void load_and_run(const std::string& path, const fs::path& mutant, int iteration,
                  const std::string& what, const fs::path& keep_as, Tally* tally) {
  auto fail = [&](const std::string& kind, const std::string& message) {
    std::error_code ec;
    fs::copy_file(mutant, keep_as, fs::copy_options::overwrite_existing, ec);
    ADD_FAILURE() << "iteration " << iteration << " (" << what << "): " << kind
                  << " escaped Model::load/forward: " << message << " (mutant kept as "
                  << keep_as.string() << ")";
  };
  try {
    Model m = Model::load(path);
    State st = m.new_state();
    const std::vector<int32_t> tokens = {1, 2, 3};
    const std::vector<float> logits = m.forward(tokens, st);
    EXPECT_EQ(logits.size(), static_cast<size_t>(m.geometry().vocab)) << "iteration " << iteration;
    ++tally->loaded;
  } catch (const Error&) {
    ++tally->refused;
  } catch (const std::exception& e) {
    fail(typeid(e).name(), e.what());
  } catch (...) {
    fail("a non-std exception", "?");
  }
}

// A file that is turned into one mutant after another by rewriting only the bytes that differ
// from its current contents (the fixtures are megabytes; the mutations mostly a few bytes).
// Nothing maps it while it changes: each Model is gone before the next mutant is written.
class MutantFile {
 public:
  explicit MutantFile(fs::path path) : path_(std::move(path)) { test::write_file(path_, ""); }

  const fs::path& path() const { return path_; }

  // Makes the file hold `bytes`, and takes the buffer (in exchange for the previous one).
  void set(std::string& bytes) {
    constexpr size_t kBlock = 4096;
    const size_t common = std::min(bytes.size(), cur_.size());
    size_t first = 0;  // first differing byte
    while (first + kBlock <= common && std::memcmp(&bytes[first], &cur_[first], kBlock) == 0) {
      first += kBlock;
    }
    while (first < common && bytes[first] == cur_[first]) ++first;
    size_t end = bytes.size();  // write [first, end)
    if (bytes.size() == cur_.size()) {
      while (end >= first + kBlock &&
             std::memcmp(&bytes[end - kBlock], &cur_[end - kBlock], kBlock) == 0) {
        end -= kBlock;
      }
      while (end > first && bytes[end - 1] == cur_[end - 1]) --end;
    }
    if (end > first) {
      std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(first));
      f.write(bytes.data() + first, static_cast<std::streamsize>(end - first));
      ASSERT_TRUE(f.good()) << path_;
    }
    if (bytes.size() != cur_.size()) fs::resize_file(path_, bytes.size());
    cur_.swap(bytes);
  }

 private:
  fs::path path_;
  std::string cur_;
};

// Runs `iterations` mutants of `t` (the first one unmodified), as a file with extension `ext` in
// the scratch folder.
Tally fuzz_file(const Target& t, const std::string& ext, int iterations, uint64_t seed) {
  const fs::path dir = test::scratch_dir();
  MutantFile file(dir / ("mutant" + ext));
  Mutator mut(seed);
  Tally tally;
  std::string what = "unmodified", bytes = t.bytes;
  for (int it = 0; it < iterations; ++it) {
    if (it > 0) mut.mutate(t, bytes, &what);
    file.set(bytes);
    load_and_run(file.path().string(), file.path(), it, what,
                 dir / ("failed-" + std::to_string(it) + ext), &tally);
    if (::testing::Test::HasFailure()) break;  // keep the first failure readable
  }
  return tally;
}

TEST(FuzzLoad, PthMutants) {
  const Tally t = fuzz_file(pth_target(), ".pth", 1440, 0x7074680001ull);
  EXPECT_GT(t.loaded, 0);  // the unmodified file and mutants of ignored bytes
  EXPECT_GT(t.refused, 700);
}

TEST(FuzzLoad, SafetensorsMutants) {
  const Tally t = fuzz_file(safetensors_target(), ".safetensors", 400, 0x7374000002ull);
  EXPECT_GT(t.loaded, 0);
  EXPECT_GT(t.refused, 200);
}

TEST(FuzzLoad, HfConfigMutants) {
  const Target cfg = config_target();
  const fs::path dir = test::scratch_dir() / "hf";
  fs::create_directories(dir);
  fs::copy_file(test::fixture("tiny-rwkv7/hf/model.safetensors"), dir / "model.safetensors");
  Mutator mut(0x6366670003ull);
  Tally tally;
  std::string what = "unmodified", bytes = cfg.bytes;
  for (int it = 0; it < 160; ++it) {
    if (it > 0) mut.mutate(cfg, bytes, &what);
    test::write_file(dir / "config.json", bytes);
    load_and_run(dir.string(), dir / "config.json", it, what,
                 dir.parent_path() / ("failed-config-" + std::to_string(it) + ".json"), &tally);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(tally.loaded, 0);
  EXPECT_GT(tally.refused, 100);
}

}  // namespace
}  // namespace wick

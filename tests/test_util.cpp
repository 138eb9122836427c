#include "test_util.h"

#include "wick/runtime.h"
#include "wick/synth.h"

#include <atomic>
#include <filesystem>
#include <iostream>

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <cstdlib>
#include <limits>
#include <unistd.h>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/safetensors.h"

namespace wick::test {

namespace {
std::unique_ptr<kernels::ThreadPool> g_test_pool;
}  // namespace

kernels::ThreadPool& test_pool() {
  if (!g_test_pool) g_test_pool = std::make_unique<kernels::ThreadPool>(default_thread_count());
  return *g_test_pool;
}

Model synthetic_model(const std::string& geometry, DType dtype, uint64_t seed) {
  static std::atomic<int> serial{0};
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("wick-synth-" + std::to_string(::getpid()) + "-" + std::to_string(serial++) + ".safetensors"))
          .string();
  write_synthetic_checkpoint(path, parse_synth_geometry(geometry), dtype, seed);
  Model model = Model::load(path);
  std::filesystem::remove(path);
  return model;
}

void set_test_threads(int threads) {
  g_test_pool = std::make_unique<kernels::ThreadPool>(threads >= 1 ? threads : default_thread_count());
}

std::string fixtures_dir() {
  const char* env = std::getenv("WICK_FIXTURES");
  return env && *env ? std::string(env) : std::string(WICK_FIXTURES_DIR);
}

std::string fixture(const std::string& rel) {
  std::string p = fixtures_dir() + "/" + rel;
  if (!std::filesystem::exists(p)) {
    std::cout << "wick-test-skip: fixture missing: " << p
              << " (the tests read ../shared/fixtures; set WICK_FIXTURES to its location)"
              << std::endl;
    throw std::runtime_error("fixture missing: " + p);
  }
  return p;
}

std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "scratch";
  for (char& c : name)
    if (c == '/') c = '_';
  auto dir = std::filesystem::temp_directory_path() / ("wick-test-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

io::TensorSet load_fixture_tensors(const std::string& rel) {
  return io::read_safetensors(io::MappedFile::open(fixture(rel)));
}

std::vector<float> floats(const io::TensorSet& set, const std::string& name) {
  const io::TensorView* t = set.find(name);
  if (!t || t->dtype != DType::F32) throw std::runtime_error("no F32 tensor " + name);
  std::vector<float> v(static_cast<size_t>(t->numel()));
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

std::vector<int32_t> ints(const io::TensorSet& set, const std::string& name) {
  const io::TensorView* t = set.find(name);
  if (!t || t->dtype != DType::I32) throw std::runtime_error("no I32 tensor " + name);
  std::vector<int32_t> v(static_cast<size_t>(t->numel()));
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

std::vector<nlohmann::json> read_jsonl(const std::string& rel) {
  std::ifstream f(fixture(rel), std::ios::binary);
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(f, line)) {  // records are split on LF only
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<float> random_normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (auto& f : v) f = nd(rng);
  return v;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    if (d > m) m = d;
  }
  return m;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CliRun run_wick(const std::string& args, const std::string& stdin_text) {
  // Its own folder (scratch_dir() would empty the calling test's folder).
  static int runs = 0;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("wick-test-" + std::to_string(::getpid())) / ("cli-run-" + std::to_string(runs++));
  std::filesystem::create_directories(dir);
  const std::string err_path = (dir / "stderr.txt").string();
  const std::string in_path = (dir / "stdin.txt").string();
  write_file(in_path, stdin_text);
  const std::string cmd = std::string(WICK_CLI_PATH) + " " + args + " <" + shell_quote(in_path) +
                          " 2>" + shell_quote(err_path);
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = read_file(err_path);
  return r;
}

}  // namespace wick::test

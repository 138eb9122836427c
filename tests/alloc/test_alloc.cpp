// A steady-state decode step allocates nothing (issue: explicit runtime). This binary replaces the
// global operator new to count allocations, so it is built only without sanitizers (they replace
// operator new themselves) and kept out of the main test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <cstdio>
#include <unistd.h>

#include "wick/model.h"
#include "wick/synth.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t al = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace wick {
namespace {

long allocations_during(const std::function<void()>& fn) {
  const long before = g_allocations.load();
  fn();
  return g_allocations.load() - before;
}

void check_steady_decode(const Model& model, const char* what) {
  State state = model.new_state();
  std::vector<float> logits(static_cast<size_t>(model.geometry().vocab));
  const std::vector<int32_t> prompt = {10, 20, 30, 40, 50};
  model.forward(prompt, state, logits);
  int32_t token = 7;
  for (int i = 0; i < 3; ++i) model.step(token, state, logits);  // warm the runtime
  const long n = allocations_during([&] {
    for (int i = 0; i < 20; ++i) {
      model.step(token, state, logits);
      token = static_cast<int32_t>((token * 31 + 7) % model.geometry().vocab);
    }
  });
  EXPECT_EQ(n, 0) << what << ": allocations in 20 decode steps";
  // The counter works: the vector form allocates its result.
  EXPECT_GT(allocations_during([&] { (void)model.step(token, state); }), 0) << what;
}

TEST(Allocations, SteadyStateDecodeStepAllocatesNothing) {
  check_steady_decode(Model::load_default(), "fp32, 1 thread");
  check_steady_decode(Model::load_default().with_runtime(std::make_shared<Runtime>(2)),
                      "fp32, 2 threads");
  check_steady_decode(Model::load_default().with_precision(Precision::kBf16), "bf16 inputs");
  check_steady_decode(Model::load_default(LoadOptions{.quantize = WeightQuantization::kInt8}),
                      "int8");
  // A World-vocabulary geometry whose head GEMV runs on the pool's threads.
  const std::string path =
      "/tmp/wick-alloc-synth-" + std::to_string(::getpid()) + ".safetensors";
  write_synthetic_checkpoint(path, parse_synth_geometry("2:256"), DType::BF16, 3);
  const Model synth = Model::load(path).with_runtime(std::make_shared<Runtime>(2));
  std::remove(path.c_str());
  check_steady_decode(synth, "synthetic 2:256 bf16, 2 threads");
  // bf16 weights at bf16 precision: the BF16 dot product where the CPU has it.
  check_steady_decode(synth.with_precision(Precision::kBf16), "synthetic bf16, bf16 inputs");
}

TEST(Allocations, SteadyStateBatchedDecodeAllocatesNothing) {
  const Model model = Model::load_default().with_runtime(std::make_shared<Runtime>(2));
  std::vector<State> states(4, model.new_state());
  std::vector<State*> ptrs;
  for (State& s : states) ptrs.push_back(&s);
  std::vector<int32_t> tokens = {1, 2, 3, 4};
  std::vector<std::span<const int32_t>> seqs;
  for (const int32_t& t : tokens) seqs.emplace_back(&t, 1);
  std::vector<float> logits(4 * static_cast<size_t>(model.geometry().vocab));
  for (int i = 0; i < 3; ++i) model.forward_batch(seqs, ptrs, logits);
  const long n = allocations_during([&] {
    for (int i = 0; i < 20; ++i) {
      model.forward_batch(seqs, ptrs, logits);
      for (int32_t& t : tokens) t = (t * 17 + 3) % 256;
    }
  });
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace wick

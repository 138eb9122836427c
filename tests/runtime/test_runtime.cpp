// The explicit runtime (wick/runtime.h): threads per Runtime, results independent of the thread
// count, passes on a shared Runtime take turns, a pass inside a pass is refused, two models on two
// runtimes run side by side.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "test_util.h"
#include "wick/errors.h"
#include "wick/runtime.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

const Model& synth_model() {
  static const Model m = synthetic_model("2:256", DType::BF16, 5);
  return m;
}

TEST(Runtime, ThreadsArePerRuntime) {
  EXPECT_EQ(Runtime(3).threads(), 3);
  EXPECT_EQ(Runtime(0).threads(), default_thread_count());
  EXPECT_GE(default_thread_count(), 1);
  const Model a = Model::load_default();
  const Model b = a.with_runtime(std::make_shared<Runtime>(1));
  EXPECT_NE(a.runtime(), b.runtime());
  EXPECT_EQ(b.runtime()->threads(), 1);
  EXPECT_EQ(a.with_precision(Precision::kBf16).runtime(), a.runtime());  // copies share it
  EXPECT_THROW(a.with_runtime(nullptr), InputError);
}

TEST(Runtime, ResultsDoNotDependOnTheThreadCount) {
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9};
  std::vector<std::vector<float>> logits;
  std::vector<State> states;
  for (int threads : {1, 2, 3}) {
    const Model m = synth_model().with_runtime(std::make_shared<Runtime>(threads));
    State s = m.new_state();
    logits.push_back(m.forward(prompt, s, true));
    logits.push_back(m.step(42, s));
    states.push_back(s);
  }
  EXPECT_EQ(logits[0], logits[2]);
  EXPECT_EQ(logits[0], logits[4]);
  EXPECT_EQ(logits[1], logits[3]);
  EXPECT_EQ(logits[1], logits[5]);
  EXPECT_TRUE(states[0] == states[1] && states[0] == states[2]);
  EXPECT_NE(logits[1], synth_model().step(43, states[0]));  // another token, other logits
}

TEST(Runtime, CallerBuffersMustHaveTheExactSize) {
  const Model m = Model::load_default();
  State s = m.new_state();
  const State before = s;
  std::vector<float> small(10);
  const std::vector<int32_t> ids = {1, 2, 3};
  EXPECT_THROW(m.forward(ids, s, small), InputError);
  EXPECT_TRUE(s == before);  // nothing absorbed
  std::vector<float> all(3 * 256), last(256);
  m.forward(ids, s, all, true);
  State s2 = m.new_state();
  m.forward(ids, s2, last);
  EXPECT_EQ(std::vector<float>(all.end() - 256, all.end()), last);
  EXPECT_TRUE(s == s2);
}

TEST(Runtime, BatchedAllPositionsRowsEqualSinglePasses) {
  const Model m = Model::load_default();
  const std::vector<int32_t> a = {5, 6, 7, 8}, b = {9, 10};
  std::vector<State> st(2, m.new_state());
  std::vector<State*> ptrs = {&st[0], &st[1]};
  std::vector<std::span<const int32_t>> seqs = {a, b};
  std::vector<float> out(6 * 256);
  m.forward_batch(seqs, ptrs, out, true);
  State sa = m.new_state(), sb = m.new_state();
  const std::vector<float> ra = m.forward(a, sa, true), rb = m.forward(b, sb, true);
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4 * 256), ra);
  EXPECT_EQ(std::vector<float>(out.begin() + 4 * 256, out.end()), rb);
  EXPECT_TRUE(st[0] == sa && st[1] == sb);
  EXPECT_NE(ra, rb);
}

TEST(Runtime, APassInsideAPassOnTheSameRuntimeIsRefused) {
  const Model m = Model::load_default();
  const Model other = m.with_runtime(std::make_shared<Runtime>(1));
  const std::vector<int32_t> ids = {1, 2};
  bool refused = false, nested_ok = false;
  ActivationTrace trace = [&](std::string_view name, int, const float*, int64_t, int64_t) {
    if (name != "emb_ln0") return;
    State inner = m.new_state();
    try {
      m.forward(ids, inner);
    } catch (const InputError& e) {
      refused = std::string(e.what()).find("inside another pass") != std::string::npos;
    }
    State inner2 = other.new_state();
    nested_ok = other.forward(ids, inner2).size() == 256;
  };
  State s = m.new_state();
  m.forward(ids, s, false, &trace);
  EXPECT_TRUE(refused);
  EXPECT_TRUE(nested_ok);
}

TEST(Runtime, ConcurrentPassesOnASharedRuntimeAndOnTwoRuntimes) {
  const Model shared = synth_model().with_runtime(std::make_shared<Runtime>(2));
  const Model tiny = Model::load_default();  // a runtime of its own
  const std::vector<int32_t> p1 = {11, 12, 13, 14, 15, 16}, p2 = {21, 22, 23};
  State r1 = shared.new_state(), r2 = tiny.new_state();
  const std::vector<float> want1 = shared.forward(p1, r1), want2 = tiny.forward(p2, r2);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        if (t % 2) {
          State s = shared.new_state();
          if (shared.forward(p1, s) != want1 || !(s == r1)) ++bad;
        } else {
          State s = tiny.new_state();
          if (tiny.forward(p2, s) != want2 || !(s == r2)) ++bad;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// Many short jobs back to back (decode issues hundreds per token): every block of every job runs
// exactly once, on the job it belongs to. A worker holding a stale ticket of the previous job must
// never claim a block of the next one.
TEST(ThreadPool, EveryBlockOfEveryJobRunsExactlyOnce) {
  kernels::ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(8);
  int wrong = 0;
  for (int job = 0; job < 20000; ++job) {
    const int n = 2 + job % 6;
    for (int b = 0; b < 8; ++b) hits[b].store(0);
    std::atomic<int> foreign{0};
    const int tag = job;
    pool.run(n, [&, tag](int64_t b, kernels::Arena& arena) {
      if (b < 0 || b >= n || tag != job) foreign.fetch_add(1);
      *arena.get<int>(1) = tag;  // each thread's own scratch
      hits[static_cast<size_t>(b)].fetch_add(1);
    });
    for (int b = 0; b < 8; ++b) wrong += hits[b].load() != (b < n ? 1 : 0);
    wrong += foreign.load();
  }
  EXPECT_EQ(wrong, 0);
}

// The pool levels its threads' arenas before each job; the levelling grows a buffer to exactly the
// largest, so arenas whose sizes came from different requests never outgrow each other in turn
// (which once made every job allocate and zero ever larger buffers).
TEST(ThreadPool, ArenaLevellingDoesNotRatchet) {
  kernels::Arena a;
  (void)a.get<char>(100, kernels::Arena::kBlock0);
  EXPECT_EQ(a.capacity(kernels::Arena::kBlock0), 100u);
  a.reserve(120, kernels::Arena::kBlock0);
  EXPECT_EQ(a.capacity(kernels::Arena::kBlock0), 120u);  // exactly, no geometric step
  a.reserve(50, kernels::Arena::kBlock0);
  EXPECT_EQ(a.capacity(kernels::Arena::kBlock0), 120u);
  (void)a.get<char>(130, kernels::Arena::kBlock0);
  EXPECT_EQ(a.capacity(kernels::Arena::kBlock0), 180u);  // get grows geometrically

  kernels::ThreadPool pool(2);
  constexpr size_t kMost = 1000;
  for (int job = 0; job < 200; ++job) {
    // Blocks ask for different sizes, whichever thread runs them.
    pool.run(4, [&](int64_t b, kernels::Arena& arena) {
      (void)arena.get<char>(kMost - 37 * static_cast<size_t>(b + job % 3),
                            kernels::Arena::kBlock0);
    });
  }
  // Every arena the blocks of a wide job see (the caller's and the worker's).
  std::atomic<size_t> most{0};
  pool.run(64, [&](int64_t, kernels::Arena& arena) {
    size_t seen = most.load();
    const size_t c = arena.capacity(kernels::Arena::kBlock0);
    while (c > seen && !most.compare_exchange_weak(seen, c)) {
    }
  });
  EXPECT_LE(most.load(), kMost * 3 / 2) << "the arenas ratcheted past what any block asked for";
}

}  // namespace
}  // namespace wick::test

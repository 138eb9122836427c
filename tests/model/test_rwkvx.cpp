// RWKV-X (docs/rwkvx.md) against the outputs of the official `rwkv-x` package
// (../shared/fixtures/rwkvx, README there): loading, the block order, full and moba attention in
// the parallel pass and the recurrent step, KV caches, state files, the KV limit, and the
// per-head / K-1 variants against an independent float64 masked attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/attention.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/state_file.h"

namespace wick {
namespace {

using test::fixture;
using test::floats;
using test::ints;
using test::load_fixture_tensors;
using test::max_abs_diff;

constexpr double kTol = 1e-4;  // the fixture README's bound for fp32 engines (logits, states)
constexpr int kC = 128, kV = 256;

Model tiny(const char* file = "rwkvx/rwkvx-tiny.safetensors") { return Model::load(fixture(file)); }

AttentionOptions moba(int64_t B, int K) {
  AttentionOptions o;
  o.mode = AttentionMode::kMoba;
  o.moba_block = B;
  o.moba_topk = K;
  return o;
}

std::vector<float> row(const std::vector<float>& m, int64_t r, int64_t cols) {
  return std::vector<float>(m.begin() + r * cols, m.begin() + (r + 1) * cols);
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Max |difference| between our state and a fixture state group ("state." or "greedy.state.").
// The fixture's KV caches are [2, T, C]; `k_rows` overrides them (the greedy file stores new rows).
double state_diff(const State& s, const io::TensorSet& f, const std::string& p,
                  const std::vector<float>* k_ref = nullptr,
                  const std::vector<float>* v_ref = nullptr) {
  const std::vector<float> att = floats(f, p + "rwkv.att_shift"), wkv = floats(f, p + "rwkv.wkv"),
                           ffn = floats(f, p + "rwkv.ffn_shift"),
                           attn_ffn = floats(f, p + "attn.ffn_shift");
  double d = 0;
  const size_t wkv_n = s.wkv_size();
  for (int l = 0; l < 4; ++l) {
    d = std::max(d, max_abs_diff(s.att_shift(l), att.data() + l * kC, kC));
    d = std::max(d, max_abs_diff(s.wkv(l), wkv.data() + l * wkv_n, wkv_n));
    d = std::max(d, max_abs_diff(s.ffn_shift(l), ffn.data() + l * kC, kC));
  }
  const std::vector<float> k = k_ref ? *k_ref : floats(f, p + "attn.k_cache");
  const std::vector<float> v = v_ref ? *v_ref : floats(f, p + "attn.v_cache");
  const size_t rows = static_cast<size_t>(s.kv_length()) * kC;
  EXPECT_EQ(k.size(), 2 * rows);
  if (k.size() != 2 * rows) return 1e30;
  for (int j = 0; j < 2; ++j) {
    d = std::max(d, max_abs_diff(s.attn_ffn_shift(j), attn_ffn.data() + j * kC, kC));
    d = std::max(d, max_abs_diff(s.k_cache(j), k.data() + j * rows, rows));
    d = std::max(d, max_abs_diff(s.v_cache(j), v.data() + j * rows, rows));
  }
  return d;
}

// The full caches after the greedy steps: the prompt's rows followed by the new ones, per block.
std::vector<float> concat_cache(const io::TensorSet& f, const std::string& old_name,
                                const std::string& new_name, int64_t T_old, int64_t T_new) {
  const std::vector<float> a = floats(f, old_name), b = floats(f, new_name);
  std::vector<float> out;
  for (int j = 0; j < 2; ++j) {
    out.insert(out.end(), a.begin() + j * T_old * kC, a.begin() + (j + 1) * T_old * kC);
    out.insert(out.end(), b.begin() + j * T_new * kC, b.begin() + (j + 1) * T_new * kC);
  }
  return out;
}

TEST(RwkvX, LoadsBothContainersWithGeometryAndOrderFromTheShapes) {
  const Model st = tiny(), pth = tiny("rwkvx/rwkvx-tiny.pth");
  for (const Model* m : {&st, &pth}) {
    const Geometry& g = m->geometry();
    EXPECT_EQ(g.n_layer, 4);
    EXPECT_EQ(g.n_attn, 2);
    EXPECT_EQ(g.n_embd, kC);
    EXPECT_EQ(g.n_head, 2);
    EXPECT_EQ(g.vocab, kV);
    EXPECT_EQ(g.attn_ffn_dim, 512);
    // Ranks read from the shapes (deliberately all different in the fixture).
    EXPECT_EQ(g.lora_w, 48);
    EXPECT_EQ(g.lora_a, 32);
    EXPECT_EQ(g.lora_v, 16);
    EXPECT_EQ(g.lora_g, 64);
    EXPECT_EQ(m->info().architecture, "rwkv-x");
    EXPECT_EQ(m->info().parameters, 1416320u);
    EXPECT_EQ(m->attention().mode, AttentionMode::kFull);
    EXPECT_EQ(m->attention().moba_block, 2048);
    EXPECT_EQ(m->attention().moba_topk, 3);
  }
  // Same names, dtypes, shapes and bits: the same weights.
  EXPECT_EQ(st.info().fingerprint, pth.info().fingerprint);
  EXPECT_NE(st.info().fingerprint, Model::load_default().info().fingerprint);
  State s = st.new_state();
  EXPECT_EQ(s.n_attn(), 2);
  EXPECT_EQ(s.kv_length(), 0);
}

// The residual stream after each block in execution order R0 R1 A0 R2 R3 A1, then the logits
// (`full-seq96`, fed in one call; the fixture's hidden states come from the decode path).
TEST(RwkvX, FullAttentionParallelPassMatchesThePackageBlockByBlock) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const int64_t T = static_cast<int64_t>(tokens.size());
  const Model m = tiny();
  std::vector<std::vector<float>> blocks;
  std::vector<std::string> order;
  ActivationTrace trace = [&](std::string_view name, int layer, const float* d, int64_t rows,
                              int64_t cols) {
    if (name == "block_out" || name == "attn_block_out") {
      blocks.emplace_back(d, d + rows * cols);
      order.push_back((name == "block_out" ? "R" : "A") + std::to_string(layer));
    }
  };
  State s = m.new_state();
  const std::vector<float> logits = m.forward(tokens, s, true, &trace);
  EXPECT_EQ(order, (std::vector<std::string>{"R0", "R1", "A0", "R2", "R3", "A1"}));
  const std::vector<float> hidden = floats(f, "acts.hidden");  // [T, 6, C]
  double worst_hidden = 0;
  for (int64_t t = 0; t < T; ++t)
    for (size_t b = 0; b < blocks.size(); ++b)
      worst_hidden = std::max(worst_hidden, max_abs_diff(blocks[b].data() + t * kC,
                                                         hidden.data() + (t * 6 + b) * kC, kC));
  const double d_seq = max_abs_diff(logits, floats(f, "logits_seq"));
  const double d_state = state_diff(s, f, "state.");
  std::printf("[rwkvx parity] full parallel: hidden %.2e, logits_seq %.2e, state %.2e\n",
              worst_hidden, d_seq, d_state);
  EXPECT_LT(worst_hidden, kTol);
  EXPECT_LT(d_seq, kTol);
  EXPECT_LT(d_state, kTol);
}

// Token by token (the package's decode path), then the 32-token greedy continuation.
TEST(RwkvX, FullAttentionRecurrentStepAndGreedyContinuationMatchThePackage) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const int64_t T = static_cast<int64_t>(tokens.size());
  const Model m = tiny();
  State s = m.new_state(), par = m.new_state();
  const std::vector<float> all = m.forward(tokens, par, true);
  const std::vector<float> ref = floats(f, "logits");
  double d = 0;
  std::vector<float> last;
  for (int64_t t = 0; t < T; ++t) {
    last = m.step(tokens[t], s);
    d = std::max(d, max_abs_diff(last, row(ref, t, kV)));
    // The recurrent step gives the parallel pass's row bit for bit.
    ASSERT_EQ(last, row(all, t, kV)) << "position " << t;
  }
  EXPECT_EQ(s, par);
  EXPECT_LT(d, kTol);
  EXPECT_LT(state_diff(s, f, "state."), kTol);

  const std::vector<int32_t> greedy = ints(f, "greedy.tokens");
  const std::vector<float> greedy_ref = floats(f, "greedy.logits");
  double dg = 0;
  int32_t next = argmax(last);
  for (size_t g = 0; g < greedy.size(); ++g) {
    ASSERT_EQ(next, greedy[g]) << "greedy token " << g;
    const std::vector<float> lg = m.step(next, s);
    dg = std::max(dg, max_abs_diff(lg, row(greedy_ref, static_cast<int64_t>(g), kV)));
    next = argmax(lg);
  }
  const std::vector<float> k = concat_cache(f, "state.attn.k_cache", "greedy.state.attn.k_new", T, 32);
  const std::vector<float> v = concat_cache(f, "state.attn.v_cache", "greedy.state.attn.v_new", T, 32);
  const double ds = state_diff(s, f, "greedy.state.", &k, &v);
  std::printf("[rwkvx parity] full step: logits %.2e, greedy logits %.2e, greedy state %.2e\n", d,
              dg, ds);
  EXPECT_LT(dg, kTol);
  EXPECT_LT(ds, kTol);
}

// The block scores q·mean(keys) and the chosen blocks of every position, from our queries and
// caches, against the package's (`sparse.*`: −1 / NaN where it used its full branch).
void check_block_choices(const Model& m, const std::vector<int32_t>& tokens, const io::TensorSet& f,
                         const std::string& prefix, int64_t pos_offset, State& s, int64_t B,
                         int K, double* worst_score, int* compared) {
  std::vector<std::vector<float>> q(2);
  ActivationTrace trace = [&](std::string_view name, int layer, const float* d, int64_t rows,
                              int64_t cols) {
    if (name == "attn.q") q[layer].assign(d, d + rows * cols);
  };
  m.forward(tokens, s, true, &trace);
  for (int j = 0; j < 2; ++j) model::update_block_means(s, j, B);
  const std::vector<int32_t> sel = ints(f, prefix + "sparse.sel");
  const std::vector<float> scores = floats(f, prefix + "sparse.scores");
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t nb = static_cast<int64_t>(scores.size()) / (T * 2);
  for (int j = 0; j < 2; ++j) {
    const float* k = s.k_cache(j);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = pos_offset + t;
      const int64_t complete = pos / B;
      std::vector<std::pair<double, int64_t>> ours;
      for (int64_t b = 0; b < complete; ++b) {
        double score = 0;
        for (int c = 0; c < kC; ++c) {
          double mean = 0;
          for (int64_t p = b * B; p < (b + 1) * B; ++p) mean += k[p * kC + c];
          score += q[j][t * kC + c] * (mean / static_cast<double>(B));
        }
        ours.emplace_back(score, b);
        const float pkg = scores[(t * 2 + j) * nb + b];
        if (!std::isnan(pkg)) {
          *worst_score = std::max(*worst_score, std::abs(score - pkg));
        }
      }
      const int32_t* pkg_sel = &sel[(t * 2 + j) * K];
      if (pkg_sel[0] < 0) {
        EXPECT_LE(pos, B * K) << "the package used full attention at position " << pos;
        continue;
      }
      std::sort(ours.begin(), ours.end(), std::greater<>());
      std::set<int64_t> mine, theirs(pkg_sel, pkg_sel + K);
      for (int i = 0; i < K; ++i) mine.insert(ours[i].second);
      EXPECT_EQ(mine, theirs) << "block choice at position " << pos << ", attention block " << j;
      // The engine's own choice: the complete past blocks its key ranges cover.
      std::set<int64_t> engine;
      for (const model::KeyRange& r : model::attention_key_ranges(
               m.attention(), q[j].data() + t * kC, s.kv_block_means(j).data(), pos, kC, 0))
        for (int64_t b = r.begin / B; b < std::min(r.end, complete * B) / B; ++b) engine.insert(b);
      EXPECT_EQ(engine, theirs) << "engine block choice at position " << pos << ", block " << j;
      ++*compared;
    }
  }
}

struct SparseCase {
  const char* file;
  int64_t B;
  int K;
  bool greedy;
};

class RwkvXSparse : public ::testing::TestWithParam<SparseCase> {};

// moba (shared selection, K past blocks + the current block) reproduces the package's sparse
// decode whatever the chunking: in one call, in chunks, and token by token.
TEST_P(RwkvXSparse, MobaMatchesThePackageInAnyChunking) {
  const SparseCase c = GetParam();
  const io::TensorSet f = load_fixture_tensors(c.file);
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const int64_t T = static_cast<int64_t>(tokens.size());
  const Model m = tiny().with_attention(moba(c.B, c.K));
  const std::vector<float> ref = floats(f, "logits");

  State one = m.new_state();
  const std::vector<float> all = m.forward(tokens, one, true);
  const double d_one = max_abs_diff(all, ref);
  EXPECT_LT(d_one, kTol);
  EXPECT_LT(state_diff(one, f, "state."), kTol);

  // Chunks of uneven sizes: the same function, bit for bit.
  State chunked = m.new_state();
  std::vector<float> rows;
  const int64_t sizes[] = {7, 1, 30, 64, 3};
  int64_t at = 0;
  for (int i = 0; at < T; ++i) {
    const int64_t n = std::min(sizes[i % 5], T - at);
    const std::vector<float> part =
        m.forward(std::span<const int32_t>(tokens).subspan(at, n), chunked, true);
    rows.insert(rows.end(), part.begin(), part.end());
    at += n;
  }
  EXPECT_EQ(rows, all);
  EXPECT_EQ(chunked, one);

  // The block choices and scores.
  State probe = m.new_state();
  double worst_score = 0;
  int compared = 0;
  check_block_choices(m, tokens, f, "", 0, probe, c.B, c.K, &worst_score, &compared);
  EXPECT_LT(worst_score, 1e-3);
  EXPECT_GT(compared, 0);
  std::printf("[rwkvx parity] %s moba B=%lld K=%d: logits %.2e, block scores %.2e, %d choices\n",
              c.file, static_cast<long long>(c.B), c.K, d_one, worst_score, compared);

  // moba differs from full attention once blocks are dropped (a silent fallback would pass above
  // only by accident).
  State full = m.new_state();
  EXPECT_GT(max_abs_diff(tiny().forward(tokens, full, true), all), 0.5);

  if (!c.greedy) return;
  const std::vector<int32_t> greedy = ints(f, "greedy.tokens");
  const std::vector<float> greedy_ref = floats(f, "greedy.logits");
  State s = one;
  int32_t next = argmax(row(all, T - 1, kV));
  double dg = 0;
  for (size_t g = 0; g < greedy.size(); ++g) {
    ASSERT_EQ(next, greedy[g]) << "greedy token " << g;
    const std::vector<float> lg = m.step(next, s);
    dg = std::max(dg, max_abs_diff(lg, row(greedy_ref, static_cast<int64_t>(g), kV)));
    next = argmax(lg);
  }
  EXPECT_LT(dg, kTol);
  const std::vector<float> k = concat_cache(f, "state.attn.k_cache", "greedy.state.attn.k_new", T, 32);
  const std::vector<float> v = concat_cache(f, "state.attn.v_cache", "greedy.state.attn.v_new", T, 32);
  EXPECT_LT(state_diff(s, f, "greedy.state.", &k, &v), kTol);
  // The greedy steps' block choices.
  State g_probe = one;
  double g_worst = 0;
  int g_compared = 0;
  check_block_choices(m, greedy, f, "greedy.", T, g_probe, c.B, c.K, &g_worst, &g_compared);
  EXPECT_LT(g_worst, 1e-3);
  std::printf("[rwkvx parity] %s greedy: logits %.2e, block scores %.2e\n", c.file, dg, g_worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RwkvXSparse,
                         ::testing::Values(SparseCase{"rwkvx/sparse-b32k2-seq300.safetensors", 32, 2, true},
                                           SparseCase{"rwkvx/sparse-b8k3-seq96.safetensors", 8, 3, false}),
                         [](const auto& info) { return std::string(info.param.greedy ? "B32K2" : "B8K3"); });

// While no complete past block can be dropped, moba is full attention bit for bit (same keys in the
// same order); the package's identities between the files follow.
TEST(RwkvX, MobaEqualsFullWhileEveryPastBlockIsSelected) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/sparse-b32k2-seq300.safetensors");
  std::vector<int32_t> tokens = ints(f, "tokens");
  tokens.resize(96);  // positions 0..95: at most 2 complete past blocks of 32
  State a = tiny().new_state(), b = a;
  EXPECT_EQ(tiny().forward(tokens, a, true), tiny().with_attention(moba(32, 2)).forward(tokens, b, true));
  EXPECT_EQ(a, b);
}

// per_head scope and K-1 past blocks (no package counterpart) against a float64 masked attention
// written from docs/rwkvx.md §6.2 / §6.5: current block causal ∪ the top blocks by q_h·mean(k_h).
TEST(RwkvX, PerHeadAndKMinusOneMatchAnIndependentMaskedAttention) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/sparse-b32k2-seq300.safetensors");
  std::vector<int32_t> tokens = ints(f, "tokens");
  tokens.resize(200);
  for (bool per_head : {false, true}) {
    for (bool k_minus_1 : {false, true}) {
      AttentionOptions o = moba(16, 3);
      o.moba_scope = per_head ? MobaScope::kPerHead : MobaScope::kShared;
      o.moba_past_k_minus_1 = k_minus_1;
      const Model m = tiny().with_attention(o);
      std::vector<std::vector<float>> q(2), y(2);
      ActivationTrace trace = [&](std::string_view name, int layer, const float* d, int64_t rows,
                                  int64_t cols) {
        if (name == "attn.q") q[layer].assign(d, d + rows * cols);
        if (name == "attn.y") y[layer].assign(d, d + rows * cols);
      };
      State s = m.new_state();
      m.forward(tokens, s, true, &trace);
      const int64_t T = static_cast<int64_t>(tokens.size()), B = 16;
      const int n_past = k_minus_1 ? 2 : 3;
      double worst = 0;
      int near_ties = 0;
      for (int j = 0; j < 2; ++j) {
        const float* k = s.k_cache(j);
        const float* v = s.v_cache(j);
        for (int64_t t = 0; t < T; ++t) {
          for (int h = 0; h < 2; ++h) {
            const int c0 = per_head ? h * 64 : 0, c1 = per_head ? c0 + 64 : kC;
            std::vector<std::pair<double, int64_t>> sc;
            for (int64_t b = 0; b < t / B; ++b) {
              double score = 0;
              for (int c = c0; c < c1; ++c) {
                double mean = 0;
                for (int64_t p = b * B; p < (b + 1) * B; ++p) mean += k[p * kC + c];
                score += q[j][t * kC + c] * mean / B;
              }
              sc.emplace_back(score, b);
            }
            std::sort(sc.begin(), sc.end(), std::greater<>());
            if (static_cast<int>(sc.size()) > n_past &&
                sc[n_past - 1].first - sc[n_past].first < 1e-3) {
              ++near_ties;
              continue;
            }
            std::vector<bool> mask(static_cast<size_t>(t + 1), false);
            for (int64_t p = (t / B) * B; p <= t; ++p) mask[p] = true;
            for (int i = 0; i < std::min<int>(n_past, static_cast<int>(sc.size())); ++i)
              for (int64_t p = sc[i].second * B; p < (sc[i].second + 1) * B; ++p) mask[p] = true;
            double mx = -1e300, sum = 0;
            std::vector<double> e(static_cast<size_t>(t + 1), 0.0);
            for (int64_t p = 0; p <= t; ++p) {
              if (!mask[p]) continue;
              double d = 0;
              for (int n = 0; n < 64; ++n) d += double(q[j][t * kC + h * 64 + n]) * k[p * kC + h * 64 + n];
              e[p] = d / 8.0;
              mx = std::max(mx, e[p]);
            }
            for (int64_t p = 0; p <= t; ++p)
              if (mask[p]) sum += (e[p] = std::exp(e[p] - mx));
            for (int n = 0; n < 64; ++n) {
              double acc = 0;
              for (int64_t p = 0; p <= t; ++p)
                if (mask[p]) acc += e[p] * v[p * kC + h * 64 + n];
              worst = std::max(worst, std::abs(acc / sum - y[j][t * kC + h * 64 + n]));
            }
          }
        }
      }
      std::printf("[rwkvx] moba B=16 K=3 %s %s: max |attention - float64 mask| %.2e (%d near-ties "
                  "skipped)\n",
                  per_head ? "per_head" : "shared", k_minus_1 ? "K-1" : "K", worst, near_ties);
      EXPECT_LT(worst, 1e-5);
      EXPECT_LT(near_ties, 10);
    }
  }
  // The four settings are four different functions.
  std::set<std::vector<float>> outs;
  for (bool per_head : {false, true})
    for (bool k_minus_1 : {false, true}) {
      AttentionOptions o = moba(16, 3);
      o.moba_scope = per_head ? MobaScope::kPerHead : MobaScope::kShared;
      o.moba_past_k_minus_1 = k_minus_1;
      State s = tiny().new_state();
      outs.insert(tiny().with_attention(o).forward(tokens, s));
    }
  EXPECT_EQ(outs.size(), 4u);
}

TEST(RwkvX, StateFilesCarryTheKvCachesBitExactly) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const Model m = tiny().with_attention(moba(8, 2));
  State s = m.new_state();
  m.forward(std::span<const int32_t>(tokens).first(50), s);
  const std::filesystem::path dir = test::scratch_dir();
  const std::string path = (dir / "rwkvx.state").string();
  save_state(path, s, m);
  LoadedState back = load_state(path, m);
  EXPECT_EQ(back.state, s);
  EXPECT_EQ(back.state.kv_length(), 50);
  // Continuing the restored state gives what the uninterrupted run gives.
  State restored = back.state;
  EXPECT_EQ(m.forward(std::span<const int32_t>(tokens).subspan(50), restored, true),
            m.forward(std::span<const int32_t>(tokens).subspan(50), s, true));
  EXPECT_EQ(restored, s);
  // A different history gives a different state and file.
  State other = m.new_state();
  m.forward(std::span<const int32_t>(tokens).subspan(1, 50), other);
  EXPECT_FALSE(other == back.state);
  // An empty cache round-trips too.
  save_state(path, m.new_state(), m);
  EXPECT_EQ(load_state(path, m).state, m.new_state());
  // A plain RWKV-7 state is refused by the hybrid and the other way round.
  const Model plain = Model::load_default();
  const std::string plain_path = (dir / "plain.state").string();
  save_state(plain_path, plain.new_state(), plain);
  EXPECT_THROW(load_state(plain_path, m, true), StateFileError);
  EXPECT_THROW(load_state(path, plain, true), StateFileError);
  EXPECT_THROW(save_state(path, plain.new_state(), m), InputError);
}

TEST(RwkvX, AFullKvCacheRefusesTheCallAndChangesNothing) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  AttentionOptions o;
  o.kv_max = 60;
  const Model m = tiny().with_attention(o);
  State s = m.new_state();
  m.forward(std::span<const int32_t>(tokens).first(58), s);
  const State before = s;
  try {
    m.forward(std::span<const int32_t>(tokens).subspan(58, 3), s);
    FAIL() << "expected ContextFullError";
  } catch (const ContextFullError& e) {
    EXPECT_NE(std::string(e.what()).find("60"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s, before);
  m.step(tokens[58], s);
  m.step(tokens[59], s);
  EXPECT_EQ(s.kv_length(), 60);
  EXPECT_THROW(m.step(tokens[60], s), ContextFullError);
  EXPECT_EQ(s.kv_length(), 60);
  // Without a limit the same call goes through.
  State t = before;
  tiny().forward(std::span<const int32_t>(tokens).subspan(58, 3), t);
  EXPECT_EQ(t.kv_length(), 61);
  EXPECT_THROW(tiny().with_attention(moba(0, 2)), InputError);
}

TEST(RwkvX, BatchedRowsEqualSingleSequences) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const Model m = tiny().with_attention(moba(8, 2));
  const std::span<const int32_t> a = std::span<const int32_t>(tokens).first(40),
                                 b = std::span<const int32_t>(tokens).subspan(20, 70);
  State sa = m.new_state(), sb = m.new_state(), ba = m.new_state(), bb = m.new_state();
  const std::vector<float> la = m.forward(a, sa), lb = m.forward(b, sb);
  const std::span<const int32_t> seqs[] = {a, b};
  State* states[] = {&ba, &bb};
  const std::vector<float> both = m.forward_batch(seqs, states);
  EXPECT_EQ(row(both, 0, kV), la);
  EXPECT_EQ(row(both, 1, kV), lb);
  EXPECT_EQ(ba, sa);
  EXPECT_EQ(bb, sb);
  const int32_t next[] = {5, 7};
  const std::vector<float> stepped = m.step_batch(next, states);
  EXPECT_EQ(row(stepped, 1, kV), m.step(7, sb));
  EXPECT_NE(row(stepped, 0, kV), row(stepped, 1, kV));
}

// The block means the moba attention keeps are rebuilt for another block size and dropped with
// the rows they summarise: a state that carries them gives what a state without them gives.
TEST(RwkvX, StaleBlockMeansAreNeverUsed) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const std::span<const int32_t> head = std::span<const int32_t>(tokens).first(60),
                                 tail = std::span<const int32_t>(tokens).subspan(60);
  const Model b8 = tiny().with_attention(moba(8, 2)), b16 = tiny().with_attention(moba(16, 2));
  State s = b8.new_state();
  b8.forward(head, s);
  State bare = s;
  bare.invalidate_block_means();
  EXPECT_EQ(b16.forward(tail, s, true), b16.forward(tail, bare, true));
  // Dropping rows: back to 40 cached rows (a shorter history for the attention blocks).
  State t = b8.new_state();
  b8.forward(head, t);
  State u = t;
  u.invalidate_block_means();
  t.resize_kv(40);
  u.resize_kv(40);
  EXPECT_EQ(b8.forward(tail, t, true), b8.forward(tail, u, true));
}

TEST(RwkvX, ABatchWithOneSequencePastTheKvLimitChangesNoState) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  AttentionOptions o;
  o.kv_max = 50;
  const Model m = tiny().with_attention(o);
  State a = m.new_state(), b = m.new_state();
  m.forward(std::span<const int32_t>(tokens).first(10), a);
  const State a0 = a, b0 = b;
  const std::span<const int32_t> seqs[] = {std::span<const int32_t>(tokens).first(20),
                                           std::span<const int32_t>(tokens).first(51)};
  State* states[] = {&a, &b};
  EXPECT_THROW(m.forward_batch(seqs, states), ContextFullError);
  EXPECT_EQ(a, a0);
  EXPECT_EQ(b, b0);
}

// Files built from the fixture's tensors with one thing wrong.
class RwkvXLoaderErrors : public ::testing::Test {
 protected:
  std::string write(const std::function<void(std::vector<io::TensorToWrite>&)>& edit,
                    const std::map<std::string, std::string>& metadata = {}) {
    set_ = io::read_safetensors(io::MappedFile::open(fixture("rwkvx/rwkvx-tiny.safetensors")));
    std::vector<io::TensorToWrite> t;
    for (const io::TensorView& v : set_.tensors())
      t.push_back({v.name, v.dtype, v.shape,
                   std::string_view(reinterpret_cast<const char*>(v.data), v.nbytes)});
    edit(t);
    const std::string path = (test::scratch_dir() / "bad.safetensors").string();
    io::write_safetensors(path, t, metadata);
    return path;
  }
  std::string load_error(const std::string& path) {
    try {
      Model::load(path);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    ADD_FAILURE() << "loaded " << path;
    return "";
  }
  io::TensorSet set_;
};

TEST_F(RwkvXLoaderErrors, RefusesWhatItCannotRunCorrectly) {
  auto rename_all = [](std::vector<io::TensorToWrite>& t, const std::string& from,
                       const std::string& to) {
    for (auto& x : t)
      if (x.name.rfind(from, 0) == 0) x.name = to + x.name.substr(from.size());
  };
  // A gap in the attention blocks.
  EXPECT_NE(load_error(write([&](auto& t) { rename_all(t, "moba.1.", "moba.2."); }))
                .find("moba.1 is missing"),
            std::string::npos);
  // An unknown tensor in an attention block, and outside both prefixes.
  EXPECT_NE(load_error(write([&](auto& t) {
              for (auto x : std::vector<io::TensorToWrite>(t))
                if (x.name == "moba.0.ln1.bias") t.push_back({"moba.0.att.bias", x.dtype, x.shape, x.bytes});
            })).find("unknown tensor 'moba.0.att.bias'"),
            std::string::npos);
  EXPECT_NE(load_error(write([&](auto& t) {
              for (auto x : std::vector<io::TensorToWrite>(t))
                if (x.name == "moba.0.ln1.bias") t.push_back({"extra.scale", x.dtype, x.shape, x.bytes});
            })).find("unknown tensor 'extra.scale'"),
            std::string::npos);
  // A block index with a leading zero is not block 1 (and would shadow it).
  EXPECT_NE(load_error(write([&](auto& t) {
              for (auto x : std::vector<io::TensorToWrite>(t))
                if (x.name == "moba.1.ln1.bias") t.push_back({"moba.01.ln1.bias", x.dtype, x.shape, x.bytes});
            })).find("unknown tensor 'moba.01.ln1.bias'"),
            std::string::npos);
  // An rwkv.* file without attention blocks is neither RWKV-X nor an EmbeddingRWKV backbone.
  EXPECT_NE(load_error(write([&](auto& t) {
              std::erase_if(t, [](const auto& x) { return x.name.rfind("moba.", 0) == 0; });
            })).find("not an RWKV-7 x070 checkpoint in a known naming convention"),
            std::string::npos);
  // Metadata that states the moba block size and top-k sets the defaults; nonsense is refused.
  const Model with_meta = Model::load(
      write([](auto&) {}, {{"moba_chunk_size", "32"}, {"moba_topk", "2"}}));
  EXPECT_EQ(with_meta.attention().moba_block, 32);
  EXPECT_EQ(with_meta.attention().moba_topk, 2);
  EXPECT_NE(load_error(write([](auto&) {}, {{"moba_topk", "3000000000"}})).find("moba_topk"),
            std::string::npos);
  // A missing tensor.
  EXPECT_NE(load_error(write([&](auto& t) {
              std::erase_if(t, [](const auto& x) { return x.name == "moba.1.ln2.bias"; });
            })).find("missing tensor 'moba.1.ln2.bias'"),
            std::string::npos);
  // A wrong shape.
  EXPECT_NE(load_error(write([&](auto& t) {
              for (auto& x : t)
                if (x.name == "moba.0.att.key.weight") x.shape = {64, 256};
            })).find("moba.0.att.key.weight"),
            std::string::npos);
  // N_r not a multiple of N_a: 4 RWKV blocks with 3 attention blocks.
  EXPECT_NE(load_error(write([&](auto& t) {
              for (auto x : std::vector<io::TensorToWrite>(t))
                if (x.name.rfind("moba.1.", 0) == 0) t.push_back({"moba.2." + x.name.substr(7), x.dtype, x.shape, x.bytes});
            })).find("multiple of N_a"),
            std::string::npos);
  // One attention block after all four RWKV blocks is a valid model (R0 R1 R2 R3 A0).
  const std::string one = write([&](auto& t) {
    std::erase_if(t, [](const auto& x) { return x.name.rfind("moba.1.", 0) == 0; });
  });
  const Model m = Model::load(one);
  EXPECT_EQ(m.geometry().n_attn, 1);
  std::vector<std::string> order;
  ActivationTrace trace = [&](std::string_view name, int layer, const float*, int64_t, int64_t) {
    if (name == "block_out" || name == "attn_block_out")
      order.push_back((name == "block_out" ? "R" : "A") + std::to_string(layer));
  };
  State s = m.new_state();
  const int32_t tok[] = {1, 2};
  m.forward(tok, s, false, &trace);
  EXPECT_EQ(order, (std::vector<std::string>{"R0", "R1", "R2", "R3", "A0"}));
}

// A checkpoint whose metadata says 2 attention blocks but whose tensors hold 1 used to load
// silently as a 1-block model; the contradiction is now refused, naming both counts.
TEST_F(RwkvXLoaderErrors, MetadataThatContradictsTheTensorsIsRefused) {
  const auto drop_block_1 = [](std::vector<io::TensorToWrite>& t) {
    std::erase_if(t, [](const auto& x) { return x.name.rfind("moba.1.", 0) == 0; });
  };
  const std::string e = load_error(write(drop_block_1, {{"n_attn_layer", "2"}}));
  EXPECT_NE(e.find("metadata 'n_attn_layer' says 2 attention blocks but the tensors hold 1"),
            std::string::npos) << e;
  EXPECT_NE(load_error(write([](auto&) {}, {{"wick.synth.attention_blocks", "3"}}))
                .find("says 3 attention blocks but the tensors hold 2"),
            std::string::npos);
  EXPECT_NE(load_error(write([](auto&) {}, {{"n_rwkv_layer", "6"}}))
                .find("says 6 RWKV blocks but the tensors hold 4"),
            std::string::npos);
  // Metadata that agrees (the fixture's own) loads.
  EXPECT_EQ(Model::load(write([](auto&) {}, {{"n_attn_layer", "2"}, {"n_rwkv_layer", "4"}}))
                .geometry()
                .n_attn,
            2);
}

}  // namespace
}  // namespace wick

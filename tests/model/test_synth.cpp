// Synthetic checkpoints (wick/synth.h, `wick synth`) and the streaming safetensors writer:
// geometry parsing, determinism, loading, numerical sanity over long contexts, greedy variety.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/fp16.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/rng.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

namespace fs = std::filesystem;

io::TensorSet read_st(const std::string& path) {
  return io::read_safetensors(io::MappedFile::open(path));
}

std::vector<float> decode(const io::TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::F32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::BF16 ? base::bf16_to_f32(h) : base::f16_to_f32(h);
    }
  }
  return out;
}

bool all_finite(const float* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

int32_t argmax_of(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

// Expects `f` to throw InputError whose message contains every string of `parts`.
template <class F>
void expect_input_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected wick::InputError, got: " << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Geometry

TEST(SynthGeometry, NamedSizesHaveTheReleasedDimensionsAndOfficialRanks) {
  struct Row {
    const char* name;
    int L, C, rw, ra, rv, rg;
  };
  for (Row r : {Row{"0.1b", 12, 768, 64, 64, 32, 128}, Row{"0.4b", 24, 1024, 64, 64, 32, 160},
                Row{"1.5b", 24, 2048, 96, 96, 64, 256}, Row{"2.9b", 32, 2560, 96, 96, 64, 320}}) {
    SCOPED_TRACE(r.name);
    const SynthGeometry s = parse_synth_geometry(r.name);
    EXPECT_EQ(s.label, r.name);
    const Geometry& g = s.geometry;
    EXPECT_EQ(g.n_layer, r.L);
    EXPECT_EQ(g.n_embd, r.C);
    EXPECT_EQ(g.head_size, 64);
    EXPECT_EQ(g.n_head, r.C / 64);
    EXPECT_EQ(g.ffn_dim, 4 * r.C);
    EXPECT_EQ(g.vocab, 65536);
    EXPECT_EQ(g.lora_w, r.rw);
    EXPECT_EQ(g.lora_a, r.ra);
    EXPECT_EQ(g.lora_v, r.rv);
    EXPECT_EQ(g.lora_g, r.rg);
  }
  EXPECT_EQ(parse_synth_geometry("1.5B").geometry, parse_synth_geometry("1.5b").geometry);
  EXPECT_EQ(synth_lora_rank(64, 1.8, 0.5), 32);  // the max(32, ...) floor
}

TEST(SynthGeometry, CustomForms) {
  SynthGeometry s = parse_synth_geometry("2:128");
  EXPECT_EQ(s.label, "2:128:65536");
  EXPECT_EQ(s.geometry.n_layer, 2);
  EXPECT_EQ(s.geometry.n_embd, 128);
  EXPECT_EQ(s.geometry.n_head, 2);
  EXPECT_EQ(s.geometry.ffn_dim, 512);
  EXPECT_EQ(s.geometry.vocab, 65536);
  EXPECT_EQ(s.geometry.lora_w, 32);
  EXPECT_EQ(s.geometry.lora_g, 32);
  s = parse_synth_geometry("3:256:512");
  EXPECT_EQ(s.label, "3:256:512");
  EXPECT_EQ(s.geometry.vocab, 512);
  EXPECT_EQ(s.geometry.lora_g, 64);
  EXPECT_EQ(parse_synth_geometry("12:768:65536").geometry, parse_synth_geometry("0.1b").geometry);
  // One layer: the loader reports no value-residual rank (block 0 does not use it).
  EXPECT_EQ(parse_synth_geometry("1:64:1").geometry.lora_v, 0);
}

TEST(SynthGeometry, MalformedInputsAreRejectedWithClearMessages) {
  const std::string forms = "expected 0.1b, 0.4b, 1.5b, 2.9b, rwkvx-0.2b, rwkvx-3.6b or L:C[:vocab]";
  for (const char* bad : {"", "0.2b", "12", "12:768:1:2", "a:768", "-1:768", "+2:128", "2: 128",
                          "2:128:", ":128", "2::128", "2:1e3", "9999999999:64"}) {
    SCOPED_TRACE(bad);
    std::string quoted = "'";
    quoted.append(bad).append("'");
    expect_input_error([&] { parse_synth_geometry(bad); }, {forms, quoted});
  }
  expect_input_error([] { parse_synth_geometry("2:100"); },
                     {"multiple of 64", "found 100", "'2:100'"});
  expect_input_error([] { parse_synth_geometry("2:0"); }, {"multiple of 64", "found 0"});
  expect_input_error([] { parse_synth_geometry("0:128"); }, {"layers", "found 0"});
  expect_input_error([] { parse_synth_geometry("2:128:0"); }, {"vocabulary", "found 0"});
  expect_input_error([] { parse_synth_geometry("2:65536"); }, {"[64, 32768]", "found 65536"});
  expect_input_error([] { make_synth_geometry(2, 96); }, {"multiple of 64", "found 96"});
}

TEST(SynthGeometry, Dtypes) {
  EXPECT_EQ(parse_synth_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_synth_dtype("FP16"), DType::F16);
  EXPECT_EQ(parse_synth_dtype("fp32"), DType::F32);
  expect_input_error([] { parse_synth_dtype("int8"); }, {"'int8'", "bf16, fp16 or fp32"});
}

// ---------------------------------------------------------------------------------------------
// Files

// synth.cpp draws element e of a tensor as SplitMix64(start + e * gamma).next(): the e-th output
// of rng.h's sequential stream.
TEST(SynthFile, RandomAccessMatchesTheSplitMix64Stream) {
  for (uint64_t start : {uint64_t{0}, uint64_t{12345}, ~uint64_t{0}}) {
    SplitMix64 seq(start);
    for (uint64_t e = 0; e < 100; ++e) {
      EXPECT_EQ(SplitMix64(start + e * 0x9E3779B97F4A7C15ull).next(), seq.next()) << e;
    }
  }
}

TEST(SynthFile, SameSeedSameBytesDifferentSeedDifferentWeights) {
  const fs::path dir = scratch_dir();
  const SynthGeometry g = parse_synth_geometry("2:128:512");
  const std::string a = (dir / "a.safetensors").string(), b = (dir / "b.safetensors").string(),
                    c = (dir / "c.safetensors").string(), d = (dir / "d.safetensors").string();
  const SynthSummary sa = write_synthetic_checkpoint(a, g, DType::BF16, 0);
  write_synthetic_checkpoint(b, g, DType::BF16, 0);
  // Tiny chunks take the single-threaded path for every tensor; the bytes must not change.
  write_synthetic_checkpoint(d, g, DType::BF16, 0, 1000);
  write_synthetic_checkpoint(c, g, DType::BF16, 1);
  const std::string bytes = read_file(a);
  EXPECT_EQ(sa.file_bytes, bytes.size());
  EXPECT_EQ(read_file(b), bytes);
  EXPECT_EQ(read_file(d), bytes);
  EXPECT_NE(read_file(c), bytes);
  // Every random tensor differs between seeds; the constant ones (norms) do not.
  io::TensorSet s0 = read_st(a), s1 = read_st(c);
  ASSERT_EQ(s0.size(), s1.size());
  int differing = 0;
  for (const io::TensorView& t : s0.tensors()) {
    const io::TensorView* u = s1.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(t.nbytes, u->nbytes);
    const bool same = std::memcmp(t.data, u->data, t.nbytes) == 0;
    const bool constant = t.name.find("ln") != std::string::npos || t.name.ends_with("att.w0") ||
                          t.name.ends_with("att.a0") || t.name.ends_with("att.v0");
    EXPECT_EQ(same, constant) << t.name;
    differing += !same;
  }
  EXPECT_GT(differing, 40);
  EXPECT_EQ(s1.metadata().at("wick.synth.seed"), "1");
}

TEST(SynthFile, LoadsWithTheRequestedGeometryInEveryDtype) {
  const fs::path dir = scratch_dir();
  const SynthGeometry g = parse_synth_geometry("3:128:512");
  std::map<DType, io::TensorSet> sets;
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(std::string(synth_dtype_name(dt)));
    const std::string p = (dir / (std::string(synth_dtype_name(dt)) + ".safetensors")).string();
    const SynthSummary s = write_synthetic_checkpoint(p, g, dt, 42);
    Model m = Model::load(p);
    EXPECT_EQ(m.geometry(), g.geometry);
    EXPECT_EQ(m.info().convention, NamingConvention::kOfficial);
    EXPECT_EQ(m.info().file_bytes, s.file_bytes);
    EXPECT_EQ(s.tensors, 33u * 3 + 6);
    // The model uses every parameter but block 0's v0/v1/v2.
    const uint64_t unused = 128 + 2 * 128 * static_cast<uint64_t>(synth_lora_rank(128, 1.3, 0.5));
    EXPECT_EQ(m.info().parameters + unused, s.parameters);
    ASSERT_EQ(m.info().dtype_parameters.size(), 1u);
    EXPECT_EQ(m.info().dtype_parameters[0].first, dt);

    io::TensorSet set = read_st(p);
    EXPECT_EQ(set.size(), s.tensors);
    EXPECT_EQ(set.metadata().at("wick.synth"), "1");
    EXPECT_EQ(set.metadata().at("wick.synth.geometry"), "3:128:512");
    EXPECT_EQ(set.metadata().at("wick.synth.dtype"), synth_dtype_name(dt));
    EXPECT_EQ(set.metadata().at("wick.synth.seed"), "42");
    EXPECT_NE(set.metadata().at("wick.synth.note").find("random"), std::string::npos);
    // Official names and shapes, block 0's value-residual tensors included.
    EXPECT_EQ(set.find("blocks.0.ln0.weight")->shape, (std::vector<int64_t>{128}));
    EXPECT_EQ(set.find("blocks.0.att.v0")->shape, (std::vector<int64_t>{1, 1, 128}));
    EXPECT_EQ(set.find("blocks.0.att.v1")->shape, (std::vector<int64_t>{128, 32}));
    EXPECT_EQ(set.find("blocks.0.att.v2")->shape, (std::vector<int64_t>{32, 128}));
    EXPECT_EQ(set.find("blocks.2.att.r_k")->shape, (std::vector<int64_t>{2, 64}));
    EXPECT_EQ(set.find("blocks.1.att.g1")->shape, (std::vector<int64_t>{128, 32}));
    EXPECT_EQ(set.find("blocks.1.ffn.value.weight")->shape, (std::vector<int64_t>{128, 512}));
    EXPECT_EQ(set.find("head.weight")->shape, (std::vector<int64_t>{512, 128}));
    sets.emplace(dt, std::move(set));
  }
  // The half-precision files hold the fp32 values, correctly rounded.
  for (const io::TensorView& t : sets[DType::F32].tensors()) {
    const std::vector<float> ref = decode(t);
    for (DType dt : {DType::BF16, DType::F16}) {
      const std::vector<float> got = decode(*sets[dt].find(t.name));
      const float rel = dt == DType::BF16 ? 0x1p-8f : 0x1p-11f;
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - ref[i]), rel * std::fabs(ref[i]) + 0x1p-24f)
            << t.name << "[" << i << "] " << synth_dtype_name(dt);
      }
    }
  }
  // A few statistics of the design (synth.cpp): decay biases spread fast to slow, mixes in (0, 1).
  const std::vector<float> w0 = decode(*sets[DType::F32].find("blocks.1.att.w0"));
  EXPECT_LT(*std::min_element(w0.begin(), w0.end()), -6.0f);
  EXPECT_GT(*std::max_element(w0.begin(), w0.end()), 2.0f);
  for (const char* n : {"blocks.0.att.x_r", "blocks.2.att.x_w", "blocks.1.ffn.x_k"}) {
    for (float x : decode(*sets[DType::F32].find(n))) {
      EXPECT_GT(x, 0.0f) << n;
      EXPECT_LT(x, 1.0f) << n;
    }
  }
}

TEST(SynthFile, ErrorsLeaveNothingBehind) {
  const fs::path dir = scratch_dir();
  const std::string p = (dir / "x.safetensors").string();
  SynthGeometry g = parse_synth_geometry("2:64:16");
  expect_input_error([&] { write_synthetic_checkpoint(p, g, DType::I8, 0); },
                     {"bf16, fp16 or fp32"});
  g.geometry.lora_w = 48;
  expect_input_error([&] { write_synthetic_checkpoint(p, g, DType::BF16, 0); }, {"geometry"});
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_THROW(write_synthetic_checkpoint((dir / "no" / "x.safetensors").string(),
                                          parse_synth_geometry("2:64:16"), DType::BF16, 0),
               FileError);
}

// ---------------------------------------------------------------------------------------------
// Numerics

// 4096 tokens through the parallel pass, in chunks continuing the State: logits and state stay
// finite and bounded, the per-token decays stay spread from fast to slow.
TEST(SynthStability, FiniteLogitsStateAndSaneDecaysOver4096Tokens) {
  const fs::path dir = scratch_dir();
  for (const char* geo : {"2:128:1024", "1:256:1024"}) {
    SCOPED_TRACE(geo);
    const std::string p = (dir / "m.safetensors").string();
    write_synthetic_checkpoint(p, parse_synth_geometry(geo), DType::BF16, 3);
    Model m = Model::load(p);
    State st = m.new_state();
    SplitMix64 rng(99);
    float wmin = 1.0f, wmax = 0.0f;
    bool decays_in_range = true;
    const ActivationTrace trace = [&](std::string_view name, int, const float* d, int64_t rows,
                                      int64_t cols) {
      if (name != "w_logdecay") return;
      for (int64_t i = 0; i < rows * cols; ++i) {
        const float w = std::exp(-std::exp(d[i]));  // the trace holds ln(-ln w)
        wmin = std::min(wmin, w);
        wmax = std::max(wmax, w);
        decays_in_range = decays_in_range && std::isfinite(d[i]) && w > 0.545f && w <= 1.0f;
      }
    };
    for (int chunk = 0; chunk < 8; ++chunk) {
      std::vector<int32_t> toks(512);
      for (int32_t& t : toks) t = static_cast<int32_t>(rng.next() % 1024);
      const std::vector<float> logits = m.forward(toks, st, false, chunk == 7 ? &trace : nullptr);
      ASSERT_TRUE(all_finite(logits.data(), logits.size())) << "chunk " << chunk;
      ASSERT_TRUE(all_finite(st.data(), st.size())) << "chunk " << chunk;
    }
    float smax = 0.0f;
    for (size_t i = 0; i < st.size(); ++i) smax = std::max(smax, std::fabs(st.data()[i]));
    EXPECT_LT(smax, 100.0f);  // about 6 in practice
    EXPECT_TRUE(decays_in_range);
    EXPECT_LT(wmin, 0.7f);    // channels that forget within a few tokens
    EXPECT_GT(wmax, 0.999f);  // channels that remember for thousands
  }
}

// RWKV-X hybrids: the released geometries, the loader's view of the file, determinism, and sane
// numerics over 2048 tokens with the KV caches growing (full and moba attention).
TEST(SynthRwkvX, GeometriesLoadAndStayFinite) {
  const SynthGeometry x02 = parse_synth_geometry("rwkvx-0.2b");
  EXPECT_EQ(x02.geometry.n_layer, 12);
  EXPECT_EQ(x02.geometry.n_embd, 768);
  EXPECT_EQ(x02.geometry.n_attn, 4);
  EXPECT_EQ(x02.geometry.attn_ffn_dim, 4 * 768);
  EXPECT_EQ(parse_synth_geometry("RWKVX-3.6B").geometry.n_attn, 8);
  expect_input_error([] { make_synth_geometry(5, 128, 256, 2); }, {"multiple of the attention blocks"});

  const fs::path dir = scratch_dir();
  const SynthGeometry sg = make_synth_geometry(4, 128, 512, 2);
  const std::string a = (dir / "a.safetensors").string(), b = (dir / "b.safetensors").string();
  write_synthetic_checkpoint(a, sg, DType::BF16, 5);
  write_synthetic_checkpoint(b, sg, DType::BF16, 5);
  EXPECT_EQ(read_file(a), read_file(b));
  const Model m = Model::load(a);
  EXPECT_EQ(m.geometry(), sg.geometry);
  EXPECT_EQ(m.info().architecture, "rwkv-x");
  AttentionOptions moba;
  moba.mode = AttentionMode::kMoba;
  moba.moba_block = 64;
  moba.moba_topk = 2;
  for (const Model& run : {m, m.with_attention(moba)}) {
    State st = run.new_state();
    SplitMix64 rng(7);
    for (int chunk = 0; chunk < 4; ++chunk) {
      std::vector<int32_t> toks(512);
      for (int32_t& t : toks) t = static_cast<int32_t>(rng.next() % 512);
      const std::vector<float> logits = run.forward(toks, st);
      ASSERT_TRUE(all_finite(logits.data(), logits.size())) << "chunk " << chunk;
      ASSERT_TRUE(all_finite(st.data(), st.size()));
      ASSERT_TRUE(all_finite(st.k_cache(1), static_cast<size_t>(st.kv_length()) * 128));
    }
    EXPECT_EQ(st.kv_length(), 2048);
  }
}

// Greedy decoding wanders over many tokens instead of repeating one.
TEST(SynthGreedy, DecodesVariedTokens) {
  const fs::path dir = scratch_dir();
  const std::string p = (dir / "m.safetensors").string();
  write_synthetic_checkpoint(p, parse_synth_geometry("2:128"), DType::BF16, 0);
  Model m = Model::load(p);
  State st = m.new_state();
  std::vector<float> logits = m.forward(std::vector<int32_t>{6699, 40, 33, 1000}, st);
  std::set<int32_t> seen;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(all_finite(logits.data(), logits.size()));
    const int32_t t = argmax_of(logits);
    seen.insert(t);
    logits = m.step(t, st);
  }
  EXPECT_GE(seen.size(), 32u);  // 64 distinct in practice
}

// ---------------------------------------------------------------------------------------------
// Streaming writer

TEST(SynthStreamingWriter, EqualsSerializeForAnyChunkSize) {
  const fs::path dir = scratch_dir();
  std::vector<float> f32(1000);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(i) * 0.5f - 7.0f;
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80, 0x1234, 0x4321};
  std::vector<int64_t> i64 = {int64_t{1} << 62, -5, 3};
  std::vector<float> scalar = {42.0f};
  auto bytes_of = [](const auto& v) {
    return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  const std::vector<io::TensorToWrite> in = {
      {"big", DType::F32, {10, 100}, bytes_of(f32)},
      {"empty", DType::F16, {0, 4}, std::string_view()},
      {"bf", DType::BF16, {5}, bytes_of(bf16)},
      {"scalar", DType::F32, {}, bytes_of(scalar)},
      {"i64", DType::I64, {3}, bytes_of(i64)},
  };
  const std::map<std::string, std::string> meta = {{"k", "v"}, {"wick.synth", "1"}};
  const std::string expect = io::serialize_safetensors(in, meta);
  std::vector<io::TensorSpec> specs;
  for (const auto& t : in) specs.push_back({t.name, t.dtype, t.shape});
  EXPECT_EQ(io::safetensors_header(specs, meta),
            expect.substr(0, io::safetensors_header(specs, meta).size()));

  for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{8} << 20}) {
    SCOPED_TRACE(chunk);
    const std::string p = (dir / "s.safetensors").string();
    std::vector<uint64_t> next(in.size(), 0);
    const uint64_t n = io::write_safetensors_streaming(
        p, specs, meta,
        [&](size_t i, uint64_t off, std::span<char> out) {
          ASSERT_LT(i, in.size());
          EXPECT_EQ(off, next[i]);  // front to back, no gaps
          const size_t es = dtype_size(in[i].dtype);
          EXPECT_EQ(off % es, 0u);
          EXPECT_EQ(out.size() % es, 0u);
          EXPECT_GT(out.size(), 0u);
          EXPECT_LE(out.size(), std::max(chunk, es));
          std::memcpy(out.data(), in[i].bytes.data() + off, out.size());
          next[i] = off + out.size();
        },
        chunk);
    EXPECT_EQ(n, expect.size());
    EXPECT_EQ(read_file(p), expect);
  }
  // A filler that throws leaves the previous file in place and no temporary file.
  const std::string p = (dir / "s.safetensors").string();
  EXPECT_THROW(io::write_safetensors_streaming(p, specs, meta,
                                               [](size_t i, uint64_t, std::span<char>) {
                                                 if (i == 2) throw std::runtime_error("boom");
                                               }),
               std::runtime_error);
  EXPECT_EQ(read_file(p), expect);
  int entries = 0;
  for (auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
  // Bad specs are refused before anything is written.
  std::vector<io::TensorSpec> dup = {{"a", DType::F32, {1}}, {"a", DType::F32, {1}}};
  EXPECT_THROW(io::write_safetensors_streaming((dir / "dup.safetensors").string(), dup, {},
                                               [](size_t, uint64_t, std::span<char>) {}),
               Error);
  EXPECT_FALSE(fs::exists(dir / "dup.safetensors"));
}

// ---------------------------------------------------------------------------------------------
// Command line

TEST(SynthCli, WritesTheLibraryFileAndReports) {
  const fs::path dir = scratch_dir();
  const std::string out = (dir / "cli.safetensors").string();
  CliRun r = run_wick("synth --geometry 2:128:512 --dtype fp16 --seed 7 --out " + shell_quote(out) +
                      " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["path"], out);
  EXPECT_EQ(j["geometry"], "2:128:512");
  EXPECT_EQ(j["dtype"], "fp16");
  EXPECT_EQ(j["seed"], 7);
  EXPECT_EQ(j["dims"]["n_embd"], 128);
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), fs::file_size(out));
  EXPECT_GT(j["parameters"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j.contains("time_ms"));
  const std::string lib = (dir / "lib.safetensors").string();
  write_synthetic_checkpoint(lib, parse_synth_geometry("2:128:512"), DType::F16, 7);
  EXPECT_EQ(read_file(out), read_file(lib));

  // Defaults: bf16, seed 0. Text output names the path, parameters and size.
  r = run_wick("synth --geometry 1:64:16 --out " + shell_quote(out));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(out), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parameters"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes"), std::string::npos) << r.out;
  write_synthetic_checkpoint(lib, parse_synth_geometry("1:64:16"), DType::BF16, 0);
  EXPECT_EQ(read_file(out), read_file(lib));

  r = run_wick("synth --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("default bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default 0"), std::string::npos) << r.out;
}

TEST(SynthCli, BadInputExitsWithStatus1) {
  const fs::path dir = scratch_dir();
  const std::string out = (dir / "x.safetensors").string();
  CliRun r = run_wick("synth --geometry 2:100 --out " + shell_quote(out));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("multiple of 64"), std::string::npos) << r.err;
  r = run_wick("synth --geometry 0.1b --dtype int4 --out " + shell_quote(out));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("int4"), std::string::npos) << r.err;
  r = run_wick("synth --geometry 2:64:16 --out " +
               shell_quote((dir / "missing" / "x.safetensors").string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace wick::test

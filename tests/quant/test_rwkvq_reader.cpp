// The .rwkvq reader and dequantiser against the fixtures written by rwkv-quant itself
// (../shared/fixtures/rwkvq): every tensor's float32 dequantisation must hash to
// dequant_sha256.json (C1), the sample tensors must match element for element, the worked
// examples of docs/rwkvq-format.md §2 must come out exactly, and damaged files must be refused
// with a message that names the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "base/sha256.h"
#include "base/fp16.h"
#include "quant/dequant.h"
#include "quant/rwkvq.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick {
namespace {

using quant::Layout;
using quant::RwkvqFile;

RwkvqFile open_fixture(const std::string& name) {
  return RwkvqFile::open(io::MappedFile::open(test::fixture("rwkvq/" + name)));
}

std::string sha_of(const std::vector<float>& v) {
  base::Sha256 h;
  h.update(v.data(), v.size() * sizeof(float));  // little-endian host
  return h.hex_digest();
}

TEST(RwkvqReader, EveryTensorOfBothFixturesDequantisesToTheReferenceHash) {
  const nlohmann::json ref =
      nlohmann::json::parse(test::read_file(test::fixture("rwkvq/dequant_sha256.json")));
  for (const char* preset : {"reduction", "compression"}) {
    SCOPED_TRACE(preset);
    RwkvqFile f = open_fixture(std::string("tiny_") + preset + ".rwkvq");
    const nlohmann::json& want = ref.at(preset);
    ASSERT_EQ(f.tensors().size(), want.size());
    int checked = 0;
    for (const quant::QuantTensor& t : f.tensors()) {
      SCOPED_TRACE(t.key);
      ASSERT_TRUE(want.contains(t.key));
      EXPECT_EQ(std::string(quant::layout_name(t.layout)), want[t.key]["kind"].get<std::string>());
      EXPECT_EQ(t.shape, want[t.key]["shape"].get<std::vector<int64_t>>());
      EXPECT_EQ(sha_of(quant::dequantize(t)), want[t.key]["sha256_f32le"].get<std::string>());
      ++checked;
    }
    EXPECT_EQ(checked, 72);
  }
}

TEST(RwkvqReader, SampleTensorsMatchElementForElementAndRowsAreIndependent) {
  for (const char* preset : {"reduction", "compression"}) {
    SCOPED_TRACE(preset);
    RwkvqFile f = open_fixture(std::string("tiny_") + preset + ".rwkvq");
    io::TensorSet samples =
        test::load_fixture_tensors(std::string("rwkvq/tiny_") + preset + "_dequant_samples.safetensors");
    ASSERT_EQ(samples.size(), 7u);
    for (const io::TensorView& s : samples.tensors()) {
      SCOPED_TRACE(s.name);
      const quant::QuantTensor* t = f.find(s.name);
      ASSERT_NE(t, nullptr);
      const std::vector<float> want = test::floats(samples, s.name);
      const std::vector<float> got = quant::dequantize(*t);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
      // One row at a time (the embedding gather) gives the same bits.
      const int64_t cols = t->cols();
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r : {int64_t{0}, t->rows() / 2, t->rows() - 1}) {
        quant::dequantize_rows(*t, r, 1, row.data());
        EXPECT_EQ(std::memcmp(row.data(), want.data() + r * cols, cols * 4), 0) << "row " << r;
      }
    }
  }
}

TEST(RwkvqReader, ManifestAndRecordsAreRead) {
  RwkvqFile f = open_fixture("tiny_compression.rwkvq");
  const quant::Manifest& m = f.manifest();
  EXPECT_EQ(m.format_version, 2);
  EXPECT_EQ(m.naming, "world");
  EXPECT_EQ(m.n_layer, 2);
  EXPECT_EQ(m.n_embd, 256);
  EXPECT_EQ(m.head_size, 64);
  EXPECT_EQ(m.vocab_size, 256);
  ASSERT_TRUE(m.tokenizer.has_value());
  // Manifest order is the source state-dict order (emb first in the fixture).
  EXPECT_EQ(f.tensors().front().key, "emb.weight");
  const quant::QuantTensor* key = f.find("blocks.1.att.key.weight");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->layout, Layout::kSb6);
  EXPECT_EQ(key->bits, 5);
  EXPECT_EQ(key->describe(), "sb6@5");
  EXPECT_EQ(f.find("blocks.0.ffn.key.weight")->bits, 4);
  const quant::QuantTensor* w1 = f.find("blocks.0.att.w1");
  EXPECT_EQ(w1->layout, Layout::kAsym);
  EXPECT_EQ(w1->n_blocks, 2);  // 96 columns at gs 64: one full block and a partial one
  EXPECT_TRUE(w1->transposed);
  EXPECT_FALSE(key->transposed);
  EXPECT_EQ(f.find("blocks.0.att.g1")->layout, Layout::kRtn);
  EXPECT_EQ(f.find("blocks.0.ln1.weight")->layout, Layout::kDense);
  RwkvqFile r = open_fixture("tiny_reduction.rwkvq");
  EXPECT_EQ(r.find("blocks.1.att.key.weight")->describe(), "sym@8");
  EXPECT_EQ(r.find("blocks.0.ffn.value.weight")->describe(), "sym@6");
}

// docs/rwkvq-format.md §2.2 and §2.3 worked examples, value for value.
TEST(RwkvqReader, WorkedExamplesOfTheSpecDecodeExactly) {
  RwkvqFile c = open_fixture("tiny_compression.rwkvq");
  const quant::QuantTensor& k = *c.find("blocks.1.att.key.weight");
  std::vector<float> row(256);
  quant::dequantize_rows(k, 5, 1, row.data());
  EXPECT_EQ(row[0], -0.040740967f);
  EXPECT_FLOAT_EQ(row[17], 0.6980896f);
  EXPECT_EQ(base::f16_at(k.gw_d->data, 5 * 1), base::f16_to_f32(0x0e68));

  RwkvqFile r = open_fixture("tiny_reduction.rwkvq");
  quant::dequantize_rows(*r.find("blocks.1.att.key.weight"), 5, 1, row.data());
  EXPECT_FLOAT_EQ(row[0], -0.04951811f);
  EXPECT_FLOAT_EQ(row[1], 0.0262928f);
  EXPECT_FLOAT_EQ(row[2], 0.012269974f);
  EXPECT_FLOAT_EQ(row[3], -0.04206848f);
  std::vector<float> vrow(512);
  quant::dequantize_rows(*r.find("blocks.0.ffn.value.weight"), 0, 1, vrow.data());
  EXPECT_FLOAT_EQ(vrow[0], -0.061893463f);
  EXPECT_FLOAT_EQ(vrow[1], -0.019805908f);
  EXPECT_FLOAT_EQ(vrow[2], 0.07179642f);
  // The all-zero embedding row decodes to exact zeros in both files.
  for (RwkvqFile* f : {&c, &r}) {
    quant::dequantize_rows(*f->find("emb.weight"), 0, 1, row.data());
    for (float v : row) EXPECT_EQ(v, 0.f);
  }
}

TEST(RwkvqReader, HalfConversionKeepsSubnormalsAndRoundsToNearestEven) {
  // Every fp16 pattern (NaNs aside) survives the round trip through float32.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    if ((b & 0x7c00) == 0x7c00 && (b & 0x3ff)) continue;
    ASSERT_EQ(base::f32_to_f16(base::f16_to_f32(b)), b) << std::hex << h;
  }
  EXPECT_EQ(base::f16_to_f32(0x0001), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(base::f16_to_f32(0x02df), 735 * std::ldexp(1.f, -24));
  // Halfway cases go to even; just above halfway rounds up.
  EXPECT_EQ(base::f32_to_f16(std::ldexp(1.f, -25)), 0x0000);
  EXPECT_EQ(base::f32_to_f16(std::ldexp(3.f, -25)), 0x0002);
  EXPECT_EQ(base::f32_to_f16(std::nextafter(std::ldexp(1.f, -25), 1.f)), 0x0001);
  EXPECT_EQ(base::f32_to_f16(1.f + std::ldexp(1.f, -11)), 0x3c00);       // tie to even (down)
  EXPECT_EQ(base::f32_to_f16(1.f + 3 * std::ldexp(1.f, -11)), 0x3c02);   // tie to even (up)
  EXPECT_EQ(base::f32_to_f16(65520.f), 0x7c00);                          // rounds to infinity
  EXPECT_EQ(base::f32_to_f16(65504.f), 0x7bff);
  EXPECT_EQ(base::f32_to_f16(-0.f), 0x8000);
}

// ---- damaged and foreign files ----

// Rewrites the fixture with its header JSON edited by `edit` (offsets unchanged) and, optionally,
// the file cut to `keep` bytes.
std::string damaged_copy(const std::string& fixture, const std::function<void(nlohmann::json&)>& edit,
                         size_t keep = 0) {
  std::string bytes = test::read_file(test::fixture("rwkvq/" + fixture));
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  nlohmann::json manifest = nlohmann::json::parse(header["__metadata__"]["rwkvq"].get<std::string>());
  nlohmann::json hj = nlohmann::json::parse(header.dump());
  edit(hj);
  (void)manifest;
  std::string text = hj.dump();
  while (text.size() % 8) text += ' ';
  const uint64_t len = text.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  out += text + bytes.substr(8 + n);
  if (keep) out.resize(keep);
  const auto path = test::scratch_dir() / "damaged.rwkvq";
  test::write_file(path, out);
  return path.string();
}

void edit_manifest(nlohmann::json& header, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json m = nlohmann::json::parse(header["__metadata__"]["rwkvq"].get<std::string>());
  edit(m);
  header["__metadata__"]["rwkvq"] = m.dump();
}

template <typename E>
std::string error_of(const std::string& path) {
  try {
    RwkvqFile::open(io::MappedFile::open(path));
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no error";
}

TEST(RwkvqReader, UndamagedCopyStillOpens) {
  const std::string p = damaged_copy("tiny_reduction.rwkvq", [](nlohmann::json&) {});
  EXPECT_NO_THROW(RwkvqFile::open(io::MappedFile::open(p)));
}

TEST(RwkvqReader, TruncatedBufferIsRefused) {
  const size_t size = std::filesystem::file_size(test::fixture("rwkvq/tiny_reduction.rwkvq"));
  const std::string p = damaged_copy("tiny_reduction.rwkvq", [](nlohmann::json&) {}, size - 100);
  EXPECT_NE(error_of<FormatError>(p).find("expected"), std::string::npos) << error_of<FormatError>(p);
}

TEST(RwkvqReader, WrongBitsAreRefused) {
  const std::string p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["tensors"]["blocks.1.att.key.weight"]["bits"] = 6; });
  });
  const std::string e = error_of<FormatError>(p);
  EXPECT_NE(e.find("blocks.1.att.key.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("bits 5"), std::string::npos) << e;
  EXPECT_NE(e.find("bits 6"), std::string::npos) << e;
}

TEST(RwkvqReader, UnknownLayoutIsRefused) {
  const std::string p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["tensors"]["blocks.0.att.key.weight"]["kind"] = "mxfp4"; });
  });
  const std::string e = error_of<FormatError>(p);
  EXPECT_NE(e.find("'mxfp4'"), std::string::npos) << e;
  EXPECT_NE(e.find("dense, sb6, sym, asym, rtn"), std::string::npos) << e;
}

TEST(RwkvqReader, NewerFormatVersionIsRefused) {
  const std::string p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["format_version"] = 3; });
  });
  const std::string e = error_of<CheckpointError>(p);
  EXPECT_NE(e.find("format_version 3"), std::string::npos) << e;
}

TEST(RwkvqReader, VersionOneRecordsWithoutNewKeysAreDerived) {
  const std::string p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) {
      m["format_version"] = 1;
      m.erase("config");
      m.erase("tokenizer");
      for (auto& [k, rec] : m["tensors"].items()) {
        rec.erase("n_blocks");
        rec.erase("transposed");
      }
    });
  });
  RwkvqFile f = RwkvqFile::open(io::MappedFile::open(p));
  EXPECT_EQ(f.manifest().format_version, 1);
  EXPECT_TRUE(f.find("blocks.1.att.g2")->transposed);
  EXPECT_FALSE(f.find("blocks.1.att.value.weight")->transposed);
  EXPECT_EQ(f.find("blocks.0.att.w1")->n_blocks, 2);
}

TEST(RwkvqReader, ManifestAndTensorsThatDisagreeAreRefused) {
  // A record whose shape does not match its buffers.
  std::string p = damaged_copy("tiny_reduction.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["tensors"]["blocks.0.att.key.weight"]["shape"] = {256, 512}; });
  });
  std::string e = error_of<FormatError>(p);
  EXPECT_NE(e.find("blocks.0.att.key.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
  // A buffer no record lists.
  p = damaged_copy("tiny_reduction.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["tensors"].erase("ln_out.bias"); });
  });
  e = error_of<FormatError>(p);
  EXPECT_NE(e.find("ln_out.bias::dense"), std::string::npos) << e;
  EXPECT_NE(e.find("no record claims"), std::string::npos) << e;
  // A field listed whose buffer is absent.
  p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) {
      m["tensors"]["blocks.0.ffn.key.weight"]["fields"].push_back("gw_qh2");
    });
  });
  e = error_of<FormatError>(p);
  EXPECT_NE(e.find("blocks.0.ffn.key.weight::gw_qh2"), std::string::npos) << e;
  // Wrong n_blocks (the truncation bug the field exists to catch).
  p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["tensors"]["blocks.0.att.w1"]["n_blocks"] = 1; });
  });
  e = error_of<FormatError>(p);
  EXPECT_NE(e.find("n_blocks 2"), std::string::npos) << e;
  // Geometry that contradicts the embedding.
  p = damaged_copy("tiny_compression.rwkvq", [](nlohmann::json& h) {
    edit_manifest(h, [](nlohmann::json& m) { m["vocab_size"] = 65536; });
  });
  e = error_of<FormatError>(p);
  EXPECT_NE(e.find("vocab_size"), std::string::npos) << e;
}

TEST(RwkvqReader, ForeignFilesAreNamed) {
  const auto dir = test::scratch_dir();
  test::write_file(dir / "legacy.rwkvq", std::string("PK\x03\x04", 4) + std::string(100, '\0'));
  EXPECT_NE(error_of<CheckpointError>((dir / "legacy.rwkvq").string()).find("legacy pickle"),
            std::string::npos);
  // A plain safetensors checkpoint is not an .rwkvq.
  const std::string e = error_of<FormatError>(test::fixture("rwkvq/tiny_world_dense.safetensors"));
  EXPECT_NE(e.find("\"rwkvq\""), std::string::npos) << e;
}

}  // namespace
}  // namespace wick

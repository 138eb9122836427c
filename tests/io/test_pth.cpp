// Tests of the PyTorch .pth reader (io/pth.h), its zip directory reader (io/zip_reader.h) and
// its restricted unpickler (io/pickle.h): the fixture checkpoints load with the same tensors as
// their safetensors twins, and crafted damaged or hostile archives (built below, byte by byte)
// are refused with the right typed error, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ctime>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/memory.h"
#include "io/pickle.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "io/zip_reader.h"
#include "pth_writer.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick::io {
namespace {

using namespace wick::test::pth;

// Writes a torch.save-style archive whose data.pkl is `pickle` straight to `path`, without
// building the archive in memory (the pickle may be tens of MB): data.pkl is the last entry, so
// only the central directory offset moves when the pickle bytes are spliced in.
void write_pth_with_pickle(const std::filesystem::path& path, const std::string& pickle) {
  std::vector<ZipItem> items = {{"archive/byteorder", "little"}, {"archive/data.pkl", ""}};
  items[1].size = pickle.size();  // (the CRC is of the empty string; readers do not check it)
  std::string zip = make_zip(items);
  const size_t split = zip.find(std::string("PK\x01\x02", 4));
  patch32(zip, zip.size() - 22 + 16, static_cast<uint32_t>(split + pickle.size()));
  std::ofstream f(path, std::ios::binary);
  f.write(zip.data(), static_cast<std::streamsize>(split));
  f.write(pickle.data(), static_cast<std::streamsize>(pickle.size()));
  f.write(zip.data() + split, static_cast<std::streamsize>(zip.size() - split));
  ASSERT_TRUE(f.good());
}

// Writes `bytes` to the scratch folder and reads it with read_pth.
TensorSet read_bytes_as_pth(const std::string& bytes, std::string* path_out = nullptr) {
  const auto path = test::scratch_dir() / "crafted.pth";
  test::write_file(path, bytes);
  if (path_out) *path_out = path.string();
  return read_pth(MappedFile::open(path.string()));
}

// Runs `f`, which must throw a FormatError that is not an UnsafePickleError; returns what().
std::string format_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UnsafePickleError& e) {
    ADD_FAILURE() << "expected a plain FormatError, got UnsafePickleError: " << e.what();
    return e.what();
  } catch (const FormatError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected FormatError, got another exception: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected FormatError, nothing was thrown";
  return "";
}

std::string unsafe_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UnsafePickleError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected UnsafePickleError, got: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected UnsafePickleError, nothing was thrown";
  return "";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// Checks that two sets hold the same tensors (names, dtypes, shapes, bytes).
void expect_same_tensors(const TensorSet& a, const TensorSet& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const TensorView& t : a.tensors()) {
    const TensorView* u = b.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(t.dtype, u->dtype) << t.name;
    EXPECT_EQ(t.shape, u->shape) << t.name;
    ASSERT_EQ(t.nbytes, u->nbytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, u->data, t.nbytes), 0) << t.name;
  }
}

// ---------------------------------------------------------------------------------------------
// Fixtures

TEST(PthFixture, TinyMatchesSafetensors) {
  auto file = MappedFile::open(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"));
  EXPECT_TRUE(looks_like_zip(*file));
  TensorSet pth = read_pth(file);
  TensorSet st = test::load_fixture_tensors("tiny-rwkv7/tiny-rwkv7-834K.safetensors");
  EXPECT_EQ(pth.size(), 399u);
  expect_same_tensors(pth, st);
  EXPECT_EQ(pth.source(), file->path());
  ASSERT_EQ(pth.files().size(), 1u);
  EXPECT_EQ(pth.files()[0], file);
  EXPECT_TRUE(pth.metadata().empty());
  // Views point into the mapping.
  for (const TensorView& t : pth.tensors()) {
    EXPECT_GE(t.data, file->data());
    EXPECT_LE(t.data + t.nbytes, file->data() + file->size());
  }
}

TEST(PthFixture, RwkvxMatchesSafetensors) {
  TensorSet pth = read_pth(MappedFile::open(test::fixture("rwkvx/rwkvx-tiny.pth")));
  TensorSet st = test::load_fixture_tensors("rwkvx/rwkvx-tiny.safetensors");
  EXPECT_EQ(pth.size(), 157u);
  expect_same_tensors(pth, st);
}

TEST(PthFixture, TaskCheckpointsLoad) {
  TensorSet emb = read_pth(MappedFile::open(test::fixture("tasks/er_emb_model.pth")));
  EXPECT_EQ(emb.size(), 146u);
  const TensorView* e = emb.find("rwkv.emb.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::BF16);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{65536, 64}));
  EXPECT_EQ(e->nbytes, 65536u * 64 * 2);

  TensorSet rr = read_pth(MappedFile::open(test::fixture("tasks/er_reranker.pth")));
  EXPECT_EQ(rr.size(), 71u);
  ASSERT_NE(rr.find("reranker.emb.weight"), nullptr);
  EXPECT_EQ(rr.find("reranker.emb.weight")->shape, (std::vector<int64_t>{1, 64}));
  ASSERT_EQ(rr.metadata().count("reranker_layer_idx"), 1u);
  EXPECT_EQ(rr.metadata().at("reranker_layer_idx"), "[1, 3]");

  TensorSet legacy = read_pth(MappedFile::open(test::fixture("tasks/er_reranker_legacy.pth")));
  EXPECT_EQ(legacy.size(), 71u);
  EXPECT_NE(legacy.find("reranker.token.weight"), nullptr);
  EXPECT_TRUE(legacy.metadata().empty());
}

TEST(PthFixture, ZipDirectoryOfFixture) {
  auto file = MappedFile::open(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"));
  ZipReader zip(file);
  EXPECT_EQ(zip.entries().size(), 401u);
  const ZipEntry* v = zip.find("tiny-rwkv7-834K/version");
  ASSERT_NE(v, nullptr);
  uint64_t n = 0;
  const uint8_t* p = zip.data(*v, &n);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(p), n), "3\n");
  EXPECT_EQ(zip.find("nope"), nullptr);
  EXPECT_HAS(format_error([&] { zip.data("nope", &n); }), "'nope'");
}

TEST(PthFixture, LooksLikeZip) {
  const std::string st = test::fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors");
  EXPECT_FALSE(looks_like_zip(*MappedFile::open(st)));
  const uint8_t two[] = {'P', 'K'};
  EXPECT_FALSE(looks_like_zip(*MappedFile::borrow(two, 2, "two")));
}

// ---------------------------------------------------------------------------------------------
// Crafted archives that must load

TEST(PthCrafted, DtypesSharingOffsetsAndValues) {
  Pk p;
  p.proto(2).global("collections", "OrderedDict").op(')').op('R').op('q').op(0).mark();
  // f32 [2, 3] from storage 0 at offset 0, and a [3] view at offset 3 of the same storage.
  p.str("a.weight");
  put_tensor(p, {"", "FloatStorage", "0", 6, 0, {2, 3}});
  p.str("a.tail");
  put_tensor(p, {"", "FloatStorage", "0", 6, 3, {3}});
  p.str("h");
  put_tensor(p, {"", "HalfStorage", "1", 4, 0, {4, 1}, std::vector<int64_t>{1, 99}});
  p.str("bf");
  put_tensor(p, {"", "BFloat16Storage", "2", 2, 1, {}});  // scalar at offset 1
  p.str("ids");
  put_tensor(p, {"", "LongStorage", "3", 2, 0, {1, 2}, std::vector<int64_t>{7, 1}});
  p.str("empty");
  put_tensor(p, {"", "IntStorage", "4", 0, 0, {0, 5}, std::vector<int64_t>{3, 3}});
  // _rebuild_parameter(tensor, requires_grad, hooks)
  p.str("param").global("torch._utils", "_rebuild_parameter").mark();
  put_tensor(p, {"", "CharStorage", "5", 3, 0, {3}});
  p.op(0x88).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
  // Non-tensor values become JSON metadata.
  p.str("layers").op(']').mark().integer(1).integer(3).op('e');
  p.str("cfg").op('}').str("eps").op('G');
  for (uint8_t c : {0x3f, 0xf8, 0, 0, 0, 0, 0, 0}) p.op(c);  // 1.5 big-endian
  p.op('s');
  p.str("misc").mark().op('N').op(0x89).integer(-7).integer(1ll << 40).str("q\"\n").op('t');
  p.op('u');
  // BUILD with OrderedDict state (`_metadata`) is accepted and ignored.
  p.op('}').str("_metadata").op('}').op('s').op('b').op('.');

  const std::string f32 = pattern_bytes(24, 1), f16 = pattern_bytes(8, 2), bf = pattern_bytes(4, 3),
                    i64 = pattern_bytes(16, 4), i8 = pattern_bytes(3, 5);
  const std::string bytes = make_zip(pth_items(
      p.b, {{"0", f32}, {"1", f16}, {"2", bf}, {"3", i64}, {"4", ""}, {"5", i8}}, "my_model"));
  TensorSet s = read_bytes_as_pth(bytes);
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s.tensors()[0].name, "a.weight");  // pickle order kept
  const TensorView* a = s.find("a.weight");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(a->data, f32.data(), 24), 0);
  const TensorView* tail = s.find("a.tail");
  EXPECT_EQ(tail->nbytes, 12u);
  EXPECT_EQ(tail->data, a->data + 12);
  EXPECT_EQ(s.find("h")->dtype, DType::F16);
  EXPECT_EQ(s.find("bf")->dtype, DType::BF16);
  EXPECT_TRUE(s.find("bf")->shape.empty());
  EXPECT_EQ(s.find("bf")->nbytes, 2u);
  EXPECT_EQ(std::memcmp(s.find("bf")->data, bf.data() + 2, 2), 0);
  EXPECT_EQ(s.find("ids")->dtype, DType::I64);
  EXPECT_EQ(s.find("empty")->nbytes, 0u);
  EXPECT_EQ(s.find("param")->dtype, DType::I8);
  EXPECT_EQ(s.metadata().at("layers"), "[1, 3]");
  EXPECT_EQ(s.metadata().at("cfg"), "{\"eps\": 1.5}");
  EXPECT_EQ(s.metadata().at("misc"), "[null, false, -7, 1099511627776, \"q\\\"\\u000a\"]");
}

TEST(PthCrafted, Protocol4FramesMemoizeAndStackGlobal) {
  // Protocol 4 spelling: FRAME, SHORT_BINUNICODE, STACK_GLOBAL, MEMOIZE, BINGET.
  Pk p;
  p.proto(4).op(0x95);
  put64(p.b, 0);  // frame length (checked against the data, otherwise unused)
  auto sstr = [&](const std::string& s) {
    p.op(0x8c).op(static_cast<uint8_t>(s.size())).raw(s).op(0x94);
  };
  p.op('}').op(0x94).mark();
  sstr("w");
  sstr("torch._utils");
  sstr("_rebuild_tensor_v2");
  p.op(0x93).op(0x94);  // memo 4
  p.mark().mark();
  sstr("storage");
  sstr("torch");
  sstr("FloatStorage");
  p.op(0x93);
  sstr("0");
  sstr("cpu");
  p.integer(2).op('t').op('Q').integer(0).integer(2).op(0x85).integer(1).op(0x85).op(0x89);
  sstr("collections");
  sstr("OrderedDict");
  p.op(0x93).op(')').op('R').op('t').op('R');
  p.op('u').op('.');
  // the 8-byte frame length covers the rest of the pickle
  patch64(p.b, 3, p.b.size() - 11);
  TensorSet s = read_bytes_as_pth(make_zip(pth_items(p.b, {{"0", pattern_bytes(8, 9)}})));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s.find("w")->shape, (std::vector<int64_t>{2}));
}

TEST(PthCrafted, Zip64ArchiveWithoutByteorder) {
  std::string pkl = state_dict({{"x", "FloatStorage", "7", 4, 0, {2, 2}}});
  std::vector<ZipItem> items = {{"arc/data.pkl", pkl}, {"arc/data/7", pattern_bytes(16, 1)}};
  TensorSet s = read_bytes_as_pth(make_zip(items, /*zip64=*/true));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(std::memcmp(s.find("x")->data, pattern_bytes(16, 1).data(), 16), 0);
}

// ---------------------------------------------------------------------------------------------
// Damaged zip archives

TEST(ZipReader, TruncatedArchive) {
  const std::string bytes = test::read_file(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"));
  for (size_t keep : {size_t{0}, size_t{3}, size_t{21}, size_t{100}, bytes.size() / 2,
                      bytes.size() - 23, bytes.size() - 1}) {
    std::string path;
    const std::string msg = format_error([&] { read_bytes_as_pth(bytes.substr(0, keep), &path); });
    EXPECT_HAS(msg, path);
    EXPECT_HAS(msg, "truncated");
  }
}

TEST(ZipReader, CentralDirectoryOffsetOutOfBounds) {
  // Plain (non-ZIP64) end record.
  std::string bytes = make_zip(pth_items(state_dict({}), {}));
  patch32(bytes, bytes.size() - 22 + 16, 0x7FFFFFF0u);
  std::string path;
  std::string msg = format_error([&] { read_bytes_as_pth(bytes, &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "central directory");
  EXPECT_HAS(msg, "2147483632");

  // The fixture's ZIP64 record, with an offset near 2^64 (overflow-safe bounds check).
  std::string fx = test::read_file(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"));
  const size_t z = fx.rfind(std::string("PK\x06\x06", 4));
  ASSERT_NE(z, std::string::npos);
  patch64(fx, z + 48, ~uint64_t{0} - 5);
  msg = format_error([&] { read_bytes_as_pth(fx, &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "central directory");
}

TEST(ZipReader, EntryCountLargerThanDirectory) {
  std::string bytes = make_zip(pth_items(state_dict({}), {}));
  const size_t eocd = bytes.size() - 22;
  bytes[eocd + 8] = bytes[eocd + 10] = '\xff';
  bytes[eocd + 9] = bytes[eocd + 11] = '\x7f';
  EXPECT_HAS(format_error([&] { read_bytes_as_pth(bytes); }), "entries");
}

TEST(ZipReader, CompressedEntryRefusedWhenRead) {
  std::vector<ZipItem> items = pth_items(
      state_dict({{"blocks.0.w", "FloatStorage", "0", 4, 0, {4}}}), {{"0", pattern_bytes(16, 1)}});
  items[2].method = kZipMethodDeflate;
  std::string path;
  const std::string msg = format_error([&] { read_bytes_as_pth(make_zip(items), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "tensor 'blocks.0.w'");
  EXPECT_HAS(msg, "archive/data/0");
  EXPECT_HAS(msg, "deflate");

  // The directory itself parses; only asking for the data fails.
  auto file = MappedFile::open(path);
  ZipReader zip(file);
  uint64_t n = 0;
  EXPECT_NO_THROW(zip.data("archive/version", &n));
  EXPECT_HAS(format_error([&] { zip.data("archive/data/0", &n); }), "compression method 8");
}

TEST(ZipReader, EncryptedEntryRefused) {
  std::vector<ZipItem> items = pth_items(state_dict({}), {});
  items[0].flags = 1;
  std::string path;
  const std::string msg = format_error([&] { read_bytes_as_pth(make_zip(items), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "archive/data.pkl");
  EXPECT_HAS(msg, "encrypted");
}

TEST(ZipReader, EntryDataPastEndOfFile) {
  std::vector<ZipItem> items =
      pth_items(state_dict({{"w", "FloatStorage", "0", 4, 0, {4}}}), {{"0", pattern_bytes(16, 1)}});
  items[2].size = 1u << 30;
  std::string path;
  const std::string msg = format_error([&] { read_bytes_as_pth(make_zip(items), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "archive/data/0");
  EXPECT_HAS(msg, "past the end");
}

TEST(ZipReader, LocalHeaderDisagreesWithCentral) {
  std::vector<ZipItem> items =
      pth_items(state_dict({{"w", "FloatStorage", "0", 4, 0, {4}}}), {{"0", pattern_bytes(16, 1)}});
  items[2].local_size = 12;
  const std::string msg = format_error([&] { read_bytes_as_pth(make_zip(items)); });
  EXPECT_HAS(msg, "archive/data/0");
  EXPECT_HAS(msg, "compressed 12");

  // Local header offset pointing at the wrong bytes.
  std::string bytes = make_zip(pth_items(state_dict({}), {}));
  const size_t cd = bytes.find(std::string("PK\x01\x02", 4));
  patch32(bytes, cd + 42, 1);
  EXPECT_HAS(format_error([&] { read_bytes_as_pth(bytes); }), "local header");
}

TEST(ZipReader, RandomCorruptionNeverCrashes) {
  const std::string good = make_zip(pth_items(
      state_dict({{"w", "FloatStorage", "0", 4, 0, {2, 2}}}), {{"0", pattern_bytes(16, 1)}}));
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] = static_cast<char>(rng() & 0xFF);
    if (iter % 7 == 0) bad.resize(rng() % bad.size());
    auto file =
        MappedFile::borrow(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "fuzz.pth");
    try {
      TensorSet s = read_pth(file);
      for (const TensorView& t : s.tensors()) {
        ASSERT_GE(t.data, file->data());
        ASSERT_LE(t.data + t.nbytes, file->data() + file->size());
      }
    } catch (const FormatError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("fuzz.pth", 0), 0u) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile or unsupported pickles

TEST(PickleSafety, ForbiddenGlobalRefused) {
  Pk p;
  p.proto(2).global("os", "system").str("echo hacked").op(0x85).op('R').op('.');
  std::string path;
  const std::string msg =
      unsafe_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {})), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "'os system'");
  EXPECT_HAS(msg, "nothing was executed");
  EXPECT_HAS(msg, "archive/data.pkl");
}

TEST(PickleSafety, ForbiddenStackGlobalRefused) {
  Pk p;
  p.proto(4).op(0x8c).op(8).raw("builtins").op(0x8c).op(4).raw("eval").op(0x93).op('.');
  std::string path;
  const std::string msg =
      unsafe_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {})), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "'builtins eval'");
}

TEST(PickleSafety, UnknownAndObjectOpcodesRefused) {
  {
    Pk p;
    p.proto(2).op('}').op(0xff).op('.');
    const std::string msg = unsafe_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {}))); });
    EXPECT_HAS(msg, "unknown opcode 0xff");
    EXPECT_HAS(msg, "at byte 3");
  }
  {
    Pk p;  // NEWOBJ on a whitelisted class is still refused.
    p.proto(2).global("collections", "OrderedDict").op(')').op(0x81).op('.');
    EXPECT_HAS(unsafe_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {}))); }), "NEWOBJ");
  }
  {
    Pk p;  // Calling a storage type is not something a state dict does.
    p.proto(2).global("torch", "FloatStorage").op(')').op('R').op('.');
    EXPECT_HAS(unsafe_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {}))); }),
               "REDUCE on global 'torch FloatStorage'");
  }
  {
    Pk p;  // BUILD (setstate) on anything but a dict.
    p.proto(2).op(']').op('}').op('b').op('.');
    EXPECT_HAS(unsafe_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {}))); }), "BUILD");
  }
}

TEST(PickleSafety, MalformedPicklesAreFormatErrors) {
  const std::string path = "mem.pkl";
  auto run = [&](const std::string& b) {
    return format_error(
        [&] { unpickle(reinterpret_cast<const uint8_t*>(b.data()), b.size(), path, "test"); });
  };
  EXPECT_HAS(run(""), "STOP");
  EXPECT_HAS(run("\x80\x02"), "truncated");
  EXPECT_HAS(run(std::string("\x80\x02X\xff\xff\xff\x7f", 7)), "truncated");
  EXPECT_HAS(run(std::string("\x80\x02h\x05.", 5)), "memo entry 5");
  EXPECT_HAS(run("\x80\x02."), "exactly one value");
  EXPECT_HAS(run(std::string("\x80\x02(s.", 5)), "above the last MARK");
  EXPECT_HAS(run(std::string("\x80\x02K\x01K\x02.", 7)), "exactly one value");
  EXPECT_HAS(run(std::string("\x80\x09.", 3)), "protocol 9");
  EXPECT_HAS(run(std::string("\x80\x02\x8a\x09", 4)), "9-byte integer");
  EXPECT_HAS(run(std::string("\x80\x02X\x02\x00\x00\x00\xc3\x28.", 10)), "UTF-8");
  EXPECT_HAS(run(std::string("\x80\x02]K\x01K\x02s.", 9)), "a dict below SETITEM");
}

TEST(PickleSafety, EveryTruncationOfAFixturePickleIsAFormatError) {
  auto file = MappedFile::open(test::fixture("tasks/er_reranker.pth"));
  ZipReader zip(file);
  uint64_t n = 0;
  const uint8_t* pkl = zip.data("er_reranker/data.pkl", &n);
  const Unpickled full = unpickle(pkl, n, file->path(), "data.pkl");
  ASSERT_TRUE(full.root()->is(PickleValue::Kind::kDict));
  EXPECT_EQ(full.root()->entries.size(), 72u);
  // Every cut near both ends, every 17th byte in between (the suite also runs under ASan).
  for (uint64_t keep = 0; keep < n; keep += (keep < 400 || keep + 400 > n) ? 1 : 17) {
    std::vector<uint8_t> copy(pkl, pkl + keep);  // exact-size buffer so ASan sees overreads
    try {
      unpickle(copy.data(), copy.size(), file->path(), "data.pkl");
      ADD_FAILURE() << "a pickle cut to " << keep << " bytes was accepted";
    } catch (const FormatError&) {
    }
  }
}

TEST(PickleSafety, RandomMutationsNeverCrash) {
  auto file = MappedFile::open(test::fixture("tasks/er_reranker.pth"));
  ZipReader zip(file);
  uint64_t n = 0;
  const uint8_t* pkl = zip.data("er_reranker/data.pkl", &n);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 600; ++iter) {
    std::vector<uint8_t> copy(pkl, pkl + n);
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
    try {
      unpickle(copy.data(), copy.size(), "m.pth", "data.pkl");
    } catch (const FormatError&) {
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Resource limits: hostile pickles must fail fast with a FormatError, in bounded memory

// Resident memory now, and the process's peak so far, in KiB (bench/memory.h: VmRSS, VmHWM).
long current_rss_kib() { return static_cast<long>(bench::resident_bytes() / 1024); }
long peak_rss_kib() { return static_cast<long>(bench::peak_resident_bytes() / 1024); }
// CPU seconds of the calling thread (wall time would count other processes on a busy machine).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

#if defined(NDEBUG) && !defined(WICK_TEST_ASAN)
constexpr double kQuickSeconds = 1.0;
constexpr size_t kFloodBytes = size_t{33} << 20;  // the reviewer's input
#else
constexpr double kQuickSeconds = 10.0;  // Debug / sanitizer builds
constexpr size_t kFloodBytes = size_t{8} << 20;
#endif
constexpr long kMaxGrowthKib = 200 * 1024;

// Runs `f`, which must throw a FormatError within kQuickSeconds of CPU time, with a peak memory
// under kMaxGrowthKib above the resident memory at the start (when the process's earlier peak is
// higher than that, ru_maxrss cannot see it and the memory check is vacuous); returns what().
std::string bounded_format_error(const std::function<void()>& f) {
  const long rss0 = current_rss_kib(), peak0 = peak_rss_kib();
  const double t0 = thread_cpu_seconds();
  std::string msg = format_error(f);
  const double seconds = thread_cpu_seconds() - t0;
  const long peak1 = peak_rss_kib();
  const long growth = peak1 > peak0 ? peak1 - rss0 : 0;
  EXPECT_LT(seconds, kQuickSeconds) << msg;
  EXPECT_LT(growth, kMaxGrowthKib) << "peak RSS grew by " << growth / 1024 << " MiB: " << msg;
  return msg;
}

TEST(PickleLimits, ReduceOnAMemoizedTupleDoesNotCopyIt) {
  // A 400K-item argument tuple reduced 20,000 times: 3.2 MB copied per 6 pickle bytes when REDUCE
  // copied its arguments (a 920 KB .pth exhausted 6 GB); now each Call refers to the tuple.
  Pk p;
  p.proto(2).global("torch._utils", "_rebuild_tensor_v2").op('q').op(1).op('0');
  p.mark();
  p.b.append(400000, 'N');
  p.op('t').op('q').op(2).op('0');
  for (int i = 0; i < 20000; ++i) p.op('h').op(1).op('h').op(2).op('R').op('0');
  p.op('}').str("w").op('h').op(1).op('h').op(2).op('R').op('s').op('.');
  std::string path;
  const std::string msg =
      bounded_format_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {})), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "tensor 'w'");
  EXPECT_HAS(msg, "400000 arguments");
}

TEST(PickleLimits, OrderedDictCopiesAreChargedToTheSlotBudget) {
  // OrderedDict(list of 200K pairs) copies the pairs: reducing it over and over must run out of
  // the slot budget (2 slots per pickle byte) instead of memory.
  Pk p;
  p.proto(2).global("collections", "OrderedDict").op('q').op(1).op('0');
  p.op('N').op('N').op(0x86).op('q').op(3).op('0');  // memo 3: the pair (None, None)
  p.op(']').mark();
  for (int i = 0; i < 200000; ++i) p.op('h').op(3);
  p.op('e').op(0x85).op('q').op(4).op('0');  // memo 4: ([pair] * 200000,)
  for (int i = 0; i < 20000; ++i) p.op('h').op(1).op('h').op(4).op('R').op('0');
  p.op('}').op('.');
  std::string path;
  const std::string msg =
      bounded_format_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {})), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "tuple/list items and dict keys and values");
  EXPECT_HAS(msg, "REDUCE");
  EXPECT_HAS(msg, "archive/data.pkl");
}

TEST(PickleLimits, NonePopFloodTakesNoMemory) {
  // 33 MB of NONE, POP (16.5M values, 3.3 GB when each None was a fresh object), then the end
  // of the data without STOP. (8 MB in Debug and sanitizer builds.)
  std::string pickle = "\x80\x02";
  pickle.reserve(kFloodBytes);
  while (pickle.size() + 2 <= kFloodBytes) pickle += "N0";
  const auto path = test::scratch_dir() / "flood.pth";
  write_pth_with_pickle(path, pickle);
  std::string().swap(pickle);
  const std::string msg =
      bounded_format_error([&] { read_pth(MappedFile::open(path.string())); });
  EXPECT_HAS(msg, path.string());
  EXPECT_HAS(msg, "STOP");
  EXPECT_HAS(msg, "truncated");
}

TEST(PickleLimits, ValueFloodHitsTheValueCap) {
  // EMPTY_TUPLE, POP: one new value per 2 bytes, 4M of them.
  std::string pickle = "\x80\x02";
  pickle.reserve(8u << 20);
  while (pickle.size() + 2 <= (8u << 20)) pickle += ")0";
  const auto path = test::scratch_dir() / "tuples.pth";
  write_pth_with_pickle(path, pickle);
  std::string().swap(pickle);
  const std::string msg =
      bounded_format_error([&] { read_pth(MappedFile::open(path.string())); });
  EXPECT_HAS(msg, path.string());
  EXPECT_HAS(msg, "at most " + std::to_string(kMaxPickleValues) + " values");
  EXPECT_HAS(msg, "EMPTY_TUPLE");
}

TEST(PickleLimits, CapsScaleWithThePickleSize) {
  const std::string path = "mem.pkl";
  auto run = [&](const std::string& b) {
    return bounded_format_error(
        [&] { unpickle(reinterpret_cast<const uint8_t*>(b.data()), b.size(), path, "test"); });
  };
  const size_t n = 100000;
  // Values: EMPTY_TUPLE x n, one per byte (without POP they also fill the stack).
  std::string b = "\x80\x02" + std::string(n, ')');
  EXPECT_HAS(run(b), "at most " + std::to_string(b.size() / 2 + kPickleLimitSlack) + " values");
  // Memo: MEMOIZE of one value under ever new indices, and a LONG_BINPUT far out.
  b = "\x80\x04)" + std::string(n, '\x94');
  EXPECT_HAS(run(b), "a memo index below " + std::to_string(b.size() / 2 + kPickleLimitSlack));
  b = std::string("\x80\x02)r\xf0\xff\xff\xff", 8);
  EXPECT_HAS(run(b), "index 4294967280");
  // Stack and MARKs take a slot per byte at most (8 bytes each): only the ceiling applies.
  b = "\x80\x02]" + std::string(kMaxPickleStack + 100, '2');
  EXPECT_HAS(run(b), "at most " + std::to_string(kMaxPickleStack) + " values on the stack");
  b = "\x80\x02" + std::string(kMaxPickleStack + 100, '(');
  EXPECT_HAS(run(b), "at most " + std::to_string(kMaxPickleStack) + " open MARKs");
}

TEST(PickleLimits, LargeLegitimateStateDictLoads) {
  // The pickle of a 2.9B model (32 layers, ~400 tensors, ~40 KB) is well inside every cap;
  // all tensors view one shared storage so the archive stays small.
  std::vector<TensorSpec> specs;
  const char* kNames[] = {"att.receptance.weight", "att.key.weight",  "att.value.weight",
                          "att.output.weight",     "att.w1",          "att.w2",
                          "att.a1",                "att.a2",          "att.v1",
                          "att.v2",                "ffn.key.weight",  "ffn.value.weight"};
  for (int layer = 0; layer < 32; ++layer) {
    for (const char* n : kNames) {
      specs.push_back({"blocks." + std::to_string(layer) + "." + n, "BFloat16Storage", "0",
                       2560, 0, {2560, 1}});
    }
  }
  specs.push_back({"emb.weight", "BFloat16Storage", "0", 2560, 0, {2560}});
  const std::string pkl = state_dict(specs);
  TensorSet s = read_bytes_as_pth(make_zip(pth_items(pkl, {{"0", pattern_bytes(5120, 1)}})));
  EXPECT_EQ(s.size(), specs.size());
  const Unpickled u =
      unpickle(reinterpret_cast<const uint8_t*>(pkl.data()), pkl.size(), "big.pth", "data.pkl");
  EXPECT_LT(u.value_count() * 2, pkl.size() / 2) << pkl.size();

  // The fixtures written by torch.save are far inside the caps too.
  auto file = MappedFile::open(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"));
  ZipReader zip(file);
  uint64_t n = 0;
  const uint8_t* p = zip.data("tiny-rwkv7-834K/data.pkl", &n);
  const Unpickled fx = unpickle(p, n, file->path(), "data.pkl");
  EXPECT_LT(fx.value_count() * 3, n / 2);
}

TEST(PickleLimits, SharedMetadataTextIsCappedInTotal) {
  // One memoized 900 KB string under 10 keys: 9 MB of metadata text from a 900 KB pickle.
  Pk p;
  p.proto(2).op('}').str(std::string(900000, 'a')).op('q').op(1).op('0');
  p.mark();
  for (char c = '0'; c <= '9'; ++c) p.str(std::string{'k', c}).op('h').op(1);
  p.op('u').op('.');
  std::string path;
  const std::string msg =
      bounded_format_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {})), &path); });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "MiB of non-tensor values as text in all");
}

// ---------------------------------------------------------------------------------------------
// Tensors that their storage does not back

TEST(PthTensor, StorageShorterThanTensor) {
  std::string path;
  const std::string msg = format_error([&] {
    read_bytes_as_pth(
        make_zip(pth_items(state_dict({{"blocks.0.att.r_k", "FloatStorage", "0", 4, 2, {2, 2}}}),
                           {{"0", pattern_bytes(16, 1)}})),
        &path);
  });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "tensor 'blocks.0.att.r_k'");
  EXPECT_HAS(msg, "storage_offset 2 + numel 4");
}

TEST(PthTensor, StorageEntrySizeDisagreesWithNumel) {
  std::string path;
  const std::string msg = format_error([&] {
    read_bytes_as_pth(
        make_zip(pth_items(state_dict({{"emb.weight", "FloatStorage", "0", 8, 0, {2, 4}}}),
                           {{"0", pattern_bytes(20, 1)}})),
        &path);
  });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "tensor 'emb.weight'");
  EXPECT_HAS(msg, "32 bytes");
  EXPECT_HAS(msg, "20 bytes in the zip entry");
}

TEST(PthTensor, NonContiguousStride) {
  std::string path;
  const std::string msg = format_error([&] {
    read_bytes_as_pth(
        make_zip(pth_items(
            state_dict(
                {{"head.weight", "FloatStorage", "0", 6, 0, {2, 3}, std::vector<int64_t>{1, 2}}}),
            {{"0", pattern_bytes(24, 1)}})),
        &path);
  });
  EXPECT_HAS(msg, path);
  EXPECT_HAS(msg, "tensor 'head.weight'");
  EXPECT_HAS(msg, "stride [3, 1]");
  EXPECT_HAS(msg, "stride [1, 2]");
}

TEST(PthTensor, MissingStorageEntry) {
  const std::string msg = format_error([&] {
    read_bytes_as_pth(make_zip(pth_items(state_dict({{"w", "FloatStorage", "9", 4, 0, {4}}}), {})));
  });
  EXPECT_HAS(msg, "tensor 'w'");
  EXPECT_HAS(msg, "archive/data/9");
}

TEST(PthTensor, UnsupportedStorageType) {
  const std::string msg = format_error([&] {
    read_bytes_as_pth(make_zip(pth_items(state_dict({{"w", "DoubleStorage", "0", 2, 0, {2}}}),
                                         {{"0", pattern_bytes(16, 1)}})));
  });
  EXPECT_HAS(msg, "tensor 'w'");
  EXPECT_HAS(msg, "DoubleStorage");
}

TEST(PthTensor, NegativeDimensionOrOffset) {
  EXPECT_HAS(
      format_error([&] {
        read_bytes_as_pth(make_zip(pth_items(
            state_dict({{"w", "FloatStorage", "0", 4, 0, {-1, 4}, std::vector<int64_t>{4, 1}}}),
            {{"0", pattern_bytes(16, 1)}})));
      }),
      "non-negative");
  EXPECT_HAS(
      format_error([&] {
        read_bytes_as_pth(make_zip(pth_items(state_dict({{"w", "FloatStorage", "0", 4, -1, {4}}}),
                                             {{"0", pattern_bytes(16, 1)}})));
      }),
      "storage_offset -1");
}

// ---------------------------------------------------------------------------------------------
// Archives that are not a flat state dict

TEST(PthArchive, BigEndianByteorder) {
  std::vector<ZipItem> items = pth_items(state_dict({}), {});
  items[1].data = "big";
  const std::string msg = format_error([&] { read_bytes_as_pth(make_zip(items)); });
  EXPECT_HAS(msg, "'little'");
  EXPECT_HAS(msg, "'big'");
}

TEST(PthArchive, NoDataPkl) {
  const std::string msg = format_error([&] { read_bytes_as_pth(make_zip({{"hello.txt", "hi"}})); });
  EXPECT_HAS(msg, "data.pkl");
}

TEST(PthArchive, TopLevelNotADict) {
  Pk p;
  p.proto(2).op(']').op('.');
  EXPECT_HAS(format_error([&] { read_bytes_as_pth(make_zip(pth_items(p.b, {}))); }), "a list of 0");
}

TEST(PthArchive, NestedTrainingCheckpointRefused) {
  Pk p;
  p.proto(2).op('}').str("model").op('}').str("w");
  put_tensor(p, {"", "FloatStorage", "0", 4, 0, {4}});
  p.op('s').op('s').op('.');
  const std::string msg = format_error([&] {
    read_bytes_as_pth(make_zip(pth_items(p.b, {{"0", pattern_bytes(16, 1)}})));
  });
  EXPECT_HAS(msg, "'model'");
  EXPECT_HAS(msg, "tensor nested");
}

TEST(PthArchive, DuplicateTensorName) {
  const std::string msg = format_error([&] {
    read_bytes_as_pth(make_zip(pth_items(
        state_dict({{"w", "FloatStorage", "0", 4, 0, {4}}, {"w", "FloatStorage", "0", 4, 0, {4}}}),
        {{"0", pattern_bytes(16, 1)}})));
  });
  EXPECT_HAS(msg, "tensor 'w'");
}

}  // namespace
}  // namespace wick::io

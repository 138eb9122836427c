// WICK_ISA (kernels/cpu_features.h): a lower level is honoured, a level the CPU lacks or an
// unknown name is an error naming what the CPU has - never a silent fallback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick::kernels {
namespace {

std::string message(const char* env, Isa best) {
  try {
    isa_from_env(env, best);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(IsaChoice, UnsetOrEmptyIsTheBest) {
  EXPECT_EQ(isa_from_env(nullptr, Isa::kAvx512), Isa::kAvx512);
  EXPECT_EQ(isa_from_env("", Isa::kAvx2), Isa::kAvx2);
}

TEST(IsaChoice, LowerLevelsAreHonoured) {
  EXPECT_EQ(isa_from_env("scalar", Isa::kAvx512), Isa::kScalar);
  EXPECT_EQ(isa_from_env("avx2", Isa::kAvx512), Isa::kAvx2);
  EXPECT_EQ(isa_from_env("avx512", Isa::kAvx512), Isa::kAvx512);
  EXPECT_EQ(isa_from_env("avx2", Isa::kAvx2), Isa::kAvx2);
}

TEST(IsaChoice, MissingOrUnknownLevelsAreErrors) {
  const std::string lacks = message("avx512", Isa::kAvx2);
  EXPECT_NE(lacks.find("this CPU lacks"), std::string::npos) << lacks;
  EXPECT_NE(lacks.find("up to avx2"), std::string::npos) << lacks;
  EXPECT_NE(message("avx2", Isa::kScalar).find("up to scalar"), std::string::npos);
  const std::string unknown = message("AVX2", Isa::kAvx512);
  EXPECT_NE(unknown.find("not an instruction set"), std::string::npos) << unknown;
  EXPECT_NE(message("sse4", Isa::kAvx2).find("scalar, avx2 or avx512"), std::string::npos);
}

TEST(IsaChoice, TheCliNamesItsIsaAndRefusesOneItCannotRun) {
  const test::CliRun info = test::run_wick("info");
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("kernels    " + std::string(isa_name(active_isa()))), std::string::npos)
      << info.out;
  // The child inherits the environment (each test runs in a process of its own).
  ::setenv("WICK_ISA", "neon", 1);
  const test::CliRun unknown = test::run_wick("info");
  ::setenv("WICK_ISA", "scalar", 1);
  const test::CliRun scalar = test::run_wick("info --json");
  ::unsetenv("WICK_ISA");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.err.find("WICK_ISA=neon is not an instruction set"), std::string::npos)
      << unknown.err;
  ASSERT_EQ(scalar.status, 0) << scalar.err;
  EXPECT_NE(scalar.out.find("\"kernel_isa\": \"scalar\""), std::string::npos) << scalar.out;
  EXPECT_NE(scalar.out.find("\"sampler\": \"scalar\""), std::string::npos) << scalar.out;
  // The text names every family's variant after the level.
  EXPECT_NE(info.out.find("(dot " + std::string(isa_name(active_isa())) + ", bf16-dot "),
            std::string::npos)
      << info.out;
  EXPECT_NE(scalar.out.find("\"bf16-dot\": \"fp32-dot\""), std::string::npos) << scalar.out;
}

TEST(KernelTable, OneTableNamesEveryFamily) {
  const KernelTable& t = kernel_table();
  EXPECT_EQ(t.isa, active_isa());
  EXPECT_EQ(&t.dot, &dot_kernels());
  EXPECT_EQ(&t.attention, &attention_kernels());
  EXPECT_EQ(&t.sampler, &sampler_loops());
  EXPECT_EQ(&t.gates, &gate_loops());
  EXPECT_EQ(t.bf16_dot, bf16_dot_kernels());
  const auto d = t.describe();
  ASSERT_EQ(d.size(), 9u);
  const char* families[] = {"dot", "bf16-dot",  "int8",    "packed", "packed-int8",
                            "wkv", "attention", "sampler", "gates"};
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i].first, families[i]);
  EXPECT_EQ(d[0].second, isa_name(active_isa()));
  EXPECT_EQ(d[3].second, isa_name(active_isa()));
  EXPECT_EQ(d[8].second, isa_name(active_isa()));
  // The BF16 dot product exactly where AVX-512 runs on a CPU with AVX512_BF16.
  const bool bf16 = active_isa() == Isa::kAvx512 && cpu_has_avx512_bf16();
  EXPECT_EQ(d[1].second, bf16 ? "avx512-bf16" : "fp32-dot");
  EXPECT_EQ(t.bf16_dot != nullptr, bf16);
  // The integer sb6 / sym products: VNNI where AVX-512 runs on a CPU with it, else the ISA's own.
  const bool vnni = active_isa() == Isa::kAvx512 && cpu_has_avx512_vnni();
  EXPECT_EQ(d[4].second, vnni                               ? std::string("avx512-vnni")
                         : active_isa() == Isa::kScalar ? std::string("scalar")
                                                          : std::string("avx2"));
  // Both integer families at the one level int8_isa() picks.
  EXPECT_EQ(d[2].second, d[4].second);
  EXPECT_EQ(int8_isa(active_isa()), vnni                             ? IntIsa::kAvx512Vnni
                                    : active_isa() == Isa::kScalar ? IntIsa::kScalar
                                                                   : IntIsa::kAvx2);
  // Scalar everywhere at the scalar level (and no BF16 dot product); at AVX2 and above the
  // attention and sampler loops run their AVX2 build.
  for (const auto& [family, variant] : kernel_table_for(Isa::kScalar).describe())
    EXPECT_EQ(variant, family == "bf16-dot" ? "fp32-dot" : "scalar") << family;
  EXPECT_EQ(kernel_table_for(Isa::kAvx2).bf16_dot, nullptr);
  if (best_supported_isa() >= Isa::kAvx2) {
    const auto a = kernel_table_for(best_supported_isa()).describe();
    EXPECT_EQ(a[6].second, "avx2");
    EXPECT_EQ(a[7].second, "avx2");
  }
}

}  // namespace
}  // namespace wick::kernels

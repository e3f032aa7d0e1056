// Strata's safetensors reader and writer against an independent
// implementation written from the format's specification with json and
// numpy (testdata/safetensors_numpy.py, run with /usr/bin/python3): files it
// writes (header unpadded, tensors in name order, some unaligned) read here
// with their values; files Strata writes read there with theirs.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "serialization/safetensors.h"
#include "serialization/testing/python_runner.h"

namespace strata::serialization {
namespace {

using serialization::testing::RunPython;
using ::strata::testing::IsOk;

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/serialization/testdata/safetensors_numpy.py";
}

// The script's reference_tensors(): i = 0..11 over [3, 4]; floats
// (i - 6) * 1.5, integers i - 6, U8 i + 10, BOOL i % 3 == 0; a 0-d 7.25 and
// an empty [0, 5], both F32.
std::vector<std::pair<std::string, at::Tensor>> ReferenceTensors() {
  const at::Tensor i = at::arange(12, at::kLong).view({3, 4});
  const at::Tensor floats = (i - 6).to(at::kDouble) * 1.5;
  return {
      {"f64", floats},
      {"f32", floats.to(at::kFloat)},
      {"f16", floats.to(at::kHalf)},
      {"bf16", floats.to(at::kBFloat16)},
      {"i64", i - 6},
      {"i32", (i - 6).to(at::kInt)},
      {"i16", (i - 6).to(at::kShort)},
      {"i8", (i - 6).to(at::kChar)},
      {"u8", (i + 10).to(at::kByte)},
      {"bool", (i % 3).eq(0)},
      {"scalar", at::full({}, 7.25, at::kFloat)},
      {"empty", at::zeros({0, 5}, at::kFloat)},
  };
}

const std::map<std::string, std::string> kMetadata = {{"writer", "numpy"},
                                                      {"note", "h\xc3\xa9llo"}};

TEST(SafetensorsInteropTest, ReadsFilesTheNumpyWriterWrote) {
  const std::string dir = strata::testing::FreshTempDir("st_py_write");
  const std::string path = dir + "/numpy.safetensors";
  ASSERT_THAT(RunPython({ScriptPath(), "write", path}, dir + "/log"), IsOk());
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  EXPECT_EQ(file->metadata(), kMetadata);
  EXPECT_EQ(file->entries().size(), ReferenceTensors().size());
  for (const auto& [name, expected] : ReferenceTensors()) {
    ASSERT_OK_AND_ASSIGN(at::Tensor read, file->View(name));
    EXPECT_EQ(read.scalar_type(), expected.scalar_type()) << name;
    EXPECT_EQ(read.sizes(), expected.sizes()) << name;
    EXPECT_TRUE(at::equal(read, expected)) << name;
  }
}

TEST(SafetensorsInteropTest, NumpyReaderReadsWhatStrataWrote) {
  const std::string dir = strata::testing::FreshTempDir("st_py_read");
  const std::string path = dir + "/strata.safetensors";
  ASSERT_THAT(WriteSafetensors(path, ReferenceTensors(), kMetadata), IsOk());
  EXPECT_THAT(RunPython({ScriptPath(), "check", path}, dir + "/log"), IsOk());
}

}  // namespace
}  // namespace strata::serialization

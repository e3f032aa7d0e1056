// An independent reader checks the writer:
// launch/observe/testdata/read_tfevents.py (Debian's /usr/bin/python3, standard
// library only) decodes the TFRecord framing with its own CRC-32C and the
// Event/Summary wire format by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/testing/status_matchers.h"
#include "launch/observe/tensorboard.h"
#include "launch/testing/run_output.h"
#include "serialization/testing/python_runner.h"

namespace strata::launch {
namespace {

using serialization::testing::RunPython;
using ::strata::launch::testing::TempDir;
using ::strata::testing::IsOk;

std::string ReaderPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/launch/observe/testdata/read_tfevents.py";
}

// The reader's output for the event file at `path`, one entry per line,
// split on spaces.
std::vector<std::vector<std::string>> ReadWithPython(const std::string& path,
                                                     const std::string& name) {
  const std::string out = TempDir(name + ".txt");
  EXPECT_THAT(RunPython({ReaderPath(), path, out}, TempDir(name + ".log")),
              IsOk());
  std::ifstream in(out);
  std::vector<std::vector<std::string>> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(absl::StrSplit(line, ' '));
  }
  return lines;
}

TEST(TensorBoardPythonTest, IndependentReaderDecodesEveryScalar) {
  const double before_s = absl::ToUnixSeconds(absl::Now());
  auto writer = TensorBoardWriter::Open(TempDir("scalars"));
  ASSERT_THAT(writer, IsOk());
  const std::vector<std::string> tags = {"train/loss", "eval/loss", "lr"};
  const std::vector<double> values = {3.75, 0.0, -1.5e-4};
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT((*writer)->AddScalar(tags[i], values[i], 100 * (i + 1)),
                IsOk());
  }
  ASSERT_THAT((*writer)->Flush(), IsOk());
  const auto lines = ReadWithPython((*writer)->path(), "scalars");
  ASSERT_EQ(lines.size(), 4u);
  ASSERT_EQ(lines[0].size(), 3u);
  EXPECT_EQ(lines[0][0], "file_version");
  EXPECT_EQ(lines[0][2], "brain.Event:2");
  for (int i = 0; i < 3; ++i) {
    const auto& line = lines[i + 1];
    ASSERT_EQ(line.size(), 5u);
    EXPECT_EQ(line[0], "scalar");
    double wall_time = 0;
    ASSERT_TRUE(absl::SimpleAtod(line[1], &wall_time));
    EXPECT_GE(wall_time, before_s);
    EXPECT_EQ(line[2], absl::StrCat(100 * (i + 1)));
    EXPECT_EQ(line[3], tags[i]);
    float value = 0;
    ASSERT_TRUE(absl::SimpleAtof(line[4], &value)) << line[4];
    EXPECT_EQ(value, static_cast<float>(values[i])) << tags[i];
  }
}

TEST(TensorBoardPythonTest, IndependentReaderRejectsACorruptedLength) {
  std::string path;
  {
    auto writer = TensorBoardWriter::Open(TempDir("corrupt"));
    ASSERT_THAT(writer, IsOk());
    path = (*writer)->path();
  }
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(0);
  file.put('\x7f');  // The first record's length no longer matches its CRC.
  file.close();
  EXPECT_FALSE(RunPython({ReaderPath(), path, TempDir("corrupt.txt")},
                         TempDir("corrupt.log"))
                   .ok());
}

}  // namespace
}  // namespace strata::launch

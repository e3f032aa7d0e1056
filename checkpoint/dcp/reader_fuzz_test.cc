// Seeded mutations of a DCP directory PyTorch 2.6's dcp.save wrote
// (testdata/dcp_save.py's reference: 2 ranks, every dtype): bit flips, byte
// rewrites, truncations and insertions in `.metadata` (the pickle) and in
// either `.distcp` data file. Every input either opens and reads every
// tensor and value it still names with the bytes PyTorch saved, or is
// refused with an error (InvalidArgument, NotFound, DataLoss) naming the
// file — never a crash, a hang or other bytes. (A key renamed by a mutation
// cannot be checked against a name; its bytes are read all the same.)
// Skipped, and counted so, under a PyTorch older than 2.4.
//
// 500 inputs by default (about a minute); more with an argument after the
// gtest flags:
//   bazel test //checkpoint/dcp:reader_fuzz_test --test_arg=--inputs=100000
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/dcp/reader.h"
#include "glog/logging.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint::dcp {
namespace {

using serialization::testing::RunPython;
using ::strata::testing::IsOk;

int64_t g_inputs = 500;

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/checkpoint/dcp/testdata/dcp_save.py";
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     a.nbytes()) == 0;
}

std::string Mutate(std::string bytes, std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  switch (rng() % 5) {
    case 0:  // flip one bit
      if (!bytes.empty()) bytes[pick(bytes.size())] ^= 1 << (rng() % 8);
      break;
    case 1:  // rewrite a byte
      if (!bytes.empty()) bytes[pick(bytes.size())] = static_cast<char>(rng());
      break;
    case 2:  // truncate
      bytes.resize(pick(bytes.size()));
      break;
    case 3:  // insert bytes
      bytes.insert(pick(bytes.size() + 1), std::string(1 + rng() % 4, 'x'));
      break;
    default:  // flip several bits
      for (int i = 0; i < 4 && !bytes.empty(); ++i) {
        bytes[pick(bytes.size())] ^= 1 << (rng() % 8);
      }
      break;
  }
  return bytes;
}

TEST(DcpReaderFuzzTest, EveryMutationIsRefusedOrReadsTheSavedBytes) {
  const std::string dir = strata::testing::FreshTempDir("dcp_fuzz");
  const std::string why = serialization::testing::WhyTorchBelow(
      2, 4, "DTensor, dcp.save", dir + "/version.log");
  if (!why.empty()) GTEST_SKIP() << why;
  ASSERT_THAT(RunPython({ScriptPath(), "reference", dir}, dir + "/log"),
              IsOk());
  ASSERT_OK_AND_ASSIGN(const c10::IValue expected_value,
                       serialization::ReadTorchFile(dir + "/expected.pt"));
  std::map<std::string, at::Tensor> expected;
  for (const auto& item : expected_value.toGenericDict()) {
    expected[item.key().toStringRef()] = item.value().toTensor();
  }
  const std::vector<std::string> files = {".metadata", "__0_0.distcp",
                                          "__1_0.distcp"};
  std::map<std::string, std::string> originals;
  for (const std::string& file : files) {
    ASSERT_OK_AND_ASSIGN(originals[file], ReadWholeFile(dir + "/dcp/" + file));
  }
  const std::string work = dir + "/work";
  std::mt19937_64 rng(34);
  int64_t opened = 0, refused = 0, reads = 0, read_refused = 0;
  for (int64_t i = 0; i < g_inputs; ++i) {
    // The metadata half the time (the pickle is the richest input).
    const std::string& target =
        files[rng() % 2 == 0 ? 0 : 1 + rng() % (files.size() - 1)];
    std::filesystem::remove_all(work);
    std::filesystem::create_directories(work);
    for (const std::string& file : files) {
      const std::string bytes =
          file == target ? Mutate(originals[file], rng) : originals[file];
      std::ofstream out(work + "/" + file, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      ASSERT_TRUE(out.good()) << work << "/" << file;
    }
    absl::StatusOr<std::unique_ptr<Reader>> reader = Reader::Open(work);
    if (!reader.ok()) {
      ++refused;
      EXPECT_TRUE(absl::StrContains(reader.status().message(), work))
          << reader.status();
      EXPECT_NE(reader.status().code(), absl::StatusCode::kInternal)
          << reader.status();
      continue;
    }
    ++opened;
    for (const auto& [name, saved] : (*reader)->metadata().tensors) {
      absl::StatusOr<at::Tensor> read = (*reader)->ReadTensor(name);
      ++reads;
      if (!read.ok()) {
        ++read_refused;
        EXPECT_TRUE(absl::StrContains(read.status().message(), work))
            << read.status();
        continue;
      }
      auto it = expected.find(name);
      if (it != expected.end()) {
        EXPECT_TRUE(SameBytes(*read, it->second))
            << "input " << i << " (" << target << "): '" << name
            << "' read other bytes";
      }
    }
    for (const auto& [name, range] : (*reader)->metadata().values) {
      absl::StatusOr<c10::IValue> value = (*reader)->ReadValue(name);
      if (!value.ok()) continue;
      if (name == "step") {
        EXPECT_TRUE(value->isInt() && value->toInt() == 42);
      } else if (name == "lr") {
        EXPECT_TRUE(value->isDouble() && value->toDouble() == 0.5);
      }
    }
  }
  LOG(INFO) << g_inputs << " inputs: " << refused << " refused at open, "
            << opened << " opened; " << reads << " tensor reads, "
            << read_refused << " refused";
  EXPECT_GT(refused, 0);
  EXPECT_GT(read_refused, 0);
}

}  // namespace
}  // namespace strata::checkpoint::dcp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--inputs=") &&
        absl::SimpleAtoi(arg, &strata::checkpoint::dcp::g_inputs) &&
        strata::checkpoint::dcp::g_inputs > 0) {
      continue;
    }
    LOG(FATAL) << "unknown argument '" << argv[i]
               << "' (expected --inputs=N, N > 0)";
  }
  return RUN_ALL_TESTS();
}

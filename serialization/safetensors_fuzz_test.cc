// Seeded mutations of valid safetensors files (bit flips, truncations, header
// length and header text edits, number edits, inserted and appended bytes):
// every input either loads, with every tensor readable over its whole span,
// or is refused with InvalidArgument / DataLoss — never a crash.
//
// 5 000 inputs by default; more with an argument after the gtest flags:
//   bazel test //serialization:safetensors_fuzz_test --test_arg=--inputs=100000
//   bazel-bin/serialization/safetensors_fuzz_test --inputs=100000
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/testing/temp_dir.h"
#include "glog/logging.h"
#include "serialization/safetensors.h"

namespace strata::serialization {
namespace {

int64_t g_inputs = 5000;

// Valid files to mutate: every dtype with metadata, and a tiny one.
std::vector<std::string> Seeds() {
  const std::string dir = strata::testing::FreshTempDir("st_fuzz_seeds");
  const at::Tensor base = at::arange(-3, 3, at::kDouble).view({2, 3});
  std::vector<std::pair<std::string, at::Tensor>> every;
  for (at::ScalarType type :
       {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt,
        at::kShort, at::kChar, at::kByte}) {
    every.emplace_back(c10::toString(type), (base + 3).to(type));
  }
  every.emplace_back("mask", base.gt(0));
  every.emplace_back("empty", at::zeros({0}));
  std::vector<std::string> seeds;
  const std::vector<std::vector<std::pair<std::string, at::Tensor>>> sets = {
      every, {{"w", at::ones({2, 2})}}};
  for (size_t i = 0; i < sets.size(); ++i) {
    const std::string path = dir + "/" + std::to_string(i) + ".safetensors";
    CHECK(WriteSafetensors(path, sets[i], {{"format", "pt"}}).ok());
    absl::StatusOr<std::string> bytes = ReadWholeFile(path);
    CHECK(bytes.ok());
    seeds.push_back(*bytes);
  }
  return seeds;
}

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t length = 0;
  if (bytes.size() >= 8) std::memcpy(&length, bytes.data(), 8);
  return length;
}

void SetHeaderLength(std::string& bytes, uint64_t length) {
  if (bytes.size() >= 8) std::memcpy(bytes.data(), &length, 8);
}

std::string Mutate(std::string bytes, std::mt19937_64& rng) {
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const uint64_t header_end =
      std::min<uint64_t>(bytes.size(), 8 + HeaderLength(bytes));
  static constexpr char kJsonBytes[] =
      "{}[],:\"0123456789-.eE FUIBLO_\\\xff\xc3";
  const int rounds = 1 + below(2);
  for (int round = 0; round < rounds; ++round) {
    switch (below(8)) {
      case 0: {  // Flip bits anywhere, or in the data only.
        const uint64_t from = below(2) == 0 ? 0 : header_end;
        for (int i = 0, n = 1 + below(8); i < n && from < bytes.size(); ++i) {
          bytes[from + below(bytes.size() - from)] ^=
              static_cast<char>(1 << below(8));
        }
        break;
      }
      case 1:  // Truncate.
        bytes.resize(below(bytes.size() + 1));
        break;
      case 2: {  // Another header length: near the true one, or anything.
        const uint64_t length = HeaderLength(bytes);
        SetHeaderLength(bytes, below(2) == 0 ? length + below(17) - 8 : rng());
        break;
      }
      case 3:  // A header byte replaced by a JSON-ish one.
        if (header_end > 8 && header_end <= bytes.size()) {
          bytes[8 + below(header_end - 8)] =
              kJsonBytes[below(sizeof(kJsonBytes) - 1)];
        }
        break;
      case 4: {  // A number in the header replaced (offsets, shapes).
        if (header_end <= 8 || header_end > bytes.size()) break;
        std::vector<size_t> digits;
        for (size_t i = 8; i < header_end; ++i) {
          if (bytes[i] >= '0' && bytes[i] <= '9') digits.push_back(i);
        }
        if (digits.empty()) break;
        size_t start = digits[below(digits.size())];
        size_t end = start;
        while (end < header_end && bytes[end] >= '0' && bytes[end] <= '9') {
          ++end;
        }
        const uint64_t choice = below(4);
        const std::string number = choice == 0   ? std::to_string(rng())
                                   : choice == 1 ? std::to_string(below(64))
                                   : choice == 2 ? "-1"
                                                 : "1e3";
        bytes.replace(start, end - start, number);
        SetHeaderLength(bytes,
                        HeaderLength(bytes) + number.size() - (end - start));
        break;
      }
      case 5: {  // Bytes inserted into the header, length adjusted or not.
        if (header_end <= 8 || header_end > bytes.size()) break;
        const std::string inserted(1 + below(4),
                                   kJsonBytes[below(sizeof(kJsonBytes) - 1)]);
        bytes.insert(8 + below(header_end - 8), inserted);
        if (below(2) == 0) {
          SetHeaderLength(bytes, HeaderLength(bytes) + inserted.size());
        }
        break;
      }
      case 6: {  // Random bytes appended.
        for (int i = 0, n = 1 + below(16); i < n; ++i) {
          bytes.push_back(static_cast<char>(rng()));
        }
        break;
      }
      case 7: {  // A random length of random bytes.
        bytes.resize(below(64));
        for (char& c : bytes) c = static_cast<char>(rng());
        break;
      }
    }
  }
  return bytes;
}

TEST(SafetensorsFuzzTest, EveryMutationLoadsOrIsRefusedCleanly) {
  const std::vector<std::string> seeds = Seeds();
  const std::string dir = strata::testing::FreshTempDir("st_fuzz");
  int64_t loaded = 0, refused = 0;
  for (int64_t i = 0; i < g_inputs; ++i) {
    std::mt19937_64 rng(i);
    const std::string bytes = Mutate(seeds[i % seeds.size()], rng);
    // Every 50th input through a mapped file, the rest from memory.
    absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file;
    if (i % 50 == 0) {
      const std::string path = dir + "/input.safetensors";
      ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
      file = SafetensorsFile::Open(path);
    } else {
      file = SafetensorsFile::FromBytes(bytes, "input");
    }
    if (!file.ok()) {
      ++refused;
      ASSERT_TRUE(file.status().code() == absl::StatusCode::kInvalidArgument ||
                  file.status().code() == absl::StatusCode::kDataLoss)
          << "input " << i << ": " << file.status();
      continue;
    }
    ++loaded;
    int64_t covered = 0;
    for (const auto& [name, tensor] : (*file)->ViewAll()) {
      // Reads every element: a view past the data would fault here.
      (void)tensor.to(at::kDouble).sum().item<double>();
      covered += tensor.nbytes();
    }
    ASSERT_EQ(covered, static_cast<int64_t>(bytes.size()) - 8 -
                           static_cast<int64_t>(HeaderLength(bytes)))
        << "input " << i;
  }
  LOG(INFO) << g_inputs << " inputs: " << loaded << " loaded, " << refused
            << " refused";
  // Both outcomes occur: the mutations reach past the first check.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace strata::serialization

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--inputs=") &&
        absl::SimpleAtoi(arg, &strata::serialization::g_inputs) &&
        strata::serialization::g_inputs > 0) {
      continue;
    }
    std::fprintf(stderr, "unknown argument '%s' (expected --inputs=N, N > 0)\n",
                 argv[i]);
    return 2;
  }
  return RUN_ALL_TESTS();
}

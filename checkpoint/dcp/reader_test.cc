// The DCP reader against PyTorch's own dcp.save (testdata/dcp_save.py, run
// with the system's Python: PyTorch 2.6 in the Debian 13 root): 2 Gloo ranks
// save DTensors of every supported dtype sharded on dim 0, on dim 1 (2-D
// boxes), 3-D, 0-d, with an empty shard, plus non-tensor values; every
// tensor, every element range of the multi-chunk ones and every value read
// here is byte-identical to the tensors the script torch.save'd whole.
// Under a PyTorch older than 2.4 (Debian 12's 1.13 has no DTensor) the
// tests are skipped, and counted as skipped.
#include "checkpoint/dcp/reader.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/dcp/metadata.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint::dcp {
namespace {

using serialization::testing::RunPython;
using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/checkpoint/dcp/testdata/dcp_save.py";
}

class ReaderTest : public ::testing::Test {
 protected:
  // One dcp.save for the suite (two Python processes take seconds).
  static void SetUpTestSuite() {
    dir_ = new std::string(strata::testing::FreshTempDir("dcp_reference"));
    const std::string why = serialization::testing::WhyTorchBelow(
        2, 4, "DTensor, dcp.save", *dir_ + "/version.log");
    if (!why.empty()) {
      skip_ = new std::string(why);
      return;
    }
    ASSERT_THAT(RunPython({ScriptPath(), "reference", *dir_}, *dir_ + "/log"),
                IsOk());
  }

  void SetUp() override {
    if (skip_ != nullptr) GTEST_SKIP() << *skip_;
    ASSERT_OK_AND_ASSIGN(reader_, Reader::Open(*dir_ + "/dcp"));
    ASSERT_OK_AND_ASSIGN(const c10::IValue expected,
                         serialization::ReadTorchFile(*dir_ + "/expected.pt"));
    for (const auto& item : expected.toGenericDict()) {
      expected_[item.key().toStringRef()] = item.value().toTensor();
    }
  }

  static std::string* dir_;
  static std::string* skip_;
  std::unique_ptr<Reader> reader_;
  std::map<std::string, at::Tensor> expected_;
};

std::string* ReaderTest::dir_ = nullptr;
std::string* ReaderTest::skip_ = nullptr;

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
    return false;
  }
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

TEST_F(ReaderTest, ListsEveryTensorWithItsDtypeShapeAndChunks) {
  const Metadata& metadata = reader_->metadata();
  ASSERT_EQ(metadata.tensors.size(), expected_.size());
  for (const auto& [name, tensor] : expected_) {
    ASSERT_TRUE(metadata.tensors.count(name)) << name;
    const SavedTensor& saved = metadata.tensors.at(name);
    EXPECT_EQ(saved.dtype, tensor.scalar_type()) << name;
    EXPECT_EQ(saved.shape, tensor.sizes().vec()) << name;
  }
  // Sharded on dim 1 at 2 ranks: [3, 9] as columns 0..4 and 5..8.
  const SavedTensor& cols = metadata.tensors.at("f32_cols");
  ASSERT_EQ(cols.chunks.size(), 2u);
  EXPECT_EQ(cols.chunks[1].offsets, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(cols.chunks[1].sizes, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(cols.chunks[1].storage.file, "__1_0.distcp");
  // Replicated: one chunk (DCP deduplicates).
  EXPECT_EQ(metadata.tensors.at("f16").chunks.size(), 1u);
  EXPECT_EQ(metadata.values.size(), 3u);
}

TEST_F(ReaderTest, ReadsEveryTensorByteIdentical) {
  for (const auto& [name, tensor] : expected_) {
    ASSERT_OK_AND_ASSIGN(const at::Tensor read, reader_->ReadTensor(name));
    EXPECT_TRUE(SameBytes(read, tensor)) << name;
  }
}

TEST_F(ReaderTest, ReadsEveryElementRangeOfShardedTensors) {
  for (const std::string name :
       {"f32_rows", "f32_cols", "f64_3d", "bf16", "u8", "one_row"}) {
    const at::Tensor flat = expected_.at(name).reshape({-1});
    const int64_t numel = flat.numel();
    for (int64_t begin = 0; begin <= numel; ++begin) {
      for (int64_t count = 0; begin + count <= numel; ++count) {
        at::Tensor out = at::empty({count}, flat.options());
        ASSERT_THAT(reader_->ReadRange(name, begin, out), IsOk());
        ASSERT_TRUE(SameBytes(out, flat.narrow(0, begin, count)))
            << name << " [" << begin << ", +" << count << ")";
      }
    }
  }
}

TEST_F(ReaderTest, ReadsValues) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue step, reader_->ReadValue("step"));
  EXPECT_EQ(step.toInt(), 42);
  ASSERT_OK_AND_ASSIGN(const c10::IValue lr, reader_->ReadValue("lr"));
  EXPECT_EQ(lr.toDouble(), 0.5);
  ASSERT_OK_AND_ASSIGN(const c10::IValue note, reader_->ReadValue("note"));
  EXPECT_EQ(note.toStringRef(), "dcp");
}

TEST_F(ReaderTest, RefusesBadRequestsNamingTheKey) {
  EXPECT_THAT(reader_->ReadTensor("nope").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'nope'")));
  EXPECT_THAT(reader_->ReadTensor("step").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("holds a non-tensor value")));
  EXPECT_THAT(reader_->ReadValue("bf16").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("a tensor")));
  at::Tensor out = at::empty({3}, at::kFloat);
  EXPECT_THAT(reader_->ReadRange("f32_rows", 33, out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("[33, 36) of 'f32_rows' lie outside")));
  EXPECT_THAT(
      reader_->ReadRange("bf16", 0, out),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("BFloat16")));
}

TEST_F(ReaderTest, RefusesNewerLayoutsAndItemsOutsideTheDirectory) {
  EXPECT_THAT(Reader::Open(*dir_ + "/versioned").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("versioned/.metadata"),
                             HasSubstr("DCP metadata version '1.0.0'"),
                             HasSubstr("newer than 2.6"))));
  EXPECT_THAT(Reader::Open(*dir_ + "/transformed").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has transform_descriptors")));
  EXPECT_THAT(Reader::Open(*dir_ + "/escaping").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is in '../secret', not a data file")));
  EXPECT_THAT(Reader::Open(*dir_).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no .metadata")));
  EXPECT_TRUE(IsDcpCheckpoint(*dir_ + "/dcp"));
  EXPECT_FALSE(IsDcpCheckpoint(*dir_));
  EXPECT_FALSE(IsDcpCheckpoint(*dir_ + "/expected.pt"));
}

TEST_F(ReaderTest, ATruncatedDataFileIsDataLossNamingFileAndKey) {
  const std::string copy = strata::testing::FreshTempDir("dcp_truncated");
  for (const auto& entry :
       std::filesystem::directory_iterator(*dir_ + "/dcp")) {
    std::filesystem::copy(entry.path(),
                          copy + "/" + entry.path().filename().string());
  }
  // Rank 1's file loses its last item (one_row's empty chunk and part of
  // scalar's): reading scalar fails, f32_rows' rank 0 chunk still reads.
  std::filesystem::resize_file(copy + "/__1_0.distcp", 16000);
  ASSERT_OK_AND_ASSIGN(const auto reader, Reader::Open(copy));
  EXPECT_THAT(reader->ReadTensor("scalar").status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("__1_0.distcp"), HasSubstr("'scalar'"),
                             HasSubstr("outside the file"))));
  at::Tensor out = at::empty({20}, at::kFloat);
  EXPECT_THAT(reader->ReadRange("f32_rows", 0, out), IsOk());
}

}  // namespace
}  // namespace strata::checkpoint::dcp

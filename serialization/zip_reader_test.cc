#include "serialization/zip_reader.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"

namespace strata::serialization {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), bytes.size());
}

// A file Strata wrote: {"w": arange(6) as float of shape 2x3, "s": "text"}.
std::string WriteSample(const std::string& name) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("w", at::arange(6, at::kFloat).reshape({2, 3}));
  dict.insert("s", std::string("text"));
  const std::string path = TempPath(name);
  EXPECT_THAT(WriteTorchFile(path, dict), IsOk());
  return path;
}

// The file offset of entry `suffix`'s data.
int64_t DataOffset(const std::string& path, const std::string& suffix) {
  absl::StatusOr<std::unique_ptr<ZipReader>> zip = ZipReader::Open(path);
  EXPECT_THAT(zip.status(), IsOk());
  for (const ZipReader::Entry& entry : (*zip)->entries()) {
    if (entry.name.size() >= suffix.size() &&
        entry.name.compare(entry.name.size() - suffix.size(), suffix.size(),
                           suffix) == 0) {
      return entry.data_offset;
    }
  }
  ADD_FAILURE() << "no entry " << suffix;
  return 0;
}

TEST(Crc32Test, MatchesTheStandardCheckValue) {
  // The CRC-32 check value of "123456789" (zlib, PNG, zip).
  EXPECT_EQ(Crc32("123456789", 9), 0xCBF43926u);
}

TEST(ZipReaderTest, StrataFilesCarryCrcsThatPythonAccepts) {
  const std::string path = WriteSample("python_checks.pt");
  const std::string script = TempPath("testzip.py");
  // zipfile.testzip() returns the first entry whose CRC-32 is wrong, or
  // None; the script fails unless every entry checks out.
  ASSERT_THAT(
      testing::WriteTextFile(script,
                             "import sys, zipfile\n"
                             "z = zipfile.ZipFile(sys.argv[1])\n"
                             "assert len(z.infolist()) >= 3, z.infolist()\n"
                             "bad = z.testzip()\n"
                             "assert bad is None, bad\n"),
      IsOk());
  EXPECT_THAT(testing::RunPython({script, path}, TempPath("testzip.log")),
              IsOk());
}

TEST(ZipReaderTest, VerifiesEveryEntryOfAStrataFile) {
  absl::StatusOr<std::unique_ptr<ZipReader>> zip =
      ZipReader::Open(WriteSample("verify_all.pt"));
  ASSERT_THAT(zip.status(), IsOk());
  EXPECT_THAT((*zip)->VerifyAll(), IsOk());
}

TEST(ZipReaderTest, AFlippedPickleByteFailsItsCrc) {
  const std::string path = WriteSample("flipped_pickle.pt");
  std::string bytes = ReadBytes(path);
  // The pickle's last byte is STOP ('.'): flip a byte in its middle.
  bytes[DataOffset(path, "/data.pkl") + 10] ^= 0x01;
  WriteBytes(path, bytes);
  EXPECT_THAT(ReadTorchFile(path),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("data.pkl"), HasSubstr("CRC-32"),
                             HasSubstr(path))));
}

TEST(ZipReaderTest, AFlippedTensorByteFailsItsCrc) {
  const std::string path = WriteSample("flipped_tensor.pt");
  std::string bytes = ReadBytes(path);
  bytes[DataOffset(path, "/data/0") + 5] ^= 0x40;
  WriteBytes(path, bytes);
  EXPECT_THAT(ReadTorchFile(path),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("data/0"), HasSubstr("CRC-32"))));
}

TEST(ZipReaderTest, ALocalHeaderNamingAnotherEntryIsRejected) {
  const std::string path = WriteSample("renamed_local.pt");
  std::string bytes = ReadBytes(path);
  // The first entry's local header: 30 fixed bytes, then its name.
  ASSERT_EQ(bytes.compare(0, 4, "PK\x03\x04"), 0);
  bytes[30] ^= 0x20;
  WriteBytes(path, bytes);
  EXPECT_THAT(ZipReader::Open(path).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("local header names another entry")));
}

TEST(ZipReaderTest, ADescriptorDisagreeingWithTheCentralDirectoryIsRejected) {
  const std::string path = WriteSample("descriptor.pt");
  std::string bytes = ReadBytes(path);
  absl::StatusOr<std::unique_ptr<ZipReader>> zip = ZipReader::Open(path);
  ASSERT_THAT(zip.status(), IsOk());
  const ZipReader::Entry& first = (*zip)->entries().front();
  // The descriptor's size field: signature (4) and CRC (4) come first.
  bytes[first.data_offset + first.size + 8] ^= 0x01;
  WriteBytes(path, bytes);
  EXPECT_THAT(ZipReader::Open(path).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("data descriptor disagrees")));
}

TEST(ZipReaderTest, TruncationIsDataLossOrNotAZipFile) {
  const std::string path = WriteSample("truncated.pt");
  const std::string bytes = ReadBytes(path);
  for (size_t size : {bytes.size() - 1, bytes.size() / 2, size_t{10}}) {
    WriteBytes(path, bytes.substr(0, size));
    EXPECT_FALSE(ReadTorchFile(path).ok()) << size;
  }
}

TEST(TorchFileReaderTest, TensorsAreReadOnlyWhenMaterialized) {
  absl::StatusOr<std::unique_ptr<TorchFileReader>> reader =
      TorchFileReader::Open(WriteSample("lazy.pt"));
  ASSERT_THAT(reader.status(), IsOk());
  const at::Tensor w = (*reader)->value().toGenericDict().at("w").toTensor();
  EXPECT_TRUE(w.is_meta());
  EXPECT_EQ(w.sizes(), at::IntArrayRef({2, 3}));
  absl::StatusOr<at::Tensor> read = (*reader)->Materialize(w);
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_TRUE(at::equal(*read, at::arange(6, at::kFloat).reshape({2, 3})));
  // A view of the lazy tensor materializes as that view.
  absl::StatusOr<at::Tensor> row = (*reader)->Materialize(w.select(0, 1));
  ASSERT_THAT(row.status(), IsOk());
  EXPECT_TRUE(at::equal(*row, at::arange(3, 6, at::kFloat)));
}

TEST(TorchFileReaderTest, AForeignMetaTensorIsAnError) {
  absl::StatusOr<std::unique_ptr<TorchFileReader>> reader =
      TorchFileReader::Open(WriteSample("foreign.pt"));
  ASSERT_THAT(reader.status(), IsOk());
  const at::Tensor w = (*reader)->value().toGenericDict().at("w").toTensor();
  EXPECT_THAT((*reader)->Materialize(w.to(at::kDouble)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not one of the file's")));
}

// An archive inside a larger file (a torch.distributed.checkpoint item):
// OpenRange reads it where it lies, ReadPart reads part of an entry, and a
// range past the file's end is DataLoss.
TEST(ZipReaderTest, OpensAnArchiveAtAByteRangeOfAFile) {
  const std::string archive = ReadBytes(WriteSample("range_sample.pt"));
  const std::string path = TempPath("range_container");
  WriteBytes(path, std::string(100, 'a') + archive + std::string(7, 'b'));
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<ZipReader> zip,
                       ZipReader::OpenRange(path, 100, archive.size()));
  EXPECT_THAT(zip->path(), HasSubstr("(bytes 100.."));
  EXPECT_THAT(zip->VerifyAll(), IsOk());
  ASSERT_OK_AND_ASSIGN(const std::unique_ptr<TorchFileReader> reader,
                       TorchFileReader::OpenRange(path, 100, archive.size()));
  const at::Tensor lazy = reader->value().toGenericDict().at("w").toTensor();
  ASSERT_OK_AND_ASSIGN(const at::Tensor w, reader->Materialize(lazy));
  EXPECT_TRUE(at::equal(w, at::arange(6, at::kFloat).reshape({2, 3})));
  float part[2] = {0, 0};
  ASSERT_THAT(
      reader->ReadStoragePart(lazy, 3 * sizeof(float), sizeof(part), part),
      IsOk());
  EXPECT_EQ(part[0], 3.0f);
  EXPECT_EQ(part[1], 4.0f);
  EXPECT_THAT(
      reader->ReadStoragePart(lazy, 5 * sizeof(float), sizeof(part), part),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside entry")));
  // Off by one byte, the archive is not found; past the end, DataLoss.
  EXPECT_FALSE(ZipReader::OpenRange(path, 101, archive.size()).ok());
  EXPECT_THAT(
      ZipReader::OpenRange(path, 100, archive.size() + 8).status(),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("outside the file")));
}

}  // namespace
}  // namespace strata::serialization

#include "checkpoint/read_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/metadata.pb.h"

namespace strata::checkpoint {

// For gtest's messages (found by argument-dependent lookup).
void PrintTo(const ChunkRead& r, std::ostream* os) {
  *os << "{chunk " << r.chunk << ", " << r.file << " @" << r.file_offset << " +"
      << r.num_bytes << ", blocks [" << r.first_block << ", " << r.end_block
      << "), skip " << r.skip_bytes << ", copy " << r.copy_bytes << ", out "
      << r.out_offset << "}";
}

namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kOneBlock = int64_t{1} << 20;

// A chunk of elements [offset, offset + numel) stored at `byte_offset` of
// `file`, `item` bytes per element, checksummed in blocks of `block_bytes`.
void AddChunk(proto::Tensor& t, int64_t offset, int64_t numel,
              const std::string& file, int64_t byte_offset, int64_t block_bytes,
              int64_t item = 4) {
  proto::Chunk* c = t.add_chunks();
  c->set_offset(offset);
  c->set_numel(numel);
  c->set_file(file);
  c->set_byte_offset(byte_offset);
  c->set_num_bytes(numel * item);
  c->set_block_bytes(block_bytes);
  for (int64_t at = 0; at < numel * item; at += block_bytes) {
    c->add_block_crc32c(0);
  }
}

proto::Tensor Floats(int64_t numel) {
  proto::Tensor t;
  t.set_name("w");
  t.add_global_shape(numel);
  t.set_dtype("Float");
  return t;
}

ChunkRead Read(int chunk, const std::string& file, int64_t file_offset,
               int64_t num_bytes, int64_t first_block, int64_t end_block,
               int64_t skip_bytes, int64_t copy_bytes, int64_t out_offset) {
  ChunkRead r;
  r.chunk = chunk;
  r.file = file;
  r.file_offset = file_offset;
  r.num_bytes = num_bytes;
  r.first_block = first_block;
  r.end_block = end_block;
  r.skip_bytes = skip_bytes;
  r.copy_bytes = copy_bytes;
  r.out_offset = out_offset;
  return r;
}

// 10 floats saved by two ranks as [0, 4) and [4, 10), one block per chunk.
proto::Tensor SavedByTwoRanks() {
  proto::Tensor t = Floats(10);
  AddChunk(t, 0, 4, "rank0.data", 0, kOneBlock);
  AddChunk(t, 4, 6, "rank1.data", 0, kOneBlock);
  return t;
}

TEST(PlanRangeReadsTest, FirstRunReadsAWholeChunkAndAHeadOfTheNext) {
  // Run [0, 5): chunk 0 whole (straight into place), then element 4 out of
  // chunk 1's only block (read whole: 24 bytes, 4 wanted).
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads,
                       PlanRangeReads(SavedByTwoRanks(), 0, 5));
  EXPECT_THAT(reads, ElementsAre(Read(0, "rank0.data", 0, 16, 0, 1, 0, 16, 0),
                                 Read(1, "rank1.data", 0, 24, 0, 1, 0, 4, 16)));
  EXPECT_TRUE(reads[0].direct());
  EXPECT_FALSE(reads[1].direct());
}

TEST(PlanRangeReadsTest, SecondRunReadsTheTailOfAChunk) {
  // Run [5, 10): chunk 1's elements 1..5, bytes [4, 24) of its block.
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads,
                       PlanRangeReads(SavedByTwoRanks(), 5, 10));
  EXPECT_THAT(reads, ElementsAre(Read(1, "rank1.data", 0, 24, 0, 1, 4, 20, 0)));
}

TEST(PlanRangeReadsTest, RunSpanningSeveralChunksReadsEachInOrder) {
  proto::Tensor t = Floats(10);
  AddChunk(t, 0, 3, "rank0.data", 0, kOneBlock);
  AddChunk(t, 3, 3, "rank1.data", 12, kOneBlock);
  AddChunk(t, 6, 4, "rank2.data", 40, kOneBlock);
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads, PlanRangeReads(t, 2, 8));
  EXPECT_THAT(reads,
              ElementsAre(Read(0, "rank0.data", 0, 12, 0, 1, 8, 4, 0),
                          Read(1, "rank1.data", 12, 12, 0, 1, 0, 12, 4),
                          Read(2, "rank2.data", 40, 16, 0, 1, 0, 8, 16)));
}

TEST(PlanRangeReadsTest, ReadsAreRoundedOutToWholeChecksumBlocks) {
  // 10 floats (40 bytes) at byte 100, blocks of 8 bytes. Elements [3, 7) are
  // bytes [12, 28): blocks 1..3, bytes [8, 32) of the chunk.
  proto::Tensor t = Floats(10);
  AddChunk(t, 0, 10, "rank0.data", 100, 8);
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads, PlanRangeReads(t, 3, 7));
  EXPECT_THAT(reads,
              ElementsAre(Read(0, "rank0.data", 108, 24, 1, 4, 4, 16, 0)));
}

TEST(PlanRangeReadsTest, BlockAlignedRangeIsDirect) {
  proto::Tensor t = Floats(10);
  AddChunk(t, 0, 10, "rank0.data", 0, 8);
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads, PlanRangeReads(t, 2, 6));
  EXPECT_THAT(reads, ElementsAre(Read(0, "rank0.data", 8, 16, 1, 3, 0, 16, 0)));
  EXPECT_TRUE(reads[0].direct());
}

TEST(PlanRangeReadsTest, ShortLastBlockEndsTheRead) {
  // 40 bytes in blocks of 16: the last block is bytes [32, 40).
  proto::Tensor t = Floats(10);
  AddChunk(t, 0, 10, "rank0.data", 0, 16);
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads, PlanRangeReads(t, 9, 10));
  EXPECT_THAT(reads, ElementsAre(Read(0, "rank0.data", 32, 8, 2, 3, 4, 4, 0)));
}

TEST(PlanRangeReadsTest, ElementSizeComesFromTheDtype) {
  proto::Tensor t = Floats(10);
  t.set_dtype("BFloat16");
  AddChunk(t, 0, 10, "rank0.data", 0, kOneBlock, /*item=*/2);
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads, PlanRangeReads(t, 5, 10));
  EXPECT_THAT(reads,
              ElementsAre(Read(0, "rank0.data", 0, 20, 0, 1, 10, 10, 0)));
}

TEST(PlanRangeReadsTest, EmptyRangeReadsNothing) {
  ASSERT_OK_AND_ASSIGN(std::vector<ChunkRead> reads,
                       PlanRangeReads(SavedByTwoRanks(), 4, 4));
  EXPECT_THAT(reads, IsEmpty());
}

TEST(PlanRangeReadsTest, UnknownDtypeIsAnError) {
  proto::Tensor t = SavedByTwoRanks();
  t.set_dtype("Float7");
  EXPECT_THAT(PlanRangeReads(t, 0, 10),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown dtype 'Float7'")));
}

}  // namespace
}  // namespace strata::checkpoint

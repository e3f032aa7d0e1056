#include "checkpoint/sharded.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/crc32c.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/io.h"
#include "checkpoint/metadata.h"
#include "checkpoint/read_plan.h"
#include "checkpoint/save_plan.h"
#include "comm/exchange.h"

namespace strata::checkpoint {
namespace {

// Reads in flight per rank while loading.
constexpr int kReadThreads = 4;

std::string DataFileName(int rank) {
  return absl::StrCat("rank", rank, ".data");
}

// Checks one tensor's chunk list against its shape and dtype.
absl::Status ValidateTensor(const std::string& dir, const proto::Metadata& md,
                            const proto::Tensor& t) {
  STRATA_ASSIGN_OR_RETURN(at::ScalarType dtype, DtypeFromName(t.dtype()));
  const int64_t item = c10::elementSize(dtype);
  const int64_t numel = NumElements(
      std::vector<int64_t>(t.global_shape().begin(), t.global_shape().end()));
  int64_t next = 0;
  for (int k = 0; k < t.chunks_size(); ++k) {
    const proto::Chunk& c = t.chunks(k);
    const int64_t blocks =
        c.block_bytes() > 0
            ? (c.num_bytes() + c.block_bytes() - 1) / c.block_bytes()
            : -1;
    const bool known_file = std::find(md.files().begin(), md.files().end(),
                                      c.file()) != md.files().end() &&
                            c.file().find('/') == std::string::npos;
    if (c.offset() != next || c.numel() <= 0 ||
        c.num_bytes() != c.numel() * item || c.byte_offset() < 0 ||
        blocks != c.block_crc32c_size() || !known_file) {
      return absl::DataLossError(absl::StrFormat(
          "%s/%s is inconsistent: chunk %d of tensor '%s' (offset %d, %d "
          "elements, file '%s', %d bytes, %d checksums) does not fit the "
          "tensor's shape %s, dtype %s and chunk list",
          dir, kMetadataFile, k, t.name(), c.offset(), c.numel(), c.file(),
          c.num_bytes(), c.block_crc32c_size(),
          ShapeString(std::vector<int64_t>(t.global_shape().begin(),
                                           t.global_shape().end())),
          t.dtype()));
    }
    next += c.numel();
  }
  if (next != numel) {
    return absl::DataLossError(absl::StrFormat(
        "%s/%s is inconsistent: the chunks of tensor '%s' cover %d of its %d "
        "elements",
        dir, kMetadataFile, t.name(), next, numel));
  }
  return absl::OkStatus();
}

// Reads element ranges of tensors through their chunks, verifying the
// checksum blocks it reads. Owns the file descriptors it opens.
class ChunkReader {
 public:
  explicit ChunkReader(std::string dir) : dir_(std::move(dir)) {}
  ~ChunkReader() {
    for (const auto& [name, fd] : fds_) ::close(fd);
  }
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Elements [a, b) of `t` into `out`. `t` was validated.
  absl::Status Read(const proto::Tensor& t, int64_t a, int64_t b, char* out) {
    STRATA_ASSIGN_OR_RETURN(std::vector<ChunkRead> reads,
                            PlanRangeReads(t, a, b));
    return Execute(t, reads, out);
  }

  // Performs `reads` (PlanRangeReads of `t`), verifying every block read.
  absl::Status Execute(const proto::Tensor& t,
                       const std::vector<ChunkRead>& reads, char* out) {
    for (const ChunkRead& r : reads) {
      const proto::Chunk& c = t.chunks(r.chunk);
      STRATA_ASSIGN_OR_RETURN(int fd, Fd(r.file));
      // Block-aligned ranges (whole chunks, the common case) are read
      // straight into `out`; others through a buffer.
      char* dst = out + r.out_offset;
      char* data = dst;
      if (!r.direct()) {
        buffer_.resize(r.num_bytes);
        data = buffer_.data();
      }
      const std::string path = dir_ + "/" + r.file;
      const std::string chunk_name = absl::StrFormat(
          "tensor '%s' chunk %d (file '%s', bytes [%d, %d))", t.name(), r.chunk,
          path, c.byte_offset(), c.byte_offset() + c.num_bytes());
      if (absl::Status s = PreadAll(fd, path, data, r.num_bytes, r.file_offset);
          !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat(chunk_name, ": ", s.message()));
      }
      const int64_t bs = c.block_bytes();
      for (int64_t i = r.first_block; i < r.end_block; ++i) {
        const int64_t len = std::min(bs, c.num_bytes() - i * bs);
        const uint32_t crc = Crc32c(data + (i - r.first_block) * bs, len);
        if (crc != c.block_crc32c(i)) {
          return absl::DataLossError(absl::StrFormat(
              "%s is corrupted: checksum mismatch in block %d (chunk bytes "
              "[%d, %d)): stored %08x, computed %08x",
              chunk_name, i, i * bs, i * bs + len, c.block_crc32c(i), crc));
        }
      }
      if (!r.direct()) {
        std::memcpy(dst, buffer_.data() + r.skip_bytes, r.copy_bytes);
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<int> Fd(const std::string& file) {
    auto it = fds_.find(file);
    if (it != fds_.end()) return it->second;
    const std::string path = dir_ + "/" + file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint '", dir_, "' is incomplete: cannot open its data file '",
          path, "': ", std::strerror(errno)));
    }
    fds_[file] = fd;
    return fd;
  }

  const std::string dir_;
  std::map<std::string, int> fds_;
  std::vector<char> buffer_;
};

std::vector<std::string> Names(const std::vector<ShardedTensor>& runs) {
  std::vector<std::string> names;
  for (const auto& run : runs) names.push_back(run.name);
  return names;
}

std::vector<TensorInfo> Infos(
    const google::protobuf::RepeatedPtrField<proto::Tensor>& tensors) {
  std::vector<TensorInfo> infos;
  for (const proto::Tensor& t : tensors) {
    TensorInfo info;
    info.name = t.name();
    info.shape.assign(t.global_shape().begin(), t.global_shape().end());
    infos.push_back(std::move(info));
  }
  return infos;
}

// One live run's reads in LoadSharded: its elements of `tensor` into `out`.
struct ReadTask {
  const proto::Tensor* tensor = nullptr;
  std::vector<ChunkRead> reads;
  char* out = nullptr;
};

// Validates the matched tensors and allocates the staging buffers of one
// section's runs; appends the reads to `tasks`.
absl::Status PlanSection(
    const std::string& dir, const proto::Metadata& md,
    const google::protobuf::RepeatedPtrField<proto::Tensor>& saved,
    const std::vector<ShardedTensor>& live, const std::vector<int>& match,
    std::vector<at::Tensor>& staged, std::vector<ReadTask>& tasks) {
  staged.assign(live.size(), at::Tensor());
  std::vector<bool> validated(saved.size(), false);
  for (size_t i = 0; i < live.size(); ++i) {
    if (match[i] < 0) continue;
    const proto::Tensor& t = saved.Get(match[i]);
    if (!validated[match[i]]) {
      STRATA_RETURN_IF_ERROR(ValidateTensor(dir, md, t));
      validated[match[i]] = true;
    }
    STRATA_ASSIGN_OR_RETURN(at::ScalarType dtype, DtypeFromName(t.dtype()));
    const int64_t n = live[i].local.numel();
    staged[i] = at::empty({n}, dtype);
    STRATA_ASSIGN_OR_RETURN(
        std::vector<ChunkRead> reads,
        PlanRangeReads(t, live[i].offset, live[i].offset + n));
    tasks.push_back(
        {&t, std::move(reads), static_cast<char*>(staged[i].data_ptr())});
  }
  return absl::OkStatus();
}

// Runs the reads on `num_threads` threads (each with its own descriptors),
// so that several requests are in flight; returns the error of the first
// failed task in task order (the same error whatever the timing).
absl::Status RunReads(const std::string& dir,
                      const std::vector<ReadTask>& tasks, int num_threads) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  size_t failed_task = tasks.size();
  absl::Status failed;
  auto work = [&] {
    ChunkReader reader(dir);
    for (size_t k = next++; k < tasks.size(); k = next++) {
      const ReadTask& task = tasks[k];
      absl::Status s = reader.Execute(*task.tensor, task.reads, task.out);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (k < failed_task) {
          failed_task = k;
          failed = s;
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < num_threads; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return failed;
}

}  // namespace

absl::Status SaveSharded(const std::string& dir, const TensorState& state,
                         const Contents& contents, comm::Group* group,
                         const WriteOptions& options) {
  CHECK_GT(options.block_bytes, 0);
  const int rank = group == nullptr ? 0 : group->rank();
  const int world = group == nullptr ? 1 : group->size();
  STRATA_ASSIGN_OR_RETURN(SavePlan plan,
                          MakeSavePlan(group, state, options.split_bytes));
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(
      group, rank == 0 ? PrepareStagingDir(dir) : absl::OkStatus()));

  // This rank's pieces, in plan order.
  const std::string file = DataFileName(rank);
  proto::RankChunks mine;
  const absl::Time start = absl::Now();
  absl::Status written = [&]() -> absl::Status {
    STRATA_ASSIGN_OR_RETURN(FileWriter writer,
                            FileWriter::Create(StagingDir(dir) + "/" + file));
    for (const PlannedTensor& t : plan.tensors) {
      const auto& runs =
          t.section == Section::kModel ? state.model : state.optimizer;
      const int64_t item = c10::elementSize(t.dtype);
      for (const PlannedTensor::Piece& piece : t.pieces) {
        if (piece.rank != rank) continue;
        const ShardedTensor& run = runs[piece.run];
        const char* data = static_cast<const char*>(run.local.data_ptr()) +
                           (piece.offset - run.offset) * item;
        const int64_t bytes = piece.numel * item;
        proto::Chunk* c = mine.add_chunks();
        c->set_offset(piece.offset);
        c->set_numel(piece.numel);
        c->set_file(file);
        c->set_num_bytes(bytes);
        c->set_block_bytes(options.block_bytes);
        for (int64_t at = 0; at < bytes; at += options.block_bytes) {
          c->add_block_crc32c(
              Crc32c(data + at, std::min(options.block_bytes, bytes - at)));
        }
        STRATA_ASSIGN_OR_RETURN(int64_t offset, writer.Append(data, bytes));
        c->set_byte_offset(offset);
      }
    }
    STRATA_RETURN_IF_ERROR(writer.SyncAndClose());
    if (options.before_commit) options.before_commit();
    return absl::OkStatus();
  }();
  const double write_s = absl::ToDoubleSeconds(absl::Now() - start);
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, written));
  const double agree_s = absl::ToDoubleSeconds(absl::Now() - start);
  STRATA_ASSIGN_OR_RETURN(
      std::vector<std::string> all_chunks,
      comm::AllGatherBytes(group, mine.SerializeAsString()));

  absl::Status committed = absl::OkStatus();
  if (rank == 0) {
    committed = [&]() -> absl::Status {
      proto::Metadata md;
      md.set_format(kShardedFormat);
      md.set_format_version(1);
      ContentsToProto(contents, md);
      for (int r = 0; r < world; ++r) md.add_files(DataFileName(r));
      std::vector<proto::RankChunks> chunks(world);
      std::vector<int> next(world, 0);
      for (int r = 0; r < world; ++r) {
        if (!chunks[r].ParseFromString(all_chunks[r])) {
          return absl::InternalError(
              absl::StrCat("cannot parse the chunk list of rank ", r));
        }
      }
      for (const PlannedTensor& t : plan.tensors) {
        proto::Tensor* out =
            t.section == Section::kModel ? md.add_model() : md.add_optimizer();
        out->set_name(t.name);
        for (int64_t d : t.shape) out->add_global_shape(d);
        out->set_dtype(DtypeName(t.dtype));
        for (const PlannedTensor::Piece& piece : t.pieces) {
          CHECK_LT(next[piece.rank], chunks[piece.rank].chunks_size());
          *out->add_chunks() = chunks[piece.rank].chunks(next[piece.rank]++);
        }
      }
      STRATA_RETURN_IF_ERROR(WriteMetadataFile(StagingDir(dir), md));
      return CommitStagingDir(dir);
    }();
  }
  VLOG(1) << "rank " << rank << ": sharded save of " << dir << ": data written "
          << write_s << " s, all ranks written " << agree_s << " s, committed "
          << absl::ToDoubleSeconds(absl::Now() - start) << " s";
  return comm::AgreeOnStatus(group, committed);
}

absl::StatusOr<Contents> LoadSharded(const std::string& dir,
                                     const TensorState& live,
                                     const ReadOptions& options,
                                     comm::Group* group) {
  std::vector<at::Tensor> model_staged, optimizer_staged;
  const absl::Time start = absl::Now();
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> model_names,
                          comm::AllGatherNames(group, Names(live.model)));
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> optimizer_names,
                          comm::AllGatherNames(group, Names(live.optimizer)));
  absl::StatusOr<Contents> result = [&]() -> absl::StatusOr<Contents> {
    STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(dir));
    if (md.format() != kShardedFormat) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", dir, "' is a '", md.format(),
                       "' checkpoint, not a sharded one"));
    }
    STRATA_RETURN_IF_ERROR(CheckRuns(live.model));
    STRATA_RETURN_IF_ERROR(CheckRuns(live.optimizer));
    std::vector<ReadTask> tasks;
    STRATA_ASSIGN_OR_RETURN(
        std::vector<int> model_match,
        MatchRuns(absl::StrCat("checkpoint '", dir, "' (model)"), live.model,
                  model_names, Infos(md.model()), options, /*revise=*/true,
                  options.model_keys));
    STRATA_RETURN_IF_ERROR(PlanSection(dir, md, md.model(), live.model,
                                       model_match, model_staged, tasks));
    if (options.load_optimizer) {
      STRATA_ASSIGN_OR_RETURN(
          std::vector<int> optimizer_match,
          MatchRuns(absl::StrCat("checkpoint '", dir, "' (optimizer)"),
                    live.optimizer, optimizer_names, Infos(md.optimizer()),
                    options, /*revise=*/false));
      STRATA_RETURN_IF_ERROR(PlanSection(dir, md, md.optimizer(),
                                         live.optimizer, optimizer_match,
                                         optimizer_staged, tasks));
    }
    STRATA_RETURN_IF_ERROR(RunReads(dir, tasks, kReadThreads));
    return ContentsFromProto(md);
  }();
  const double read_s = absl::ToDoubleSeconds(absl::Now() - start);
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, result.status()));
  CopyStaged(live.model, model_staged);
  if (options.load_optimizer) CopyStaged(live.optimizer, optimizer_staged);
  VLOG(1) << "sharded load of " << dir << ": staged (read, verified) " << read_s
          << " s, copied " << absl::ToDoubleSeconds(absl::Now() - start)
          << " s";
  return result;
}

absl::Status ReadShardedRange(const std::string& dir,
                              const proto::Tensor& tensor, int64_t offset,
                              int64_t numel, void* out) {
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(dir));
  STRATA_RETURN_IF_ERROR(ValidateTensor(dir, md, tensor));
  ChunkReader reader(dir);
  return reader.Read(tensor, offset, offset + numel, static_cast<char*>(out));
}

absl::StatusOr<std::pair<TensorState, Contents>> ReadShardedCheckpoint(
    const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(dir));
  if (md.format() != kShardedFormat) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", dir, "' is a '", md.format(), "' checkpoint, not a sharded one"));
  }
  ChunkReader reader(dir);
  TensorState state;
  for (int section = 0; section < 2; ++section) {
    const auto& tensors = section == 0 ? md.model() : md.optimizer();
    for (const proto::Tensor& t : tensors) {
      STRATA_RETURN_IF_ERROR(ValidateTensor(dir, md, t));
      STRATA_ASSIGN_OR_RETURN(at::ScalarType dtype, DtypeFromName(t.dtype()));
      const std::vector<int64_t> shape(t.global_shape().begin(),
                                       t.global_shape().end());
      at::Tensor whole = at::empty(shape, dtype);
      STRATA_RETURN_IF_ERROR(reader.Read(t, 0, whole.numel(),
                                         static_cast<char*>(whole.data_ptr())));
      (section == 0 ? state.model : state.optimizer)
          .push_back({t.name(), shape, 0, whole});
    }
  }
  return std::make_pair(std::move(state), ContentsFromProto(md));
}

absl::StatusOr<int64_t> VerifySharded(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(dir));
  ChunkReader reader(dir);
  int64_t bytes = 0;
  for (const auto* section : {&md.model(), &md.optimizer()}) {
    for (const proto::Tensor& t : *section) {
      STRATA_RETURN_IF_ERROR(ValidateTensor(dir, md, t));
      STRATA_ASSIGN_OR_RETURN(at::ScalarType dtype, DtypeFromName(t.dtype()));
      const int64_t numel = NumElements(std::vector<int64_t>(
          t.global_shape().begin(), t.global_shape().end()));
      std::vector<char> buffer(numel * c10::elementSize(dtype));
      STRATA_RETURN_IF_ERROR(reader.Read(t, 0, numel, buffer.data()));
      bytes += buffer.size();
    }
  }
  return bytes;
}

}  // namespace strata::checkpoint

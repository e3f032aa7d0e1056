// safetensors files (Hugging Face's format for published weights): read with
// zero-copy views over a memory mapping, written atomically.
//
// The format (https://huggingface.co/docs/safetensors, "Format"): an 8-byte
// little-endian unsigned header length N; N bytes of UTF-8 JSON, an object
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
// end]} (byte offsets into the data that follows, relative to its start) and
// an optional "__metadata__" object of string values; the header may be
// padded with trailing spaces; then the data: every tensor's bytes in C
// order, little-endian, the tensors packed with neither gaps nor overlaps.
//
// Everything in the header is validated before a tensor is returned;
// a bad file is an InvalidArgument (DataLoss when it ends early) naming the
// file and what is wrong: the header length past the end of the file, a
// header that is not JSON (or not UTF-8, or repeats a key), an unknown
// dtype, a shape whose size times the dtype's does not match its byte span,
// offsets out of range, overlapping or leaving a gap, data that does not
// end where the file does, a BOOL byte other than 0 or 1.
#ifndef STRATA_SERIALIZATION_SAFETENSORS_H_
#define STRATA_SERIALIZATION_SAFETENSORS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::serialization {

// The largest header Strata reads (the reference implementation's limit).
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// "F32" for at::kFloat, ...: the format's names of the dtypes LibTorch 1.13
// has (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL). InvalidArgument
// for any other scalar type.
absl::StatusOr<std::string> SafetensorsDtypeName(at::ScalarType type);

// One tensor as the header describes it.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  // Byte range [begin, end) in the data section.
  int64_t begin = 0;
  int64_t end = 0;
};

// An open, validated safetensors file. Immutable; shared by the tensors
// View() returns, so the mapping lives as long as the last of them.
class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  // Maps `path` (read-only, private: writes to a view never reach the file)
  // and validates it. NotFound if it does not exist.
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> Open(
      const std::string& path);
  // The same over bytes in memory (named `source` in errors); the file owns
  // them.
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> FromBytes(
      std::string bytes, const std::string& source);

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  // The tensors in data order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // "__metadata__" (empty if absent).
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }
  const std::string& source() const { return source_; }
  // Whether the file has a tensor named `name`.
  bool Contains(const std::string& name) const;

  // A CPU tensor over the file's bytes, without a copy when they are aligned
  // to the dtype's size (always so in files whose tensors are sorted by
  // alignment, as Strata's and Hugging Face's writers do); otherwise a copy.
  // Holds this file open. NotFound naming the tensor and the file.
  absl::StatusOr<at::Tensor> View(const std::string& name) const;
  // Every tensor as View() gives it, in data order.
  std::vector<std::pair<std::string, at::Tensor>> ViewAll() const;

 private:
  struct Mapping;
  SafetensorsFile(std::string source, std::unique_ptr<Mapping> mapping);
  absl::Status Parse();
  at::Tensor ViewOf(const SafetensorsEntry& entry) const;

  std::string source_;
  std::unique_ptr<Mapping> mapping_;
  int64_t data_offset_ = 0;  // Of the data section in the file.
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;  // Name -> position in entries_.
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (any device, any layout: stored contiguous, as CPU data)
// with `metadata` as "__metadata__" to `path`, atomically (a temporary file
// beside it, synced, then renamed over it). Tensors are stored in order of
// decreasing element size, then by name, after a header padded with spaces
// to a multiple of 8 bytes, so every tensor is aligned for View().
// InvalidArgument naming the tensor for a duplicate or empty name, the name
// "__metadata__", a name or metadata that is not UTF-8, or a dtype the format
// lacks; I/O errors name the file.
absl::Status WriteSafetensors(
    const std::string& path,
    const std::vector<std::pair<std::string, at::Tensor>>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_SAFETENSORS_H_

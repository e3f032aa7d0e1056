#include "checkpoint/dcp/reader.h"

#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/escape.h"
#include "base/status.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint::dcp {
namespace {

// A run of elements copied from a chunk: `count` elements at element
// `chunk_at` of the chunk (row-major in its box) to element `out_at` of
// the output.
struct Piece {
  int64_t chunk_at = 0;
  int64_t out_at = 0;
  int64_t count = 0;
};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The pieces of `chunk` (of a tensor of `shape`) inside global elements
// [begin, end): the chunk's rows (its last dimension) one by one, in
// increasing global order.
std::vector<Piece> PiecesOf(const Chunk& chunk,
                            const std::vector<int64_t>& shape, int64_t begin,
                            int64_t end) {
  std::vector<Piece> pieces;
  const size_t rank = shape.size();
  const int64_t numel = Numel(chunk.sizes);
  if (numel == 0) return pieces;
  std::vector<int64_t> strides(rank, 1);  // of the global tensor
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  const int64_t row = rank == 0 ? 1 : chunk.sizes[rank - 1];
  std::vector<int64_t> index(rank, 0);  // within the chunk, last dim 0
  for (int64_t at = 0; at < numel; at += row) {
    int64_t global = 0;
    for (size_t d = 0; d < rank; ++d) {
      global += (chunk.offsets[d] + index[d]) * strides[d];
    }
    const int64_t lo = std::max(global, begin);
    const int64_t hi = std::min(global + row, end);
    if (lo < hi) {
      Piece piece{at + (lo - global), lo - begin, hi - lo};
      if (!pieces.empty() &&
          pieces.back().chunk_at + pieces.back().count == piece.chunk_at &&
          pieces.back().out_at + pieces.back().count == piece.out_at) {
        pieces.back().count += piece.count;
      } else {
        pieces.push_back(piece);
      }
    }
    if (global >= end) break;  // rows only go up from here
    // Next row: increment the index over all but the last dimension.
    for (size_t d = rank == 0 ? 0 : rank - 1; d-- > 0;) {
      if (++index[d] < chunk.sizes[d]) break;
      index[d] = 0;
    }
  }
  return pieces;
}

std::string Join(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", values[i]);
  }
  return out + "]";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Reader>> Reader::Open(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(Metadata metadata, ReadMetadata(dir));
  return std::unique_ptr<Reader>(new Reader(dir, std::move(metadata)));
}

absl::Status Reader::NoTensor(const std::string& name) const {
  return absl::NotFoundError(absl::StrCat(
      dir_, ": no tensor '", EscapeBytes(name), "' in the checkpoint",
      metadata_.values.count(name) ? " (it holds a non-tensor value)" : ""));
}

absl::Status Reader::ReadRange(const std::string& name, int64_t begin,
                               const at::Tensor& out) const {
  auto found = metadata_.tensors.find(name);
  if (found == metadata_.tensors.end()) return NoTensor(name);
  const SavedTensor& info = found->second;
  const int64_t numel = Numel(info.shape);
  const int64_t count = out.defined() ? out.numel() : -1;
  if (count < 0 || !out.is_cpu() || !out.is_contiguous() ||
      out.scalar_type() != info.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir_, ": reading '", EscapeBytes(name), "' (",
                     c10::toString(info.dtype),
                     ") needs a contiguous CPU output tensor of that dtype"));
  }
  if (begin < 0 || begin > numel || count > numel - begin) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir_, ": elements [", begin, ", ", begin + count, ") of '",
        EscapeBytes(name), "' lie outside its ", numel, " elements"));
  }
  const int64_t end = begin + count;
  const int64_t element = static_cast<int64_t>(c10::elementSize(info.dtype));
  char* const dst = static_cast<char*>(out.data_ptr());
  int64_t copied = 0;
  for (const Chunk& chunk : info.chunks) {
    const std::vector<Piece> pieces = PiecesOf(chunk, info.shape, begin, end);
    if (pieces.empty()) continue;
    const std::string path = absl::StrCat(dir_, "/", chunk.storage.file);
    const std::string where =
        absl::StrCat(path, " (bytes ", chunk.storage.offset, "..",
                     chunk.storage.offset + chunk.storage.length, ", '",
                     EscapeBytes(name), "' at ", Join(chunk.offsets), ")");
    const std::string context =
        absl::StrCat("'", EscapeBytes(name), "' at ", Join(chunk.offsets));
    auto opened = serialization::TorchFileReader::OpenRange(
        path, chunk.storage.offset, chunk.storage.length);
    if (!opened.ok()) return Annotate(opened.status(), context);
    const std::unique_ptr<serialization::TorchFileReader> item =
        *std::move(opened);
    const c10::IValue& value = item->value();
    if (!value.isTensor() || value.toTensor().scalar_type() != info.dtype ||
        value.toTensor().sizes().vec() != chunk.sizes ||
        !value.toTensor().is_contiguous()) {
      return absl::DataLossError(absl::StrCat(
          where, ": the item is not the chunk the metadata describes (a ",
          c10::toString(info.dtype), " tensor of size ", Join(chunk.sizes),
          ", contiguous); corrupted, or not written by PyTorch 2.6's DCP"));
    }
    const at::Tensor tensor = value.toTensor();
    const int64_t chunk_numel = tensor.numel();
    int64_t lo = pieces.front().chunk_at;
    int64_t hi = pieces.back().chunk_at + pieces.back().count;
    const char* src = nullptr;
    at::Tensor whole;
    std::string part;
    if (!tensor.is_meta() || (lo == 0 && hi == chunk_numel)) {
      auto materialized = item->Materialize(tensor);
      if (!materialized.ok()) return Annotate(materialized.status(), context);
      whole = materialized->contiguous();
      src = static_cast<const char*>(whole.data_ptr());
      lo = 0;
    } else {
      part.resize((hi - lo) * element);
      STRATA_RETURN_IF_ERROR(Annotate(
          item->ReadStoragePart(tensor,
                                (tensor.storage_offset() + lo) * element,
                                static_cast<int64_t>(part.size()), part.data()),
          context));
      src = part.data();
    }
    for (const Piece& piece : pieces) {
      std::memcpy(dst + piece.out_at * element,
                  src + (piece.chunk_at - lo) * element, piece.count * element);
      copied += piece.count;
    }
  }
  if (copied != count) {
    return absl::DataLossError(
        absl::StrCat(dir_, ": the chunks of '", EscapeBytes(name), "' hold ",
                     copied, " of elements [", begin, ", ", end,
                     ") (some twice, others not at all): corrupted metadata"));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> Reader::ReadTensor(const std::string& name) const {
  auto found = metadata_.tensors.find(name);
  if (found == metadata_.tensors.end()) return NoTensor(name);
  at::Tensor out = at::empty({Numel(found->second.shape)},
                             at::TensorOptions().dtype(found->second.dtype));
  STRATA_RETURN_IF_ERROR(ReadRange(name, 0, out));
  return out.view(found->second.shape);
}

absl::StatusOr<c10::IValue> Reader::ReadValue(const std::string& name) const {
  auto found = metadata_.values.find(name);
  if (found == metadata_.values.end()) {
    return absl::NotFoundError(absl::StrCat(
        dir_, ": no value '", EscapeBytes(name), "' in the checkpoint",
        metadata_.tensors.count(name) ? " (it holds a tensor)" : ""));
  }
  const StorageRange& range = found->second;
  const std::string context = absl::StrCat("'", EscapeBytes(name), "'");
  auto item = serialization::TorchFileReader::OpenRange(
      absl::StrCat(dir_, "/", range.file), range.offset, range.length);
  if (!item.ok()) return Annotate(item.status(), context);
  // A state dict's tensors are chunks, but a value may hold one (Strata
  // saves bytes as a uint8 tensor): read them, all records verified.
  STRATA_RETURN_IF_ERROR(Annotate((*item)->VerifyAllRecords(), context));
  const serialization::TorchFileReader& reader = **item;
  std::function<absl::StatusOr<c10::IValue>(const c10::IValue&, int)> read =
      [&](const c10::IValue& v, int depth) -> absl::StatusOr<c10::IValue> {
    if (depth > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir_, ": ", context, " is nested too deeply"));
    }
    if (v.isTensor()) {
      auto t = reader.Materialize(v.toTensor());
      if (!t.ok()) return Annotate(t.status(), context);
      return c10::IValue(*t);
    }
    if (v.isList()) {
      c10::impl::GenericList out(c10::AnyType::get());
      for (const c10::IValue& e : v.toListRef()) {
        STRATA_ASSIGN_OR_RETURN(c10::IValue r, read(e, depth + 1));
        out.push_back(std::move(r));
      }
      return c10::IValue(out);
    }
    if (v.isGenericDict()) {
      const c10::impl::GenericDict dict = v.toGenericDict();
      c10::impl::GenericDict out(dict.keyType(), c10::AnyType::get());
      for (const auto& entry : dict) {
        STRATA_ASSIGN_OR_RETURN(c10::IValue r, read(entry.value(), depth + 1));
        out.insert(entry.key(), std::move(r));
      }
      return c10::IValue(out);
    }
    if (v.isTuple()) {
      std::vector<c10::IValue> out;
      for (const c10::IValue& e : v.toTupleRef().elements()) {
        STRATA_ASSIGN_OR_RETURN(c10::IValue r, read(e, depth + 1));
        out.push_back(std::move(r));
      }
      return c10::IValue(c10::ivalue::Tuple::create(std::move(out)));
    }
    return v;
  };
  return read(reader.value(), 0);
}

}  // namespace strata::checkpoint::dcp

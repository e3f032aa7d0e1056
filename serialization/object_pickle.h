// A pickle of plain Python data and objects, read into a tree without
// running anything: what Python's pickle.dump writes for dataclasses,
// enums and other objects (protocols 2 to 5), e.g. the `.metadata` file of
// a torch.distributed.checkpoint directory. Unlike pickle_reader.h (the
// tensors of torch.save files, as IValues), objects are kept as what the
// pickle says of them: the class or callable named, its arguments and the
// state BUILD gives it; nothing is imported or called. No LibTorch.
#ifndef STRATA_SERIALIZATION_OBJECT_PICKLE_H_
#define STRATA_SERIALIZATION_OBJECT_PICKLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::serialization {

// One value of the pickle. Nodes are owned by their PickledObjects and
// refer to each other by pointer; a pickle may make a container that holds
// itself (memo), so walk the tree to a bounded depth.
struct PyValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kTuple,
    kList,
    kDict,
    // A class or function named by GLOBAL / STACK_GLOBAL ("module.name" in
    // `text`), not called.
    kGlobal,
    // The result of calling a global (NEWOBJ or REDUCE): `text` is the
    // callable's name, `args` its argument tuple, `state` what BUILD gave
    // it (null without BUILD).
    kObject,
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;  // kStr, kBytes, kGlobal, kObject (the callable)
  // kTuple, kList: the items; kDict: keys and values alternating, in order.
  std::vector<const PyValue*> items;
  const PyValue* args = nullptr;   // kObject: a kTuple
  const PyValue* state = nullptr;  // kObject: null until BUILD

  // The value of `key` (a str) in this dict; null when absent or this is
  // not a dict.
  const PyValue* Get(absl::string_view key) const;
  // A short name of the kind ("dict", "str", ..., or the object's class).
  std::string Describe() const;
};

// The values of one pickle, and its root.
class PickledObjects {
 public:
  const PyValue& root() const { return *root_; }

 private:
  friend class ObjectUnpickler;
  std::vector<std::unique_ptr<PyValue>> nodes_;
  const PyValue* root_ = nullptr;
};

// The most values one pickle may make (a guard against crafted input; a DCP
// `.metadata` of a 70B model's sharded state makes a few million).
inline constexpr size_t kMaxPickledValues = size_t{1} << 26;

// Interprets `pickle` (protocols 2 to 5; opcodes of plain data, GLOBAL /
// STACK_GLOBAL, REDUCE, NEWOBJ, BUILD, memo). Errors (InvalidArgument)
// start with "<where>: " and give the pickle byte position: truncated or
// malformed pickles, opcodes outside that set (persistent ids, sets,
// extensions, out-of-band buffers; named), more than kMaxPickledValues.
// Memory is bounded by a small multiple of the pickle's size.
absl::StatusOr<std::unique_ptr<PickledObjects>> ReadObjectPickle(
    absl::string_view pickle, const std::string& where);

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_OBJECT_PICKLE_H_

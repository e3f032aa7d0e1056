#include "serialization/pickle_reader.h"

#include <ATen/ops/empty.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/escape.h"
#include "base/status.h"
#include "serialization/pickle_ops.h"

namespace strata::serialization {
namespace {

// A Python global (class or function) named in the pickle, e.g.
// "torch._utils._rebuild_tensor_v2", held on the stack as a capsule.
struct PyGlobal : public torch::CustomClassHolder {
  explicit PyGlobal(std::string name) : name(std::move(name)) {}
  std::string name;
};

c10::IValue MakeGlobal(std::string name) {
  return c10::IValue::make_capsule(
      c10::make_intrusive<PyGlobal>(std::move(name)));
}

const PyGlobal* AsGlobal(const c10::IValue& value) {
  if (!value.isCapsule()) return nullptr;
  return static_cast<const PyGlobal*>(value.toCapsule().get());
}

std::string Describe(const c10::IValue& value) {
  if (const PyGlobal* global = AsGlobal(value)) {
    return EscapeBytes(global->name);
  }
  return value.tagKind();
}

const std::map<std::string, at::ScalarType>& StorageTypes() {
  static const auto* const kTypes = new std::map<std::string, at::ScalarType>{
      {"torch.DoubleStorage", at::kDouble},
      {"torch.FloatStorage", at::kFloat},
      {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},
      {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},
      {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool},
      {"torch.ComplexFloatStorage", at::kComplexFloat},
      {"torch.ComplexDoubleStorage", at::kComplexDouble},
  };
  return *kTypes;
}

bool IsContainer(const c10::IValue& value) {
  return value.isList() || value.isGenericDict() || value.isTuple();
}

// The values a container holds (a dict's keys are never containers).
std::vector<c10::IValue> Children(const c10::IValue& container) {
  std::vector<c10::IValue> children;
  if (container.isList()) {
    children = container.toListRef().vec();
  } else if (container.isGenericDict()) {
    for (const auto& item : container.toGenericDict()) {
      children.push_back(item.value());
    }
  } else if (container.isTuple()) {
    children = container.toTupleRef().elements().vec();
  }
  return children;
}

// Interprets one pickle. Borrows the pickle's bytes and the loader.
//
// Nesting: IValue destruction recurses, so a value nested 100 000 deep
// overflows the stack when it dies. Every container the pickle builds is
// kept in `retained_` until the end, so none dies while the pickle is read
// (whatever is popped, overwritten or dropped on an error), and its
// nesting is estimated as it is built and filled (`nesting_`, exact unless
// a container is filled after being put in another), rejecting a pickle as
// soon as it goes past kMaxPickleNesting. At STOP the exact nesting of
// every container is computed without recursion (cycles are rejected). If
// that fails, or the pickle is rejected earlier, the containers are
// emptied one by one (Dismantle) before they are released.
class Unpickler {
 public:
  Unpickler(const std::string& where, absl::string_view pickle,
            const StorageLoader& load_storage)
      : decoder_(pickle, where), load_storage_(load_storage) {}

  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  ~Unpickler() {
    if (!verified_) Dismantle();
  }

  absl::StatusOr<c10::IValue> Run() {
    while (true) {
      PickleOp op;
      STRATA_RETURN_IF_ERROR(decoder_.Next(&op));
      if (op.code == '.') break;  // STOP
      // LibTorch throws on some values (e.g. torch.device("nonsense")).
      absl::Status stepped;
      const absl::Status thrown =
          StatusFromCall("LibTorch", [&] { stepped = Step(op); });
      if (!thrown.ok()) return Error(std::string(thrown.message()));
      STRATA_RETURN_IF_ERROR(stepped);
    }
    if (stack_.size() != 1 || AsGlobal(stack_.back()) != nullptr) {
      return Error(absl::StrCat("malformed pickle: ", stack_.size(),
                                " values left at STOP"));
    }
    STRATA_RETURN_IF_ERROR(VerifyNesting());
    verified_ = true;
    return stack_.back();
  }

 private:
  absl::Status Error(const std::string& message) const {
    return decoder_.Error(message);
  }

  absl::Status NestingError() const {
    return Error(absl::StrCat("containers nested deeper than ",
                              kMaxPickleNesting,
                              " levels (the limit, kMaxPickleNesting)"));
  }

  // Keeps `container` (new) alive until the end; see the class comment.
  c10::IValue Retain(c10::IValue container) {
    retained_.push_back(container);
    nesting_[container.internalToPointer()] = 1;
    return container;
  }

  // The estimated nesting of `value`: 0 for a scalar or a tensor.
  int NestingOf(const c10::IValue& value) const {
    if (!IsContainer(value)) return 0;
    auto it = nesting_.find(value.internalToPointer());
    return it == nesting_.end() ? 1 : it->second;
  }

  // Records that `container` now holds `item`.
  absl::Status Nest(const c10::IValue& container, const c10::IValue& item) {
    int& nesting = nesting_[container.internalToPointer()];
    nesting = std::max({nesting, 1, NestingOf(item) + 1});
    if (nesting > kMaxPickleNesting) return NestingError();
    return absl::OkStatus();
  }

  // The exact nesting of every container, computed with an explicit stack;
  // an error if one is deeper than kMaxPickleNesting or contains itself.
  absl::Status VerifyNesting() const {
    std::unordered_map<const void*, int> depth;  // -1 while being walked
    struct Frame {
      const void* self;
      std::vector<c10::IValue> children;
      size_t next = 0;
      int deepest = 0;
    };
    std::vector<Frame> path;
    for (const c10::IValue& root : retained_) {
      if (!depth.try_emplace(root.internalToPointer(), -1).second) continue;
      path.push_back({root.internalToPointer(), Children(root)});
      while (!path.empty()) {
        Frame& top = path.back();
        if (top.next == top.children.size()) {
          const int done = top.deepest + 1;
          if (done > kMaxPickleNesting) return NestingError();
          depth[top.self] = done;
          path.pop_back();
          if (!path.empty()) {
            path.back().deepest = std::max(path.back().deepest, done);
          }
          continue;
        }
        const c10::IValue& child = top.children[top.next++];
        if (!IsContainer(child)) continue;
        auto [it, fresh] = depth.try_emplace(child.internalToPointer(), -1);
        if (!fresh) {
          if (it->second < 0) {
            return Error("malformed pickle: a container contains itself");
          }
          top.deepest = std::max(top.deepest, it->second);
          continue;
        }
        if (path.size() >= static_cast<size_t>(kMaxPickleNesting)) {
          return NestingError();
        }
        const void* self = child.internalToPointer();
        path.push_back({self, Children(child)});  // invalidates `top`
      }
    }
    return absl::OkStatus();
  }

  // Empties every container, so that none is destroyed recursively.
  void Dismantle() {
    for (c10::IValue& container : retained_) {
      if (container.isList()) {
        container.toList().clear();
      } else if (container.isGenericDict()) {
        container.toGenericDict().clear();
      } else if (container.isTuple()) {
        const c10::intrusive_ptr<c10::ivalue::Tuple> tuple =
            container.toTuple();
        for (size_t i = 0; i < tuple->elements().size(); ++i) {
          tuple->unsafeSetElement(i, c10::IValue());
        }
      }
    }
  }

  absl::Status Pop(c10::IValue* value) {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) {
      return Error("malformed pickle: stack underflow");
    }
    *value = std::move(stack_.back());
    stack_.pop_back();
    return absl::OkStatus();
  }

  // Pops everything above the last mark.
  absl::Status PopMark(std::vector<c10::IValue>* items) {
    if (marks_.empty()) return Error("malformed pickle: no mark");
    const size_t start = marks_.back();
    marks_.pop_back();
    if (start > stack_.size()) return Error("malformed pickle: bad mark");
    items->assign(std::make_move_iterator(stack_.begin() + start),
                  std::make_move_iterator(stack_.end()));
    stack_.resize(start);
    return absl::OkStatus();
  }

  absl::Status Top(c10::IValue** value) {
    if (stack_.empty()) return Error("malformed pickle: stack underflow");
    *value = &stack_.back();
    return absl::OkStatus();
  }

  absl::Status Memo(uint64_t id) {
    if (stack_.empty()) return Error("malformed pickle: memo of nothing");
    memo_[id] = stack_.back();
    return absl::OkStatus();
  }

  absl::Status Recall(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) {
      return Error(absl::StrCat("malformed pickle: no memo entry ", id));
    }
    stack_.push_back(it->second);
    return absl::OkStatus();
  }

  absl::Status SetItems(c10::IValue& target, std::vector<c10::IValue>& items) {
    if (!target.isGenericDict()) {
      return Error(absl::StrCat("cannot set items of ", Describe(target)));
    }
    if (items.size() % 2 != 0) return Error("malformed pickle: odd SETITEMS");
    c10::impl::GenericDict dict = target.toGenericDict();
    for (size_t i = 0; i < items.size(); i += 2) {
      if (!items[i].isString() && !items[i].isInt() && !items[i].isBool() &&
          !items[i].isDouble()) {
        return Error(
            absl::StrCat("unsupported dict key of type ", Describe(items[i])));
      }
      STRATA_RETURN_IF_ERROR(Nest(target, items[i + 1]));
      dict.insert_or_assign(std::move(items[i]), std::move(items[i + 1]));
    }
    return absl::OkStatus();
  }

  absl::Status Append(c10::IValue& target, std::vector<c10::IValue>& items) {
    if (!target.isList()) {
      return Error(absl::StrCat("cannot append to ", Describe(target)));
    }
    c10::List<c10::IValue> list = target.toList();
    for (c10::IValue& item : items) {
      STRATA_RETURN_IF_ERROR(Nest(target, item));
      list.push_back(std::move(item));
    }
    return absl::OkStatus();
  }

  absl::Status PushTuple(std::vector<c10::IValue> items) {
    int deepest = 0;
    for (const c10::IValue& item : items) {
      deepest = std::max(deepest, NestingOf(item));
    }
    if (deepest + 1 > kMaxPickleNesting) return NestingError();
    c10::IValue tuple = Retain(c10::ivalue::Tuple::create(std::move(items)));
    nesting_[tuple.internalToPointer()] = deepest + 1;
    stack_.push_back(std::move(tuple));
    return absl::OkStatus();
  }

  static c10::IValue NewDict() {
    return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
  }

  absl::Status PushInt(int64_t value) {
    stack_.emplace_back(value);
    return absl::OkStatus();
  }

  // Executes one opcode: the interpreter's switch (one case per opcode).
  absl::Status Step(PickleOp& op);

  // ('storage', storage type, key, location, numel) -> a 1-D tensor viewing
  // the whole storage (shared by every tensor that names the same key).
  absl::Status LoadStorage(const c10::IValue& id, c10::IValue* out) {
    const std::vector<c10::IValue> fields =
        id.isTuple() ? id.toTupleRef().elements().vec()
                     : std::vector<c10::IValue>();
    if (fields.size() != 5 || !fields[0].isString() ||
        fields[0].toStringRef() != "storage" || !fields[2].isString() ||
        !fields[4].isInt()) {
      return Error("unsupported persistent id (expected a tensor storage)");
    }
    const PyGlobal* type = AsGlobal(fields[1]);
    auto dtype = type == nullptr ? StorageTypes().end()
                                 : StorageTypes().find(type->name);
    if (dtype == StorageTypes().end()) {
      return Error(
          absl::StrCat("unsupported storage type ", Describe(fields[1])));
    }
    const std::string& key = fields[2].toStringRef();
    if (auto it = storages_.find(key); it != storages_.end()) {
      *out = it->second;
      return absl::OkStatus();
    }
    const int64_t numel = fields[4].toInt();
    if (numel < 0) return Error("negative storage size");
    at::Tensor tensor;
    if (numel == 0) {
      tensor = at::empty({0}, at::TensorOptions().dtype(dtype->second));
    } else {
      absl::StatusOr<at::Tensor> loaded =
          load_storage_(key, dtype->second, numel);
      if (!loaded.ok()) {
        // The loader's code (DataLoss for a corrupted record) is kept.
        return absl::Status(
            loaded.status().code(),
            Error(std::string(loaded.status().message())).message());
      }
      tensor = *std::move(loaded);
      if (!tensor.defined() || tensor.dim() != 1 || tensor.numel() != numel ||
          tensor.scalar_type() != dtype->second) {
        return Error(absl::StrCat("storage '", EscapeBytes(key), "' of ", numel,
                                  " ", c10::toString(dtype->second),
                                  " elements was loaded as another tensor"));
      }
    }
    storages_.emplace(key, tensor);
    *out = tensor;
    return absl::OkStatus();
  }

  absl::Status IntTuple(const c10::IValue& value, const char* what,
                        std::vector<int64_t>* out) {
    if (!value.isTuple())
      return Error(absl::StrCat("tensor ", what, " is not a tuple"));
    out->clear();
    for (const c10::IValue& item : value.toTupleRef().elements()) {
      if (!item.isInt())
        return Error(absl::StrCat("tensor ", what, " is not integral"));
      out->push_back(item.toInt());
    }
    return absl::OkStatus();
  }

  // torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
  // requires_grad, backward_hooks[, metadata]).
  absl::Status RebuildTensor(const std::vector<c10::IValue>& args,
                             c10::IValue* out) {
    if (args.size() < 4 || !args[0].isTensor() || !args[1].isInt()) {
      return Error("malformed _rebuild_tensor_v2 arguments");
    }
    const at::Tensor storage = args[0].toTensor();
    const int64_t offset = args[1].toInt();
    std::vector<int64_t> sizes, strides;
    STRATA_RETURN_IF_ERROR(IntTuple(args[2], "size", &sizes));
    STRATA_RETURN_IF_ERROR(IntTuple(args[3], "stride", &strides));
    if (sizes.size() != strides.size()) {
      return Error("tensor size and stride have different lengths");
    }
    // The last element addressed must lie inside the storage.
    int64_t extent = offset;
    bool empty = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < 0 || strides[i] < 0)
        return Error("negative tensor size or stride");
      if (sizes[i] == 0) empty = true;
      int64_t step = 0;
      if (sizes[i] > 0 &&
          (__builtin_mul_overflow(sizes[i] - 1, strides[i], &step) ||
           __builtin_add_overflow(extent, step, &extent))) {
        return Error("tensor size and stride overflow");
      }
    }
    if (offset < 0 || (!empty && extent >= storage.numel())) {
      return Error(absl::StrCat("tensor of size ",
                                c10::str(at::IntArrayRef(sizes)), " at offset ",
                                offset, " does not fit its storage of ",
                                storage.numel(), " elements"));
    }
    *out = at::empty({0}, storage.options())
               .set_(storage.storage(), offset, sizes, strides);
    return absl::OkStatus();
  }

  absl::Status Call(const std::string& name,
                    const std::vector<c10::IValue>& args, c10::IValue* out) {
    if (name == "torch._utils._rebuild_tensor_v2") {
      return RebuildTensor(args, out);
    }
    if (name == "collections.OrderedDict") {
      c10::IValue dict = Retain(NewDict());
      if (!args.empty()) {
        if (args.size() != 1 || !args[0].isList()) {
          return Error("unsupported OrderedDict arguments");
        }
        std::vector<c10::IValue> items;
        for (const c10::IValue& pair : args[0].toListRef()) {
          if (!pair.isTuple() || pair.toTupleRef().elements().size() != 2) {
            return Error("unsupported OrderedDict arguments");
          }
          items.push_back(pair.toTupleRef().elements()[0]);
          items.push_back(pair.toTupleRef().elements()[1]);
        }
        STRATA_RETURN_IF_ERROR(SetItems(dict, items));
      }
      *out = std::move(dict);
      return absl::OkStatus();
    }
    if (name == "torch._utils._rebuild_parameter" ||
        name == "torch._utils._rebuild_parameter_with_state" ||
        name == "torch.jit._pickle.restore_type_tag" ||
        name == "torch.jit._pickle.build_intlist" ||
        name == "torch.jit._pickle.build_tensorlist" ||
        name == "torch.jit._pickle.build_doublelist" ||
        name == "torch.jit._pickle.build_boollist" || name == "torch.Size") {
      // The wrapped value is the first argument.
      if (args.empty()) return Error(absl::StrCat("no arguments to ", name));
      *out = args[0];
      return absl::OkStatus();
    }
    if (name == "torch.device") {
      if (args.empty() || !args[0].isString()) {
        return Error("malformed torch.device arguments");
      }
      std::string device = args[0].toStringRef();
      if (args.size() > 1 && args[1].isInt()) {
        device = absl::StrCat(device, ":", args[1].toInt());
      }
      *out = c10::Device(device);
      return absl::OkStatus();
    }
    return Error(absl::StrCat(
        "unsupported Python object '", EscapeBytes(name),
        "' (readable: tensors, dicts, lists, tuples, strings, numbers)"));
  }

  PickleDecoder decoder_;
  const StorageLoader& load_storage_;
  std::vector<c10::IValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, c10::IValue> memo_;
  std::unordered_map<std::string, c10::IValue> storages_;
  // Every container built, and its estimated nesting; see the class comment.
  std::vector<c10::IValue> retained_;
  std::unordered_map<const void*, int> nesting_;
  bool verified_ = false;
};

absl::Status Unpickler::Step(PickleOp& op) {
  const uint8_t opcode = op.code;
  switch (opcode) {
    case 0x80:  // PROTO
      if (op.integer < 2 || op.integer > 4) {
        return Error(absl::StrCat("unsupported pickle protocol ", op.integer));
      }
      return absl::OkStatus();
    case 0x95:  // FRAME: only a hint for buffering.
      return absl::OkStatus();
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case '0': {  // POP
      c10::IValue ignored;
      return Pop(&ignored);
    }
    case '1': {  // POP_MARK
      std::vector<c10::IValue> ignored;
      return PopMark(&ignored);
    }
    case '2': {  // DUP
      c10::IValue* top = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&top));
      stack_.push_back(*top);
      return absl::OkStatus();
    }
    case 'N':  // NONE
      stack_.emplace_back();
      return absl::OkStatus();
    case 0x88:  // NEWTRUE
      stack_.emplace_back(true);
      return absl::OkStatus();
    case 0x89:  // NEWFALSE
      stack_.emplace_back(false);
      return absl::OkStatus();
    case 'K':   // BININT1
    case 'M':   // BININT2
    case 'J':   // BININT
    case 0x8a:  // LONG1
      return PushInt(op.integer);
    case 'G':  // BINFLOAT
      stack_.emplace_back(op.real);
      return absl::OkStatus();
    case 'X':   // BINUNICODE
    case 0x8c:  // SHORT_BINUNICODE
    case 0x8d:  // BINUNICODE8
      stack_.emplace_back(std::move(op.text));
      return absl::OkStatus();
    case ')':  // EMPTY_TUPLE
      return PushTuple({});
    case 't': {  // TUPLE
      std::vector<c10::IValue> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      return PushTuple(std::move(items));
    }
    case 0x85:    // TUPLE1
    case 0x86:    // TUPLE2
    case 0x87: {  // TUPLE3
      std::vector<c10::IValue> items(opcode - 0x84);
      for (auto it = items.rbegin(); it != items.rend(); ++it) {
        STRATA_RETURN_IF_ERROR(Pop(&*it));
      }
      return PushTuple(std::move(items));
    }
    case ']':  // EMPTY_LIST
      stack_.push_back(Retain(c10::impl::GenericList(c10::AnyType::get())));
      return absl::OkStatus();
    case 'l': {  // LIST
      std::vector<c10::IValue> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      c10::IValue list = Retain(c10::impl::GenericList(c10::AnyType::get()));
      STRATA_RETURN_IF_ERROR(Append(list, items));
      stack_.push_back(std::move(list));
      return absl::OkStatus();
    }
    case 'a': {  // APPEND
      std::vector<c10::IValue> items(1);
      STRATA_RETURN_IF_ERROR(Pop(&items[0]));
      c10::IValue* list = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&list));
      return Append(*list, items);
    }
    case 'e': {  // APPENDS
      std::vector<c10::IValue> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      c10::IValue* list = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&list));
      return Append(*list, items);
    }
    case '}':  // EMPTY_DICT
      stack_.push_back(Retain(NewDict()));
      return absl::OkStatus();
    case 'd': {  // DICT
      std::vector<c10::IValue> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      c10::IValue dict = Retain(NewDict());
      STRATA_RETURN_IF_ERROR(SetItems(dict, items));
      stack_.push_back(std::move(dict));
      return absl::OkStatus();
    }
    case 's': {  // SETITEM
      std::vector<c10::IValue> items(2);
      STRATA_RETURN_IF_ERROR(Pop(&items[1]));
      STRATA_RETURN_IF_ERROR(Pop(&items[0]));
      c10::IValue* dict = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&dict));
      return SetItems(*dict, items);
    }
    case 'u': {  // SETITEMS
      std::vector<c10::IValue> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      c10::IValue* dict = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&dict));
      return SetItems(*dict, items);
    }
    case 'q':  // BINPUT
    case 'r':  // LONG_BINPUT
      return Memo(op.integer);
    case 0x94:  // MEMOIZE
      return Memo(memo_.size());
    case 'h':  // BINGET
    case 'j':  // LONG_BINGET
      return Recall(op.integer);
    case 'c':  // GLOBAL
      stack_.push_back(MakeGlobal(std::move(op.text)));
      return absl::OkStatus();
    case 0x93: {  // STACK_GLOBAL
      c10::IValue module, name;
      STRATA_RETURN_IF_ERROR(Pop(&name));
      STRATA_RETURN_IF_ERROR(Pop(&module));
      if (!module.isString() || !name.isString()) {
        return Error("malformed pickle: STACK_GLOBAL of non-strings");
      }
      stack_.push_back(MakeGlobal(
          absl::StrCat(module.toStringRef(), ".", name.toStringRef())));
      return absl::OkStatus();
    }
    case 'R':     // REDUCE
    case 0x81: {  // NEWOBJ
      c10::IValue callable, args;
      STRATA_RETURN_IF_ERROR(Pop(&args));
      STRATA_RETURN_IF_ERROR(Pop(&callable));
      const PyGlobal* global = AsGlobal(callable);
      if (global == nullptr || !args.isTuple()) {
        return Error(
            absl::StrCat("malformed pickle: call of ", Describe(callable)));
      }
      c10::IValue result;
      STRATA_RETURN_IF_ERROR(
          Call(global->name, args.toTupleRef().elements().vec(), &result));
      stack_.push_back(std::move(result));
      return absl::OkStatus();
    }
    case 'b': {  // BUILD
      c10::IValue state;
      STRATA_RETURN_IF_ERROR(Pop(&state));
      c10::IValue* object = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&object));
      // An OrderedDict's attributes (a state dict's `_metadata`).
      if (object->isGenericDict()) return absl::OkStatus();
      return Error(
          absl::StrCat("cannot restore the state of ", Describe(*object)));
    }
    case 'Q': {  // BINPERSID
      c10::IValue id;
      STRATA_RETURN_IF_ERROR(Pop(&id));
      c10::IValue storage;
      STRATA_RETURN_IF_ERROR(LoadStorage(id, &storage));
      stack_.push_back(std::move(storage));
      return absl::OkStatus();
    }
    default:
      return Error(absl::StrFormat(
          "unsupported pickle opcode 0x%02x (not written by torch.save of "
          "tensors, dicts, lists and numbers)",
          opcode));
  }
}

}  // namespace

absl::StatusOr<c10::IValue> ReadPickle(absl::string_view pickle,
                                       const std::string& where,
                                       const StorageLoader& load_storage) {
  return Unpickler(where, pickle, load_storage).Run();
}

}  // namespace strata::serialization

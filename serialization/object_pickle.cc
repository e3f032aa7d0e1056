#include "serialization/object_pickle.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/escape.h"
#include "base/status.h"

namespace strata::serialization {

const PyValue* PyValue::Get(absl::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i]->kind == Kind::kStr && items[i]->text == key) {
      return items[i + 1];
    }
  }
  return nullptr;
}

std::string PyValue::Describe() const {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kGlobal:
      return absl::StrCat("global ", EscapeBytes(text, 80));
    case Kind::kObject:
      return absl::StrCat("object ", EscapeBytes(text, 80));
  }
  return "?";
}

// Interprets one pickle into a PickledObjects. Borrows the pickle's bytes.
class ObjectUnpickler {
 public:
  ObjectUnpickler(absl::string_view pickle, const std::string& where)
      : where_(where), data_(pickle.data()), size_(pickle.size()) {}

  absl::StatusOr<std::unique_ptr<PickledObjects>> Run() {
    result_ = std::make_unique<PickledObjects>();
    while (true) {
      opcode_ = -1;
      uint8_t opcode = 0;
      STRATA_RETURN_IF_ERROR(Read(&opcode));
      opcode_ = opcode;
      if (opcode == '.') break;  // STOP
      STRATA_RETURN_IF_ERROR(Step(opcode));
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      return Error(absl::StrCat("malformed pickle: ", stack_.size(),
                                " values and ", marks_.size(),
                                " marks left at STOP"));
    }
    result_->root_ = stack_.back();
    return std::move(result_);
  }

 private:
  using Kind = PyValue::Kind;

  absl::Status Error(const std::string& message) const {
    const std::string opcode =
        opcode_ < 0 ? "" : absl::StrFormat("opcode 0x%02x, ", opcode_);
    return absl::InvalidArgumentError(absl::StrCat(
        where_, ": ", message, " (", opcode, "at pickle byte ", pos_, ")"));
  }

  absl::StatusOr<PyValue*> New(Kind kind) {
    if (result_->nodes_.size() >= kMaxPickledValues) {
      return Error(absl::StrCat("more than ", kMaxPickledValues,
                                " values (the limit, kMaxPickledValues)"));
    }
    result_->nodes_.push_back(std::make_unique<PyValue>());
    result_->nodes_.back()->kind = kind;
    return result_->nodes_.back().get();
  }

  absl::Status Push(Kind kind) {
    STRATA_ASSIGN_OR_RETURN(PyValue * value, New(kind));
    stack_.push_back(value);
    return absl::OkStatus();
  }

  absl::Status PushInt(int64_t integer) {
    STRATA_ASSIGN_OR_RETURN(PyValue * value, New(Kind::kInt));
    value->integer = integer;
    stack_.push_back(value);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Read(T* value) {
    if (size_ - pos_ < sizeof(T)) return Error("truncated pickle");
    std::memcpy(value, data_ + pos_, sizeof(T));  // little-endian host
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadBytes(uint64_t n, std::string* out) {
    if (size_ - pos_ < n) return Error("truncated pickle");
    out->assign(data_ + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status ReadLine(std::string* out) {
    const void* end = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (end == nullptr) return Error("truncated pickle");
    const size_t n = static_cast<const char*>(end) - (data_ + pos_);
    out->assign(data_ + pos_, n);
    pos_ += n + 1;
    return absl::OkStatus();
  }

  absl::Status PushText(Kind kind, uint64_t n) {
    STRATA_ASSIGN_OR_RETURN(PyValue * value, New(kind));
    STRATA_RETURN_IF_ERROR(ReadBytes(n, &value->text));
    stack_.push_back(value);
    return absl::OkStatus();
  }

  absl::Status Pop(PyValue** value) {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) {
      return Error("malformed pickle: stack underflow");
    }
    *value = stack_.back();
    stack_.pop_back();
    return absl::OkStatus();
  }

  absl::Status PopMark(std::vector<const PyValue*>* items) {
    if (marks_.empty()) return Error("malformed pickle: no mark");
    const size_t start = marks_.back();
    marks_.pop_back();
    if (start > stack_.size()) return Error("malformed pickle: bad mark");
    items->assign(stack_.begin() + start, stack_.end());
    stack_.resize(start);
    return absl::OkStatus();
  }

  absl::Status Top(PyValue** value) {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) {
      return Error("malformed pickle: stack underflow");
    }
    *value = stack_.back();
    return absl::OkStatus();
  }

  absl::Status PushTuple(std::vector<const PyValue*> items) {
    STRATA_ASSIGN_OR_RETURN(PyValue * tuple, New(Kind::kTuple));
    tuple->items = std::move(items);
    stack_.push_back(tuple);
    return absl::OkStatus();
  }

  absl::Status AddItems(PyValue* target, std::vector<const PyValue*>& items,
                        Kind kind) {
    if (target->kind != kind) {
      return Error(absl::StrCat(
          "cannot ", kind == Kind::kDict ? "set items of " : "append to ",
          target->Describe()));
    }
    if (kind == Kind::kDict && items.size() % 2 != 0) {
      return Error("malformed pickle: odd number of dict items");
    }
    target->items.insert(target->items.end(), items.begin(), items.end());
    return absl::OkStatus();
  }

  absl::Status Memo(uint64_t id) {
    if (stack_.empty()) return Error("malformed pickle: memo of nothing");
    if (memo_.size() >= kMaxPickledValues && memo_.count(id) == 0) {
      return Error("too many memo entries");
    }
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

  // Executes one opcode: the interpreter's switch (one case per opcode).
  absl::Status Step(uint8_t opcode);

  const std::string& where_;
  const char* const data_;
  const size_t size_;
  size_t pos_ = 0;
  int opcode_ = -1;
  std::unique_ptr<PickledObjects> result_;
  std::vector<PyValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyValue*> memo_;
};

absl::Status ObjectUnpickler::Step(uint8_t opcode) {
  switch (opcode) {
    case 0x80: {  // PROTO
      uint8_t protocol = 0;
      STRATA_RETURN_IF_ERROR(Read(&protocol));
      if (protocol < 2 || protocol > 5) {
        return Error(absl::StrCat("unsupported pickle protocol ",
                                  static_cast<int>(protocol)));
      }
      return absl::OkStatus();
    }
    case 0x95: {  // FRAME
      uint64_t frame_size = 0;
      return Read(&frame_size);
    }
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case '0': {  // POP
      PyValue* ignored = nullptr;
      return Pop(&ignored);
    }
    case '1': {  // POP_MARK
      std::vector<const PyValue*> ignored;
      return PopMark(&ignored);
    }
    case '2': {  // DUP
      PyValue* top = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&top));
      stack_.push_back(top);
      return absl::OkStatus();
    }
    case 'N':  // NONE
      return Push(Kind::kNone);
    case 0x88:    // NEWTRUE
    case 0x89: {  // NEWFALSE
      STRATA_ASSIGN_OR_RETURN(PyValue * value, New(Kind::kBool));
      value->boolean = opcode == 0x88;
      stack_.push_back(value);
      return absl::OkStatus();
    }
    case 'K': {  // BININT1
      uint8_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      return PushInt(value);
    }
    case 'M': {  // BININT2
      uint16_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      return PushInt(value);
    }
    case 'J': {  // BININT
      int32_t value = 0;
      STRATA_RETURN_IF_ERROR(Read(&value));
      return PushInt(value);
    }
    case 0x8a: {  // LONG1: little-endian two's complement
      uint8_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      if (n > 8) return Error("integer wider than 64 bits");
      std::string bytes;
      STRATA_RETURN_IF_ERROR(ReadBytes(n, &bytes));
      uint64_t value = 0;
      for (int i = n - 1; i >= 0; --i) {
        value = (value << 8) | static_cast<uint8_t>(bytes[i]);
      }
      if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) {
        value |= ~uint64_t{0} << (8 * n);  // sign-extend
      }
      return PushInt(static_cast<int64_t>(value));
    }
    case 'G': {  // BINFLOAT: big-endian double
      std::string bytes;
      STRATA_RETURN_IF_ERROR(ReadBytes(8, &bytes));
      uint64_t bits = 0;
      for (char c : bytes) bits = (bits << 8) | static_cast<uint8_t>(c);
      STRATA_ASSIGN_OR_RETURN(PyValue * value, New(Kind::kFloat));
      std::memcpy(&value->real, &bits, sizeof(value->real));
      stack_.push_back(value);
      return absl::OkStatus();
    }
    case 'X': {  // BINUNICODE
      uint32_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return PushText(Kind::kStr, n);
    }
    case 0x8c: {  // SHORT_BINUNICODE
      uint8_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return PushText(Kind::kStr, n);
    }
    case 0x8d: {  // BINUNICODE8
      uint64_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return PushText(Kind::kStr, n);
    }
    case 'C': {  // SHORT_BINBYTES
      uint8_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return PushText(Kind::kBytes, n);
    }
    case 'B': {  // BINBYTES
      uint32_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return PushText(Kind::kBytes, n);
    }
    case 0x8e: {  // BINBYTES8
      uint64_t n = 0;
      STRATA_RETURN_IF_ERROR(Read(&n));
      return PushText(Kind::kBytes, n);
    }
    case ')':  // EMPTY_TUPLE
      return PushTuple({});
    case 't': {  // TUPLE
      std::vector<const PyValue*> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      return PushTuple(std::move(items));
    }
    case 0x85:    // TUPLE1
    case 0x86:    // TUPLE2
    case 0x87: {  // TUPLE3
      std::vector<const PyValue*> items(opcode - 0x84);
      for (auto it = items.rbegin(); it != items.rend(); ++it) {
        PyValue* item = nullptr;
        STRATA_RETURN_IF_ERROR(Pop(&item));
        *it = item;
      }
      return PushTuple(std::move(items));
    }
    case ']':  // EMPTY_LIST
      return Push(Kind::kList);
    case '}':  // EMPTY_DICT
      return Push(Kind::kDict);
    case 'l':    // LIST
    case 'd': {  // DICT
      std::vector<const PyValue*> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      const Kind kind = opcode == 'l' ? Kind::kList : Kind::kDict;
      STRATA_ASSIGN_OR_RETURN(PyValue * container, New(kind));
      STRATA_RETURN_IF_ERROR(AddItems(container, items, kind));
      stack_.push_back(container);
      return absl::OkStatus();
    }
    case 'a':    // APPEND
    case 's': {  // SETITEM
      const size_t n = opcode == 'a' ? 1 : 2;
      std::vector<const PyValue*> items(n);
      for (auto it = items.rbegin(); it != items.rend(); ++it) {
        PyValue* item = nullptr;
        STRATA_RETURN_IF_ERROR(Pop(&item));
        *it = item;
      }
      PyValue* target = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&target));
      return AddItems(target, items, opcode == 'a' ? Kind::kList : Kind::kDict);
    }
    case 'e':    // APPENDS
    case 'u': {  // SETITEMS
      std::vector<const PyValue*> items;
      STRATA_RETURN_IF_ERROR(PopMark(&items));
      PyValue* target = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&target));
      return AddItems(target, items, opcode == 'e' ? Kind::kList : Kind::kDict);
    }
    case 'q': {  // BINPUT
      uint8_t id = 0;
      STRATA_RETURN_IF_ERROR(Read(&id));
      return Memo(id);
    }
    case 'r': {  // LONG_BINPUT
      uint32_t id = 0;
      STRATA_RETURN_IF_ERROR(Read(&id));
      return Memo(id);
    }
    case 0x94:  // MEMOIZE
      return Memo(memo_.size());
    case 'h': {  // BINGET
      uint8_t id = 0;
      STRATA_RETURN_IF_ERROR(Read(&id));
      return Recall(id);
    }
    case 'j': {  // LONG_BINGET
      uint32_t id = 0;
      STRATA_RETURN_IF_ERROR(Read(&id));
      return Recall(id);
    }
    case 'c': {  // GLOBAL
      std::string module, name;
      STRATA_RETURN_IF_ERROR(ReadLine(&module));
      STRATA_RETURN_IF_ERROR(ReadLine(&name));
      if (module == "__builtin__") module = "builtins";
      STRATA_ASSIGN_OR_RETURN(PyValue * global, New(Kind::kGlobal));
      global->text = absl::StrCat(module, ".", name);
      stack_.push_back(global);
      return absl::OkStatus();
    }
    case 0x93: {  // STACK_GLOBAL
      PyValue *module = nullptr, *name = nullptr;
      STRATA_RETURN_IF_ERROR(Pop(&name));
      STRATA_RETURN_IF_ERROR(Pop(&module));
      if (module->kind != Kind::kStr || name->kind != Kind::kStr) {
        return Error("malformed pickle: STACK_GLOBAL of non-strings");
      }
      STRATA_ASSIGN_OR_RETURN(PyValue * global, New(Kind::kGlobal));
      global->text = absl::StrCat(module->text, ".", name->text);
      stack_.push_back(global);
      return absl::OkStatus();
    }
    case 'R':     // REDUCE
    case 0x81: {  // NEWOBJ
      PyValue *callable = nullptr, *args = nullptr;
      STRATA_RETURN_IF_ERROR(Pop(&args));
      STRATA_RETURN_IF_ERROR(Pop(&callable));
      if (callable->kind != Kind::kGlobal || args->kind != Kind::kTuple) {
        return Error(absl::StrCat("malformed pickle: call of ",
                                  callable->Describe(), " with ",
                                  args->Describe()));
      }
      STRATA_ASSIGN_OR_RETURN(PyValue * object, New(Kind::kObject));
      object->text = callable->text;
      object->args = args;
      stack_.push_back(object);
      return absl::OkStatus();
    }
    case 'b': {  // BUILD
      PyValue* state = nullptr;
      STRATA_RETURN_IF_ERROR(Pop(&state));
      PyValue* object = nullptr;
      STRATA_RETURN_IF_ERROR(Top(&object));
      if (object->kind != Kind::kObject || object->state != nullptr) {
        return Error(
            absl::StrCat("cannot restore the state of ", object->Describe(),
                         object->kind == Kind::kObject ? " twice" : ""));
      }
      object->state = state;
      return absl::OkStatus();
    }
    default:
      return Error(absl::StrFormat(
          "unsupported pickle opcode 0x%02x (readable: plain data, globals, "
          "objects built with REDUCE, NEWOBJ and BUILD)",
          opcode));
  }
}

absl::StatusOr<std::unique_ptr<PickledObjects>> ReadObjectPickle(
    absl::string_view pickle, const std::string& where) {
  return ObjectUnpickler(pickle, where).Run();
}

}  // namespace strata::serialization

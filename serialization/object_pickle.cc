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
#include "serialization/pickle_ops.h"

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
      : decoder_(pickle, where) {}

  absl::StatusOr<std::unique_ptr<PickledObjects>> Run() {
    result_ = std::make_unique<PickledObjects>();
    while (true) {
      PickleOp op;
      STRATA_RETURN_IF_ERROR(decoder_.Next(&op));
      if (op.code == '.') break;  // STOP
      STRATA_RETURN_IF_ERROR(Step(op));
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
    return decoder_.Error(message);
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

  absl::Status PushText(Kind kind, std::string text) {
    STRATA_ASSIGN_OR_RETURN(PyValue * value, New(kind));
    value->text = std::move(text);
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
  absl::Status Step(PickleOp& op);

  PickleDecoder decoder_;
  std::unique_ptr<PickledObjects> result_;
  std::vector<PyValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyValue*> memo_;
};

absl::Status ObjectUnpickler::Step(PickleOp& op) {
  const uint8_t opcode = op.code;
  switch (opcode) {
    case 0x80:  // PROTO
      if (op.integer < 2 || op.integer > 5) {
        return Error(absl::StrCat("unsupported pickle protocol ", op.integer));
      }
      return absl::OkStatus();
    case 0x95:  // FRAME: only a hint for buffering.
      return absl::OkStatus();
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
    case 'K':   // BININT1
    case 'M':   // BININT2
    case 'J':   // BININT
    case 0x8a:  // LONG1
      return PushInt(op.integer);
    case 'G': {  // BINFLOAT
      STRATA_ASSIGN_OR_RETURN(PyValue * value, New(Kind::kFloat));
      value->real = op.real;
      stack_.push_back(value);
      return absl::OkStatus();
    }
    case 'X':   // BINUNICODE
    case 0x8c:  // SHORT_BINUNICODE
    case 0x8d:  // BINUNICODE8
      return PushText(Kind::kStr, std::move(op.text));
    case 'C':   // SHORT_BINBYTES
    case 'B':   // BINBYTES
    case 0x8e:  // BINBYTES8
      return PushText(Kind::kBytes, std::move(op.text));
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
    case 'q':  // BINPUT
    case 'r':  // LONG_BINPUT
      return Memo(op.integer);
    case 0x94:  // MEMOIZE
      return Memo(memo_.size());
    case 'h':  // BINGET
    case 'j':  // LONG_BINGET
      return Recall(op.integer);
    case 'c': {  // GLOBAL
      STRATA_ASSIGN_OR_RETURN(PyValue * global, New(Kind::kGlobal));
      global->text = std::move(op.text);
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

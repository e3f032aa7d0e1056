// The byte level of writing a pickle (protocol 2): the opcodes of plain
// data plus class references and object construction (GLOBAL, NEWOBJ,
// REDUCE, BUILD), which Python's pickle.load turns into objects of the
// classes named. For pickles of Python objects that are not IValues, e.g.
// the `.metadata` of a torch.distributed.checkpoint directory (a
// dataclass tree); torch.save's data is pickle_writer.h's. The reverse of
// pickle_ops.h; object_pickle.h reads what this writes. No LibTorch.
#ifndef STRATA_SERIALIZATION_PICKLE_ENCODER_H_
#define STRATA_SERIALIZATION_PICKLE_ENCODER_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace strata::serialization {

// Appends opcodes to a pickle, which the caller keeps balanced: each method
// is one opcode on the unpickler's stack (as its comment says), and the
// result is valid when the stack holds exactly one value at Finish. No
// memo: a value referred to twice is written twice. Not thread-safe.
//
//   PickleEncoder e;                 // Point(x=1) where
//   e.Global("geometry", "Point");   //   Point is a class:
//   e.EmptyTuple(); e.NewObj();      // cls.__new__(cls)
//   e.EmptyDict(); e.Mark();
//   e.String("x"); e.Int(1);
//   e.SetItems(); e.Build();         // obj.__dict__.update({"x": 1})
//   std::string pickle = e.Finish();
class PickleEncoder {
 public:
  PickleEncoder();  // Writes PROTO 2.

  // Pushes the object `name` of module `module` (a class or function).
  void Global(absl::string_view module, absl::string_view name);
  void None();
  void Bool(bool value);
  void Int(int64_t value);
  void Float(double value);
  // A str: `utf8` must be valid UTF-8 (Python's unpickler refuses others).
  void String(absl::string_view utf8);
  // Pushes a mark, which Tuple, SetItems and Appends consume.
  void Mark();
  // Everything above the last mark becomes a tuple.
  void Tuple();
  void EmptyTuple();
  void EmptyList();
  void EmptyDict();
  // Pops key, value pairs down to the last mark into the dict below it.
  void SetItems();
  // Pops the values down to the last mark onto the list below it.
  void Appends();
  // Pops args (a tuple) and cls: pushes cls.__new__(cls, *args).
  void NewObj();
  // Pops args (a tuple) and a callable: pushes callable(*args).
  void Reduce();
  // Pops a state: the object below gets it (its __setstate__, else its
  // __dict__ updated from a dict).
  void Build();

  // Writes STOP and returns the pickle; the encoder is then spent.
  std::string Finish();

 private:
  std::string out_;
};

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_PICKLE_ENCODER_H_

#include "serialization/pickle_writer.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/jit_type.h>
#include <glog/logging.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <vector>

#include "base/status.h"

namespace strata::serialization {
namespace {

// `value` with every list made a generic one (List[Any]) and every dict's
// values Any, recursively; tensors and scalars are shared, not copied.
//
// LibTorch's pickler writes a typed list (List[int], List[float],
// List[bool], List[Tensor]) as a call to torch.jit._pickle.build_intlist (and
// so on), which PyTorch's weights-only unpickler (torch.load's default from
// 2.6) refuses; a generic list is a plain pickle list.
c10::IValue PlainContainers(const c10::IValue& value) {
  if (value.isList()) {
    c10::impl::GenericList list(c10::AnyType::get());
    const auto& items = value.toListRef();
    list.reserve(items.size());
    for (const c10::IValue& item : items) list.push_back(PlainContainers(item));
    return list;
  }
  if (value.isGenericDict()) {
    const c10::impl::GenericDict dict = value.toGenericDict();
    c10::impl::GenericDict plain(dict.keyType(), c10::AnyType::get());
    plain.reserve(dict.size());
    for (const auto& entry : dict) {
      plain.insert(entry.key(), PlainContainers(entry.value()));
    }
    return plain;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const c10::IValue& e : value.toTupleRef().elements()) {
      elements.push_back(PlainContainers(e));
    }
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  return value;
}

}  // namespace

absl::StatusOr<Pickled> Pickle(const c10::IValue& value) {
  Pickled out;
  STRATA_RETURN_IF_ERROR(StatusFromCall("pickling", [&] {
    const c10::IValue plain = PlainContainers(value);
    // No type tags (torch.jit._pickle.restore_type_tag around every list and
    // dict): like typed lists, PyTorch's weights-only unpickler refuses them.
    torch::jit::Pickler pickler(
        [&](const char* bytes, size_t n) { out.data.append(bytes, n); },
        /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
        /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
        /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(plain);
    pickler.stop();
    out.tensors = pickler.tensorData();
  }));
  return out;
}

absl::string_view StorageBytes(const at::Tensor& tensor) {
  CHECK(tensor.device().is_cpu()) << "StorageBytes of a non-CPU tensor";
  const c10::Storage& storage = tensor.storage();
  return absl::string_view(static_cast<const char*>(storage.data()),
                           storage.nbytes());
}

}  // namespace strata::serialization

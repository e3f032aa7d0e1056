#include "serialization/pickle_writer.h"

#include <glog/logging.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include "base/status.h"

namespace strata::serialization {

absl::StatusOr<Pickled> Pickle(const c10::IValue& value) {
  Pickled out;
  STRATA_RETURN_IF_ERROR(StatusFromCall("pickling", [&] {
    torch::jit::Pickler pickler(
        [&](const char* bytes, size_t n) { out.data.append(bytes, n); });
    pickler.protocol();
    pickler.pushIValue(value);
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

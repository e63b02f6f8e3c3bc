// streamrt._streamrt_torch: the TorchRunner of torch_runner.hpp, on torch's C++ API (Debian's
// libtorch-dev). A prepared op is the operator's dispatcher handle with its arguments as a boxed
// stack: a worker calls it with no Python at all. Built only where torch's headers are found;
// without it streamrt.torch's workers call the op through Python (bind_torch.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "torch_runner.hpp"

namespace py = pybind11;

namespace streamrt::python {
namespace {

struct Prepared {
  c10::OperatorHandle op;
  torch::jit::Stack stack;
  c10::DispatchKeySet excluded;
};

// OpOverload object -> its operator, found once. The objects are kept (torch caches them for the
// life of the process anyway). Used with the GIL held, which also guards the map.
std::unordered_map<PyObject*, c10::OperatorHandle>& operators() {
  static auto* map = new std::unordered_map<PyObject*, c10::OperatorHandle>;  // leaked at exit
  return *map;
}

const c10::OperatorHandle& operator_of(PyObject* op) {
  auto& map = operators();
  auto it = map.find(op);
  if (it != map.end()) return it->second;
  py::handle schema = py::handle(op).attr("_schema");
  const std::string name = py::str(schema.attr("name"));
  const std::string overload = py::str(schema.attr("overload_name"));
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  Py_INCREF(op);
  return map.emplace(op, handle).first->second;
}

void* prepare(PyObject* op, PyObject* args, PyObject* kwargs) {
  try {
    const c10::OperatorHandle& handle = operator_of(op);
    py::kwargs kw = kwargs != nullptr ? py::reinterpret_borrow<py::kwargs>(kwargs) : py::kwargs();
    // A dispatch mode receives wrapped numbers (`x + 2`'s 2) as Python numbers where the schema
    // has a Tensor; torch's own op call accepts them back the same way.
    torch::jit::ToIValueAllowNumbersAsTensors numbers(true);
    auto stack = torch::jit::createStackForSchema(
        handle.schema(), torch::jit::tuple_slice(py::reinterpret_borrow<py::tuple>(args)),
        std::move(kw), c10::nullopt);
    return new Prepared{handle, std::move(stack), c10::impl::tls_local_dispatch_key_set().excluded_};
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// The Python exception eager torch raises for each of its C++ exceptions.
template <class E>
bool as(const std::exception& e, const char* name, std::string* type, std::string* message) {
  const auto* x = dynamic_cast<const E*>(&e);
  if (x == nullptr) return false;
  *type = name;
  *message = x->what_without_backtrace();
  return true;
}

bool run(void* prepared, std::string* type, std::string* message) {
  auto* p = static_cast<Prepared*>(prepared);
  try {
    c10::impl::ExcludeDispatchKeyGuard guard(p->excluded);
    p->op.callBoxed(&p->stack);
    return true;
  } catch (const std::bad_alloc&) {
    *type = "MemoryError";
    *message = "out of memory";
  } catch (const std::exception& e) {
    if (!as<c10::IndexError>(e, "IndexError", type, message) &&
        !as<c10::ValueError>(e, "ValueError", type, message) &&
        !as<c10::TypeError>(e, "TypeError", type, message) &&
        !as<c10::NotImplementedError>(e, "NotImplementedError", type, message) &&
        !as<c10::Error>(e, "RuntimeError", type, message)) {
      *type = "RuntimeError";
      *message = e.what();
    }
  }
  return false;
}

void destroy(void* prepared) noexcept { delete static_cast<Prepared*>(prepared); }

TorchRunner g_runner{kTorchRunnerAbi, &prepare, &run, &destroy};

}  // namespace
}  // namespace streamrt::python

PYBIND11_MODULE(_streamrt_torch, m) {
  m.doc() = "streamrt.torch's kernel runner on torch's C++ API (torch_runner.hpp)";
  m.attr("runner") = py::capsule(&streamrt::python::g_runner, streamrt::python::kTorchRunnerCapsule);
  m.attr("abi") = streamrt::python::kTorchRunnerAbi;
}

// The caching allocator's counters and controls (memory_stats, empty_cache, ...), as torch.cuda
// has them.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>

#include "args.hpp"
#include "bindings.hpp"
#include "streamrt/memory.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

void bind_memory(py::module_& m) {
  m.def(
      "memory_stats",
      [](py::object device) {
        const MemoryStats s = memory_stats(to_device(device, "memory_stats(device=...)"));
        py::dict d;
        d["bytes_in_use"] = s.bytes_in_use;
        d["bytes_cached"] = s.bytes_cached;
        d["peak_bytes_in_use"] = s.peak_bytes_in_use;
        d["allocations"] = s.allocations;
        d["cache_hits"] = s.cache_hits;
        d["releases"] = s.releases;
        d["cache_limit"] = s.cache_limit;
        return d;
      },
      "device"_a = py::none(),
      "The caching allocator's counters as a dict: bytes_in_use, bytes_cached, "
      "peak_bytes_in_use, allocations, cache_hits, releases, cache_limit.");
  m.def(
      "empty_cache", [](py::object device) { empty_cache(to_device(device, "empty_cache")); },
      "device"_a = py::none(),
      "Returns cached blocks that no queued work may still use to the OS.");
  m.def(
      "reset_peak_memory_stats",
      [](py::object device) {
        reset_peak_memory_stats(to_device(device, "reset_peak_memory_stats"));
      },
      "device"_a = py::none(), "Sets peak_bytes_in_use to the current bytes_in_use.");
  m.def(
      "set_memory_cache_limit",
      [](py::object bytes_arg, py::object device) {
        const auto bytes = int_arg(bytes_arg, "set_memory_cache_limit", "bytes", 0,
                                   std::numeric_limits<std::int64_t>::max());
        set_memory_cache_limit(static_cast<std::size_t>(bytes),
                               to_device(device, "set_memory_cache_limit"));
      },
      "bytes"_a, "device"_a = py::none(),
      "Caps the allocator's cached bytes (default 1 GiB or STREAMRT_CACHE_LIMIT); blocks past it "
      "are returned to the OS.");
}

}  // namespace streamrt::python

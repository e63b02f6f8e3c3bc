#pragma once
// The op submission path with automatic dependency tracking (tracking.cpp): kernels go to a
// stream after waits for the conflicting accesses on other streams, and their accesses are
// recorded on the storages they use.
#include <initializer_list>
#include <memory>
#include <vector>

#include "storage.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

// Enqueues `kernel` on the current stream of `device` under `label` (a literal), after making
// that stream wait for the tracked writers of `reads` and the tracked writers and readers of
// `writes` on other streams; then records the accesses. Returns at once. Returns the stream used.
// The memory of `reads` and `writes` stays valid until the kernel has run, so the kernel may
// capture raw data pointers instead of references (a reference taken on the launching thread and
// dropped on the worker moves the count's cache line between them, and leaves the free of the
// last tensor to the worker): tracked accesses and the allocator's stream-ordered free cover it;
// where they do not (tracking off, a stream capture, memory not from the allocator), submit keeps
// references to the storages with the kernel.
Stream submit(const char* label, Device device, std::initializer_list<const Tensor*> reads,
              std::initializer_list<const Tensor*> writes, detail::Work kernel);
// As submit, on `stream` (the current stream the caller already looked up).
void submit(Stream& stream, const char* label, std::initializer_list<const Tensor*> reads,
            std::initializer_list<const Tensor*> writes, detail::Work kernel);

// Test switch (tests/internal): off, submit never keeps references with a kernel, so the tests
// can show what those references prevent. Set it only while no op is being submitted.
void set_kernel_references_for_testing(bool on) noexcept;

// Positions a host reader (`for_write` false) or writer must wait for before touching `storage`.
std::vector<std::shared_ptr<impl::EventImpl>> pending_accesses(Storage& storage, bool for_write);

}  // namespace streamrt::ops

#pragma once
// Tensor storage and the op submission path with automatic dependency tracking.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/spin_mutex.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::detail {

// A queued access to a storage: the stream (by id: ids are never reused on a device, so a dead
// stream cannot be confused with a new one) and the position right after the accessing op.
struct Access {
  std::uint64_t stream_id = 0;
  std::shared_ptr<impl::EventImpl> position;
};

// Memory of one or more tensors, plus what the tracker knows about queued accesses to it.
class Storage {
 public:
  // Owns `data` (freed with std::free) unless `deleter` is given; then calls deleter(data).
  Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> deleter,
          bool owned) noexcept;
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // `nbytes` (64-byte aligned) from the stream-ordered caching allocator (allocator.hpp), for work
  // on the current stream of `device`; not zero-filled. Throws Error when memory runs out.
  static std::shared_ptr<Storage> allocate(std::size_t nbytes, Device device);
  // As allocate(nbytes, stream.device()), for work on `stream` (an op that already looked up the
  // current stream passes it instead of looking it up again).
  static std::shared_ptr<Storage> allocate(std::size_t nbytes, const Stream& stream);

  void* data() const noexcept { return data_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }
  // True for caching-allocator memory, which is freed in stream order: it stays valid for work
  // queued before the last reference went away (allocator.hpp), so kernels may hold raw pointers.
  bool stream_ordered() const noexcept { return capacity_ > 0; }

  // Taken by every op that uses the storage (three per `a + b`): an inlined lock.
  core::SpinMutex mutex;
  Access last_write;          // guarded by mutex; position null = no tracked write pending
  std::vector<Access> reads;  // guarded by mutex; one entry per stream, since last_write
  // Set by share_tracking before the storage is used, then constant: the storage whose tracking
  // (mutex, last_write, reads) this one uses instead of its own; never itself sharing.
  std::shared_ptr<Storage> tracked_by;
  // The storage whose tracking fields record accesses to this one's memory.
  Storage& tracking() noexcept { return tracked_by ? *tracked_by : *this; }

 private:
  void* data_;
  std::size_t nbytes_;
  Device device_;
  std::function<void(void*)> deleter_;
  bool owned_;
  // Set for caching-allocator blocks: the size-class bytes and the stream that allocated it.
  std::size_t capacity_ = 0;
  std::shared_ptr<impl::StreamImpl> alloc_stream_;
};

// The library's access to Tensor internals.
struct TensorAccess {
  // A contiguous tensor at offset 0 of `storage`; `numel` is shape_numel(shape) (checked by the
  // caller).
  static Tensor make(std::shared_ptr<Storage> storage, Shape shape, std::int64_t numel,
                     DType dtype);
  // A view: `strides` and `offset` in elements, within the storage (checked by the caller).
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                          std::int64_t offset, DType dtype) {
    Tensor t;
    t.numel_ = shape_numel(shape);
    t.storage_ = std::move(storage);
    t.shape_ = std::move(shape);
    t.strides_ = std::move(strides);
    t.offset_ = offset;
    t.dtype_ = dtype;
    return t;
  }
  static const std::shared_ptr<Storage>& storage(const Tensor& t) noexcept { return t.storage_; }
};

}  // namespace streamrt::detail

namespace streamrt::ops {

using detail::Storage;

// Throws Error naming the op when `t` is undefined.
void check_defined(const Tensor& t, const char* op);
// Throws Error for devices without tensor support (CPU only here) or a bad index.
void check_device(const Device& device);
// A new tensor with fresh storage (no work queued). Validates shape and device.
Tensor new_tensor(Shape shape, DType dtype, Device device);
// As new_tensor(shape, dtype, stream.device()), with memory for work on `stream`.
Tensor new_tensor(Shape shape, DType dtype, const Stream& stream);

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

// Enqueues t.fill_(value) (tracked write).
void enqueue_fill(Tensor& t, double value);
// Enqueues dst <- src with dtype conversion (tracked); `src` broadcasts to dst's shape (checked).
void enqueue_copy(Tensor& dst, const Tensor& src, const char* label);

// Throws Error naming `op` when `t` has elements that alias (an expanded view): writing it would
// race with itself.
void check_writable(const Tensor& t, const char* op);
// "float32 [2, 3]", for messages.
std::string describe(const Tensor& t);
// Throws Error naming both devices when they differ.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// `t` converted to `dtype` on the current stream (itself when it already has that dtype).
Tensor as_dtype(const Tensor& t, DType dtype);
// Normalises a possibly negative dimension index against `ndim` (Error naming `op` when out of
// range).
int wrap_dim(int d, int ndim, const char* op);

// Positions a host reader (`for_write` false) or writer must wait for before touching `storage`.
std::vector<std::shared_ptr<impl::EventImpl>> pending_accesses(Storage& storage, bool for_write);

}  // namespace streamrt::ops

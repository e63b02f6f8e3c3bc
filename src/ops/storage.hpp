#pragma once
// Tensor storage: the memory of one or more tensors and what the dependency tracker knows about
// the queued accesses to it.
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

}  // namespace streamrt::detail

namespace streamrt::ops {
using detail::Storage;
}  // namespace streamrt::ops

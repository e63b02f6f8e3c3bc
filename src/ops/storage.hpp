#pragma once
// Tensor storage: the memory of one or more tensors and what the dependency tracker knows about
// the queued accesses to it.
#include <atomic>
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
  // Set when the storage is made (from_blob joins the wrapped memory it overlaps:
  // memory_index.hpp) or by share_tracking before it is used, then constant: the storages whose
  // tracking (mutex, last_write, reads) records accesses to this one's memory instead of its own
  // (roots: never sharing themselves). tracked_by is the first; also_tracked_by holds the others,
  // for memory overlapping buffers tracked apart (rare: usually empty).
  std::shared_ptr<Storage> tracked_by;
  std::vector<std::shared_ptr<Storage>> also_tracked_by;
  // The first storage whose tracking fields record accesses to this one's memory.
  Storage& tracking() noexcept { return tracked_by ? *tracked_by : *this; }
  // Set once another storage records its accesses in this one's tracking (then this one must not
  // start sharing another's: the two would no longer be ordered). Written under the index's lock
  // or before the storages are used; relaxed, as `indexed`.
  std::atomic<bool> joined{false};
  // Set while the storage is in the memory index (memory_index.hpp), whose lock guards the entry.
  std::atomic<bool> indexed{false};
  // The caller keeps the memory: a wrap refused after the storage was made must not free it.
  void forget_deleter() noexcept {
    deleter_ = nullptr;
    owned_ = false;
  }

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

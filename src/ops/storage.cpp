// Storage: memory of tensors, from the caching allocator or wrapped (from_blob). Its destructor
// frees a cached block in stream order: it hands the allocator every position at which the block
// may still be used (allocator.hpp).
#include "storage.hpp"

#include <cstdio>
#include <cstdlib>

#include "allocator.hpp"
#include "core/capture_state.hpp"
#include "memory_index.hpp"
#include "read_check.hpp"
#include "streamrt/detail/block_cache.hpp"
#include "streamrt/error.hpp"

namespace streamrt::detail {

Storage::Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> deleter,
                 bool owned) noexcept
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), owned_(owned) {}

Storage::~Storage() {
  unindex(*this);
  ops::read_check::forget(*this);
  if (capacity_ > 0) {
    impl::StreamImpl& owner = *alloc_stream_;
    impl::Backend& backend = owner.backend();
    std::vector<ops::PendingUse> uses;
    try {
      // Tracked accesses on other streams that may not have finished. (Readers before the last
      // write on other streams were waited for by that write, so it covers them.)
      auto add = [&](const Access& a) {
        // capture::query: an access made during a capture is a place in a graph, which the
        // backend's query_event must never receive.
        if (a.position && a.stream_id != owner.id() && !capture::query(backend, a.position)) {
          uses.push_back(ops::PendingUse{a.stream_id, &backend, a.position});
        }
      };
      add(last_write);
      for (const auto& r : reads) add(r);
    } catch (...) {
      // Out of memory while describing the uses: the block cannot be proven free, so it is kept
      // out of circulation (leaked) rather than risk handing it to a racing stream.
      std::fputs("streamrt: a tensor's memory could not be freed in stream order; leaked\n",
                 stderr);
      return;
    }
    // The allocating stream: the free is ordered there (raw pointers in launched work, tracked
    // or not), as cudaFreeAsync orders it on its stream. Whether that stream is idle is asked
    // only when another stream wants the block: asking here read the counter its worker writes
    // after every item, a cache miss on each op's result.
    const std::uint64_t owner_id = owner.id();
    // The positions the free needs are in `uses`; the others (on the owner itself) hold the owner.
    last_write.position.reset();
    reads.clear();
    std::shared_ptr<impl::StreamImpl> busy = std::move(alloc_stream_);
    // A stream no one else holds gets no more work, and its counters are no longer written: asking
    // whether it is done costs no cross-core miss. When it is, the block is free for any stream and
    // the cache does not keep the dead stream alive.
    if (busy.use_count() == 1 && backend.query_stream(*busy)) busy.reset();
    ops::free_block(ops::Block{data_, capacity_}, owner_id, std::move(busy), std::move(uses));
    return;
  }
  if (deleter_) {
    try {
      deleter_(data_);
    } catch (...) {
      // A destructor cannot throw; say so rather than lose it.
      std::fputs("streamrt: a from_blob deleter threw; the exception was dropped\n", stderr);
    }
  } else if (owned_) {
    std::free(data_);
  }
}

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, Device device) {
  return allocate(nbytes, current_stream(device));
}

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, const Stream& stream) {
  const Device device = stream.device();
  const ops::Block block = ops::allocate_block(nbytes, stream.impl()->id());
  std::shared_ptr<Storage> st;
  try {
    // From the block cache: the last reference usually goes on the worker that ran the last op.
    st = std::allocate_shared<Storage>(detail::CachedAllocator<Storage>{}, block.ptr, nbytes,
                                       device, nullptr, false);
  } catch (...) {
    ops::free_block(block, stream.impl()->id(), nullptr, {});  // nothing used it yet
    throw;
  }
  st->capacity_ = block.capacity;
  // The stream object, not the handle's reference: a tensor (and, after it, the cache) must not
  // keep a partition's workers reserved (impl::StreamImpl::bookkeeping_ref).
  st->alloc_stream_ = stream.impl()->bookkeeping_ref();
  if (!st->alloc_stream_) st->alloc_stream_ = stream.impl();
  return st;
}

}  // namespace streamrt::detail

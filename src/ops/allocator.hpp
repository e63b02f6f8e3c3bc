#pragma once
// The stream-ordered caching allocator (docs/ops.md, "The stream-ordered caching allocator").
//
// A block is freed "on" the stream that allocated it: later work on that stream runs after every
// earlier use there (streams are FIFO), so the block may go back to that stream at once. Any other
// stream gets it only when the work that may still use it has finished: everything submitted to
// the allocating stream (work launched there with raw pointers is covered too, as CUDA orders a
// free on its stream) and the tracked accesses on other streams.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "streamrt/impl/backend.hpp"
#include "streamrt/memory.hpp"

namespace streamrt::ops {

// A position a freed block may still be used before, and the stream it is on.
struct PendingUse {
  std::uint64_t stream_id = 0;
  impl::Backend* backend = nullptr;  // the backend of `position` (outlives it)
  std::shared_ptr<impl::EventImpl> position;
};

// Memory from the cache. `capacity` is the size-class bytes (>= the bytes asked for).
struct Block {
  void* ptr = nullptr;
  std::size_t capacity = 0;
};

// Makes the caching allocator, and with it its fork handlers, unless it exists. The library calls
// it when it loads, before the program starts threads (fork handlers registered while another
// thread is inside fork() may have their unlock run without their lock: glibc releases its
// handler-list lock while it runs prepare handlers), and before it makes the CPU backend, whose
// fork handlers must come after these (src/library/backends.cpp). Thread-safe; throws
// std::bad_alloc.
void make_caching_allocator();

// Bytes of the size class that serves `nbytes`: 64-byte multiples up to 512 bytes, then four
// classes per power of two (at most 25% slack), so a repeated shape always lands in one class.
std::size_t size_class(std::size_t nbytes) noexcept;

// Parses a size ("1048576", "512K", "64M", "2G", "0"; K/M/G are binary). Throws Error naming
// `what` and the accepted forms for anything else.
std::size_t parse_size(const std::string& text, const char* what);

// A block of at least `nbytes` for work on stream `stream_id`, 64-byte aligned. Throws
// OutOfMemory when memory runs out (after releasing what the cache may release).
Block allocate_block(std::size_t nbytes, std::uint64_t stream_id);

// Returns `block` to the cache. `owner` is the stream that allocated it; `busy_owner` is that
// stream (null when it is known to be idle): until it has no unfinished work, other streams do
// not get the block (everything submitted there so far is a conservative, lock-free stand-in for
// "the work queued before the free", and costs no record at each free; it is asked only when
// another stream wants the block). `uses` are unfinished tracked accesses on other streams.
// Never blocks; noexcept.
void free_block(Block block, std::uint64_t owner, std::shared_ptr<impl::StreamImpl> busy_owner,
                std::vector<PendingUse> uses) noexcept;

// Test hook: with `on` false a freed block goes to any stream at once (the race the rule
// prevents), so a test can show that its check fails without the rule. Default on.
void set_stream_ordering_for_testing(bool on) noexcept;

}  // namespace streamrt::ops

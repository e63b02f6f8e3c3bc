// Node recycling for the stream queue, through the runtime's block cache (a node is one 56-byte
// block: one 64-byte malloc chunk when the cache allocates it).
#include "stream_queue.hpp"

#include "streamrt/detail/block_cache.hpp"

namespace streamrt::cpu {

Node* NodeCache::get() {
  void* p = detail::cached_alloc(sizeof(Node));
  return ::new (p) Node;  // nothrow: an empty callable
}

void NodeCache::put(Node* n) noexcept {
  n->~Node();
  detail::cached_free(n, sizeof(Node));
}

}  // namespace streamrt::cpu

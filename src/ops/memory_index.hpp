#pragma once
// The index of memory that other routes than a tensor reach (docs/design.md, "Memory reached
// twice"): wrapped memory (from_blob) and the allocator's memory once it has been handed to other
// code (numpy, DLPack). A tensor wrapped over any part of indexed memory joins the dependency
// tracking of every indexed storage it overlaps, so accesses through either are ordered however
// the memory was reached and from whichever start address.
#include <cstddef>
#include <memory>
#include <vector>

#include "storage.hpp"

namespace streamrt::detail {

// The most storages whose tracking one storage joins (each is locked by every op on it).
inline constexpr std::size_t kMaxTrackingRoots = 4;

// Adds the storages whose tracking records accesses to `x` (x itself, or those it shares) to
// `roots`, once each.
void add_tracking_roots(const std::shared_ptr<Storage>& x,
                        std::vector<std::shared_ptr<Storage>>& roots);
// `s` (not used yet, and joined by none) records its accesses in `roots`' tracking from now on
// (none: its own), and they are marked joined.
void join_tracking(Storage& s, const std::vector<std::shared_ptr<Storage>>& roots);

// `s` (just made by from_blob, not yet seen by another thread or used): joins the tracking of
// every indexed storage overlapping its memory, and is indexed. Throws Error when that would be
// more than kMaxTrackingRoots separately tracked buffers. Thread-safe.
void index_wrapped(const std::shared_ptr<Storage>& s);
// `s` (the allocator's memory, handed out to other code): indexed, so later wraps join it. Storages
// indexed over its memory before stand for memory freed since (the allocator owned it) and leave
// the index. Idempotent; thread-safe.
void index_exposed(const std::shared_ptr<Storage>& s);
// [data, data + nbytes) was just allocated by its owner: the storages indexed over it stand for
// memory freed since, and leave the index. Never throws.
void unindex_range(const void* data, std::size_t nbytes) noexcept;
// `s` no longer stands for live memory: later wraps do not join it. Never throws.
void unindex(Storage& s) noexcept;
// Whether an indexed storage overlaps [data, data + nbytes).
bool indexed_overlap(const void* data, std::size_t nbytes);

}  // namespace streamrt::detail

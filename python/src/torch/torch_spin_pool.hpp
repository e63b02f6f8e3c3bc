#pragma once
// Freed objects of one kind kept for reuse (prepared ops, reuse tickets): a host thread takes
// them and a worker gives them back, so that neither allocates per op and the worker frees
// nothing the host allocated.

#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

#include "torch_spin_lock.hpp"

namespace streamrt::python::torch_runner {

//! At most `kMax` freed `T`s, under a spin lock. Thread-safe; never blocks but briefly.
template <class T, std::size_t kMax>
class SpinPool {
 public:
  SpinPool() { free_.reserve(kMax); }

  //! A kept object, or null when none is kept. Never throws.
  T* take() noexcept {
    const std::lock_guard guard(lock_);
    if (free_.empty()) return nullptr;
    T* t = free_.back();
    free_.pop_back();
    return t;
  }

  //! Keeps `t` for take(), or deletes it when the pool is full. Never throws.
  void give(T* t) noexcept {
    {
      const std::lock_guard guard(lock_);
      if (free_.size() < free_.capacity()) {
        free_.push_back(t);  // (within the capacity: never allocates)
        return;
      }
    }
    delete t;
  }

  //! In a child of fork(): an empty pool and a free lock, whatever another thread of the parent
  //! was doing with them (the parent's list is left, not freed). Taking the lock before the fork
  //! instead could wait on a worker that waits for it, since streamrt's own handler waits for
  //! the queued work first.
  void reset_in_child() noexcept {
    new (&free_) std::vector<T*>();
    lock_.reset_in_child();
    try {
      free_.reserve(kMax);
    } catch (...) {  // (no memory: nothing is kept, give() deletes)
    }
  }

 private:
  SpinLock lock_;
  std::vector<T*> free_;
};

}  // namespace streamrt::python::torch_runner

#pragma once
// A functional op's result written straight into the output handed out at its call
// (torch_output_handover.cpp).

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace streamrt::python::torch_runner {

//! Puts the hand-over in front of torch's CPU allocator (once; it then stays, passing every other
//! allocation through) and says whether it is there: false where another allocator of a higher
//! priority is set. Blocks only the first time, briefly; thread-safe; never throws.
bool wrap_cpu_allocator() noexcept;

//! Whether a HandOver can take an op's allocation now: the allocator is wrapped and
//! use_handover() is on. Never blocks.
bool handover_available() noexcept;

//! The hand-over on (true, the default) or off, from the next HandOver on: for measurements and
//! tests. Never blocks; thread-safe.
void use_handover(bool on) noexcept;

//! Whether `op`'s kernel for CPU tensors is the out= overload that torch generates from the
//! functional op (the op, then a copy into `out`): no CPU kernel of its own, a composite one.
//! Never blocks.
bool generated_out_overload(const c10::OperatorHandle& op);

//! The memory of one output for the op run next on this thread, if it allocates it first.
struct HandOverSlot {
  void* block = nullptr;   // the output cache's block under the output
  void* data = nullptr;    // its data, the output's
  std::size_t nbytes = 0;  // the output storage's bytes
  bool taken = false;      // an allocation of the op got it
};

//! While it lives, the first allocation of exactly `out`'s bytes that this thread makes through
//! torch's CPU allocator gets the memory of `out` (a functional op allocating its result), so that
//! the op computes into `out` with no copy. Only where `out` starts an output cache block
//! and handover_available(). Not copyable; never blocks; never throws.
class HandOver {
 public:
  explicit HandOver(const at::Tensor& out) noexcept;
  ~HandOver() { disarm(); }
  HandOver(const HandOver&) = delete;
  HandOver& operator=(const HandOver&) = delete;

  //! Stops handing over (finish() does it first). Never blocks.
  void disarm() noexcept;

  //! Puts the op's `result` into `out`: nothing to do where the op computed it there (its first
  //! allocation, with `out`'s layout), else a copy. Drops `result`. Throws c10::Error where the
  //! result's sizes or dtype are not `out`'s, or where the op kept `out`'s memory for a tensor of
  //! its own beyond its return (`op_name` names it).
  void finish(at::Tensor result, const at::Tensor& out, const std::string& op_name);

 private:
  HandOverSlot slot_;
};

//! Copies each of a functional op's `results` into the output handed out for it at the call (the
//! op had several, so none was handed over). Throws c10::Error, as HandOver::finish, where a
//! result's sizes or dtype are not its output's: the copy would broadcast or convert silently.
void copy_results(const std::vector<at::Tensor>& into, const std::vector<c10::IValue>& results,
                  const std::string& op_name);

//! What the hand-over did so far.
struct HandOverStats {
  std::uint64_t in_place;  //!< results an op computed in their output's memory
  std::uint64_t copied;    //!< results copied into their output
};

//! The figures so far. Never blocks; thread-safe.
HandOverStats handover_stats() noexcept;

}  // namespace streamrt::python::torch_runner

#pragma once
//! \file dlpack.hpp
//! The DLPack C ABI (version 0.x "dltensor" capsules, as exchanged by numpy >= 1.22 and torch
//! through __dlpack__), declared here from the published specification: only the structs and
//! codes this package exchanges.

#include <cstdint>

namespace streamrt::python::dlpack {

//! DLDeviceType values used here.
inline constexpr std::int32_t kDLCPU = 1;

//! DLDataTypeCode values used here.
inline constexpr std::uint8_t kDLInt = 0;
//! Floating point.
inline constexpr std::uint8_t kDLFloat = 2;
inline constexpr std::uint8_t kDLBool = 6;  // DLPack 0.8

//! Capsule names: a fresh export, and one a consumer has taken over.
inline constexpr const char* kCapsuleName = "dltensor";
//! Name a consumer gives the capsule once it owns the tensor.
inline constexpr const char* kUsedCapsuleName = "used_dltensor";

//! DLDevice.
struct DLDevice {
  //! A DLDeviceType value (a C enum: int-sized).
  std::int32_t device_type;
  //! Device index.
  std::int32_t device_id;
};

//! DLDataType.
struct DLDataType {
  //! A DLDataTypeCode value.
  std::uint8_t code;
  //! Bits per lane.
  std::uint8_t bits;
  //! Lanes (1 for scalars).
  std::uint16_t lanes;
};

//! DLTensor: a view of memory, strides in elements (null = compact row-major).
struct DLTensor {
  //! Base pointer.
  void* data;
  //! Where the memory is.
  DLDevice device;
  //! Number of dimensions.
  std::int32_t ndim;
  //! Element type.
  DLDataType dtype;
  //! ndim sizes.
  std::int64_t* shape;
  //! ndim strides in elements, or null.
  std::int64_t* strides;
  //! Offset in bytes from data to the first element.
  std::uint64_t byte_offset;
};

//! DLManagedTensor: a DLTensor plus its owner, released once through deleter(self).
struct DLManagedTensor {
  //! The view.
  DLTensor dl_tensor;
  //! The producer's context.
  void* manager_ctx;
  //! Releases the tensor (called exactly once by the consumer, or by the capsule if unconsumed).
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace streamrt::python::dlpack

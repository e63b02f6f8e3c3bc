// Whitebox: the Philox4x32-10 generator behind rand/randn (src/ops/random.hpp), against the
// known answers of its reference implementation.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "ops/random.hpp"

namespace streamrt {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswers) {
  using A4 = std::array<std::uint32_t, 4>;
  using A2 = std::array<std::uint32_t, 2>;
  EXPECT_EQ(ops::philox4x32_10(A4{0, 0, 0, 0}, A2{0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(ops::philox4x32_10(A4{~0u, ~0u, ~0u, ~0u}, A2{~0u, ~0u}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(ops::philox4x32_10(A4{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                               A2{0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

}  // namespace
}  // namespace streamrt

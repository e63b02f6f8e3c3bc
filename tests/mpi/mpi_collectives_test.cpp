// Every operation against a serial reference, for several sizes and dtypes, on tensors and on raw
// buffers.
#include <cstring>

#include "mpi_util.hpp"

namespace {

using namespace streamrt_mpi_test;
using streamrt::Event;
using streamrt::Stream;
using streamrt::Tensor;

const std::size_t kSizes[] = {1, 7, 1000, 1 << 17};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max};

template <class T>
Tensor tensor_of(const std::vector<T>& v) {
  Tensor t = streamrt::empty({static_cast<std::int64_t>(v.size())}, streamrt::kDTypeOf<T>);
  std::memcpy(t.data<T>(), v.data(), v.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();  // waits for the tracked writers, the communication included
  return std::vector<T>(p, p + t.numel());
}

template <class T>
class Collectives : public ::testing::Test {};
using DTypes = ::testing::Types<float, double, std::int32_t, std::int64_t>;
TYPED_TEST_SUITE(Collectives, DTypes);

TYPED_TEST(Collectives, AllReduceTensorMatchesSerialReference) {
  using T = TypeParam;
  Communicator& c = world();
  Stream s;
  for (std::size_t n : kSizes) {
    for (ReduceOp op : kOps) {
      Tensor t = tensor_of(data_of<T>(c.rank(), n));
      c.all_reduce(t, op, s);
      EXPECT_EQ(values<T>(t), reduce_reference<T>(c.size(), n, op))
          << n << " elements, " << streamrt::mpi::to_string(op);
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    Tensor t = tensor_of(data_of<T>(c.rank(), 1000));
    c.all_reduce(t, ReduceOp::Avg, s);
    EXPECT_EQ(values<T>(t), reduce_reference<T>(c.size(), 1000, ReduceOp::Avg));
  } else {
    Tensor t = tensor_of(data_of<T>(c.rank(), 4));
    EXPECT_THROW(c.all_reduce(t, ReduceOp::Avg, s), streamrt::Error);
  }
}

TYPED_TEST(Collectives, AllReduceRawBuffersInPlaceAndOutOfPlace) {
  using T = TypeParam;
  Communicator& c = world();
  Stream s;
  for (std::size_t n : kSizes) {
    auto in = data_of<T>(c.rank(), n);
    std::vector<T> out(n);
    Event e = c.all_reduce(in.data(), out.data(), n, streamrt::kDTypeOf<T>, ReduceOp::Sum, s);
    e.synchronize();
    EXPECT_EQ(out, reduce_reference<T>(c.size(), n, ReduceOp::Sum)) << n;
    EXPECT_EQ(in, data_of<T>(c.rank(), n)) << "out of place must not touch the input";
    c.all_reduce(in.data(), in.data(), n, streamrt::kDTypeOf<T>, ReduceOp::Max, s).synchronize();
    EXPECT_EQ(in, reduce_reference<T>(c.size(), n, ReduceOp::Max)) << n;
  }
}

TYPED_TEST(Collectives, BroadcastFromEveryRoot) {
  using T = TypeParam;
  Communicator& c = world();
  Stream s;
  for (std::size_t n : kSizes) {
    for (int root = 0; root < c.size(); ++root) {
      Tensor t = tensor_of(data_of<T>(c.rank(), n));
      c.broadcast(t, root, s);
      EXPECT_EQ(values<T>(t), data_of<T>(root, n)) << n << " elements from " << root;
    }
  }
}

TYPED_TEST(Collectives, AllGatherReduceScatterAllToAll) {
  using T = TypeParam;
  Communicator& c = world();
  const auto p = static_cast<std::size_t>(c.size());
  Stream s;
  for (std::size_t n : kSizes) {
    // all_gather: rank blocks in rank order.
    Tensor in = tensor_of(data_of<T>(c.rank(), n));
    Tensor out = streamrt::empty({static_cast<std::int64_t>(n * p)}, streamrt::kDTypeOf<T>);
    c.all_gather(in, out, s);
    std::vector<T> want;
    for (int r = 0; r < c.size(); ++r) {
      auto v = data_of<T>(r, n);
      want.insert(want.end(), v.begin(), v.end());
    }
    EXPECT_EQ(values<T>(out), want) << "all_gather " << n;

    // reduce_scatter: block rank() of the element-wise sum of every rank's n*p elements.
    Tensor big = tensor_of(data_of<T>(c.rank(), n * p));
    Tensor part = streamrt::empty({static_cast<std::int64_t>(n)}, streamrt::kDTypeOf<T>);
    c.reduce_scatter(big, part, ReduceOp::Sum, s);
    auto full = reduce_reference<T>(c.size(), n * p, ReduceOp::Sum);
    std::vector<T> mine(full.begin() + static_cast<std::ptrdiff_t>(n * c.rank()),
                        full.begin() + static_cast<std::ptrdiff_t>(n * (c.rank() + 1)));
    EXPECT_EQ(values<T>(part), mine) << "reduce_scatter " << n;

    // all_to_all: block j of rank i goes to block i of rank j.
    Tensor a2a = tensor_of(data_of<T>(c.rank(), n * p));
    Tensor got = streamrt::empty({static_cast<std::int64_t>(n * p)}, streamrt::kDTypeOf<T>);
    c.all_to_all(a2a, got, s);
    std::vector<T> expect;
    for (int r = 0; r < c.size(); ++r) {
      auto v = data_of<T>(r, n * p);
      expect.insert(expect.end(), v.begin() + static_cast<std::ptrdiff_t>(n * c.rank()),
                    v.begin() + static_cast<std::ptrdiff_t>(n * (c.rank() + 1)));
    }
    EXPECT_EQ(values<T>(got), expect) << "all_to_all " << n;
  }
}

TYPED_TEST(Collectives, SendRecvAroundTheRing) {
  using T = TypeParam;
  Communicator& c = world();
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  Stream s_send, s_recv;  // on one stream, a blocking-order ring would still work; two is harsher
  for (std::size_t n : kSizes) {
    Tensor out = tensor_of(data_of<T>(c.rank(), n));
    Tensor in = streamrt::empty({static_cast<std::int64_t>(n)}, streamrt::kDTypeOf<T>);
    c.recv(in, prev, 3, s_recv);
    c.send(out, next, 3, s_send);
    EXPECT_EQ(values<T>(in), data_of<T>(prev, n)) << n;
    s_send.synchronize();
  }
}

TEST(Collectives, RawVariantsOfTheOtherCollectives) {
  Communicator& c = world();
  const auto p = static_cast<std::size_t>(c.size());
  const std::size_t n = 33;
  Stream s;
  auto mine = data_of<double>(c.rank(), n);
  std::vector<double> gathered(n * p);
  c.all_gather(mine.data(), gathered.data(), n, DType::Float64, s);
  auto big = data_of<double>(c.rank(), n * p);
  std::vector<double> part(n), moved(n * p), root_buf = mine;
  c.reduce_scatter(big.data(), part.data(), n, DType::Float64, ReduceOp::Avg, s);
  c.all_to_all(big.data(), moved.data(), n, DType::Float64, s);
  c.broadcast(root_buf.data(), n, DType::Float64, 0, s);
  c.barrier(s).synchronize();
  for (int r = 0; r < c.size(); ++r) {
    auto v = data_of<double>(r, n);
    EXPECT_TRUE(
        std::equal(v.begin(), v.end(), gathered.begin() + static_cast<std::ptrdiff_t>(n * r)));
    auto vb = data_of<double>(r, n * p);
    EXPECT_TRUE(std::equal(vb.begin() + static_cast<std::ptrdiff_t>(n * c.rank()),
                           vb.begin() + static_cast<std::ptrdiff_t>(n * (c.rank() + 1)),
                           moved.begin() + static_cast<std::ptrdiff_t>(n * r)));
  }
  auto avg = reduce_reference<double>(c.size(), n * p, ReduceOp::Avg);
  EXPECT_TRUE(std::equal(part.begin(), part.end(),
                         avg.begin() + static_cast<std::ptrdiff_t>(n * c.rank())));
  EXPECT_EQ(root_buf, data_of<double>(0, n));
}

TEST(Collectives, BadArgumentsAreRejectedAtTheCall) {
  Communicator& c = world();
  Tensor a = streamrt::zeros({4});
  Tensor b = streamrt::zeros({5});
  EXPECT_THROW(c.all_gather(a, b), streamrt::Error);
  EXPECT_THROW(c.send(a, c.size()), streamrt::Error);
  EXPECT_THROW(c.broadcast(a, -1), streamrt::Error);
  try {
    c.recv(a, c.size() + 3);
    FAIL();
  } catch (const streamrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  // Tags run from 0 to MPI_TAG_UB: a negative one is refused at the call, not by MPI later.
  for (int tag : {-5, -1}) {
    try {
      c.send(a, 0, tag);
      FAIL() << tag;
    } catch (const streamrt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("tag " + std::to_string(tag) + " is out of range"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(c.recv(a, 0, tag), streamrt::Error);
  }
}

}  // namespace

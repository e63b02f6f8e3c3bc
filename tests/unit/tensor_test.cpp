// Tensors: creation, host access (waits only for the writer), views, lifetime, random numbers.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <string>
#include <thread>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::expect_error_containing;
using test::Gate;
using test::to_vector;

TEST(TensorCreate, ZerosOnesFullArangeAllDtypes) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor z = zeros({2, 3}, dt);
    Tensor o = ones({3, 2}, dt);
    Tensor f = full({5}, 7.0, dt);
    Tensor a = arange(6, dt);
    EXPECT_EQ(z.shape(), (Shape{2, 3}));
    EXPECT_EQ(z.dtype(), dt);
    EXPECT_EQ(z.numel(), 6);
    EXPECT_EQ(z.dim(), 2);
    EXPECT_EQ(z.nbytes(), 6 * element_size(dt));
    EXPECT_EQ(to_vector(z), std::vector<double>(6, 0.0));
    EXPECT_EQ(to_vector(o), std::vector<double>(6, 1.0));
    EXPECT_EQ(to_vector(f), std::vector<double>(5, 7.0));
    EXPECT_EQ(to_vector(a), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  }
  EXPECT_EQ(arange(4).dtype(), DType::Int64);
  EXPECT_EQ(zeros({1}).dtype(), DType::Float32);
}

TEST(TensorCreate, LargeFillUsesEveryElement) {
  // Big enough to be split across workers.
  Tensor f = full({1000, 1001}, -2.5, DType::Float64);
  const double* p = f.data<double>();
  for (std::int64_t i = 0; i < f.numel(); ++i) ASSERT_EQ(p[i], -2.5) << i;
}

TEST(TensorCreate, ScalarAndEmptyShapes) {
  Tensor s = full({}, 3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<float>(), 3.5f);
  Tensor e = zeros({0, 4});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_EQ(to_vector(e).size(), 0u);
  EXPECT_EQ(arange(0).numel(), 0);
}

TEST(TensorCreate, BadShapesAndDevicesAreErrors) {
  expect_error_containing([] { zeros({2, -1}); }, {"[2, -1]", "negative"});
  expect_error_containing([] { zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}); }, {"at most 8"});
  expect_error_containing([] { zeros({2}, DType::Float32, Device::parse("cuda:0")); },
                          {"cuda:0", "not supported"});
  expect_error_containing([] { zeros({2}, DType::Float32, Device{DeviceType::CPU, 3}); }, {});
  expect_error_containing([] { arange(-1); }, {"arange(-1)"});
  expect_error_containing([] { rand({2}, 1, DType::Int32); }, {"int32", "floating"});
}

// Sizes whose bytes pass what a tensor can address are refused where they enter: the product
// numel * element_size once wrapped, giving an 8-byte storage to a tensor of 2^61 + 1 elements.
TEST(TensorCreate, BytesPastTheAddressableLimitAreRefused) {
  const std::int64_t past = (std::int64_t{1} << 61) + 1;  // * 8 bytes wraps to 8
  expect_error_containing([&] { empty({past}, DType::Float64); },
                          {"[2305843009213693953]", "float64", "9223372036854775807"});
  expect_error_containing([] { zeros({std::int64_t{1} << 62}); }, {"float32", "bytes"});
  expect_error_containing([] { arange(std::int64_t{1} << 62); }, {"int64", "bytes"});
  expect_error_containing([] { rand({std::int64_t{1} << 62}, 1, DType::Float64); }, {"bytes"});
  double cell = 0;
  expect_error_containing([&] { from_blob(&cell, {past}, DType::Float64); }, {"bytes"});
  EXPECT_EQ(shape_nbytes({2, 3}, DType::Float64), 48u);
  // The limit itself: the largest count that fits is accepted, one more is not.
  const std::int64_t most = std::numeric_limits<std::int64_t>::max() / 8;
  EXPECT_EQ(shape_nbytes({most}, DType::Float64), static_cast<std::size_t>(most) * 8);
  expect_error_containing([&] { shape_nbytes({most + 1}, DType::Float64); }, {"bytes"});
}

TEST(TensorCreate, MemoryTheOsRefusesIsOutOfMemory) {
  if (sizeof(STREAMRT_TEST_SANITIZER) > 1) {
    GTEST_SKIP() << "a sanitizer's allocator ends the process on a request this large instead "
                    "of refusing it";
  }
  // 2**48 bytes: addressable arithmetic, but past a 47-bit user address space and any machine's
  // memory. OutOfMemory (a ResourceUnavailable, an Error), so that callers tell it apart from an
  // argument error.
  const std::int64_t n = std::int64_t{1} << 45;
  try {
    (void)empty({n}, DType::Float64);
    ADD_FAILURE() << "an allocation of 2**48 bytes succeeded";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory allocating a tensor of 281474976710656 "
                                         "bytes"),
              std::string::npos)
        << e.what();
    EXPECT_NE(dynamic_cast<const ResourceUnavailable*>(&e), nullptr);
  }
  EXPECT_EQ(to_vector(ones({2}))[1], 1.0);  // and the runtime goes on
}

TEST(TensorAccess, WrongDtypeIsError) {
  Tensor t = zeros({2}, DType::Float64);
  expect_error_containing([&] { t.data<float>(); }, {"float32", "float64", "data<double>"});
  expect_error_containing([&] { zeros({1}, DType::Float64).item<std::int32_t>(); },
                          {"int32", "float64"});
  expect_error_containing([&] { t.data_unsafe<std::int64_t>(); }, {"int64", "float64"});
  expect_error_containing([&] { Tensor().data<float>(); }, {"undefined"});
  expect_error_containing([&] { t.item<double>(); }, {"2 elements"});
}

TEST(TensorAccess, SizeStridesAndStr) {
  Tensor t = empty({2, 3, 4}, DType::Int32);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  expect_error_containing([&] { t.size(3); }, {"[2, 3, 4]"});
  EXPECT_EQ(t.str(), "Tensor(shape=[2, 3, 4], dtype=int32, device=cpu:0)");
  EXPECT_EQ(Tensor().str(), "Tensor(undefined)");
  EXPECT_FALSE(Tensor().defined());
}

TEST(TensorView, CopiesAndReshapeShareStorage) {
  Tensor a = zeros({2, 3});
  Tensor b = a;  // copy shares storage
  Tensor v = a.reshape({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_TRUE(v.shares_storage(a));
  b.fill_(4.0);
  EXPECT_EQ(to_vector(a), std::vector<double>(6, 4.0));
  EXPECT_EQ(to_vector(v), std::vector<double>(6, 4.0));
  EXPECT_EQ(a.reshape({6}).data<float>(), a.data<float>());
  expect_error_containing([&] { a.reshape({4, 2}); }, {"[2, 3]", "[4, 2]"});
  expect_error_containing([&] { a.reshape({-1, -1}); }, {"only one"});
  expect_error_containing([&] { a.reshape({4, -1}); }, {"[2, 3]", "[4, -1]"});
}

TEST(TensorView, CloneAndToAreIndependentCopies) {
  Tensor a = arange(5, DType::Float64);
  Tensor c = a.clone();
  EXPECT_FALSE(c.shares_storage(a));
  c.fill_(1.0);
  EXPECT_EQ(to_vector(a), (std::vector<double>{0, 1, 2, 3, 4}));
  Tensor f = full({4}, -2.75, DType::Float64);
  EXPECT_EQ(to_vector(f.to(DType::Int32)), (std::vector<double>{-2, -2, -2, -2}));
  EXPECT_EQ(f.to(DType::Float32).dtype(), DType::Float32);
  EXPECT_EQ(to_vector(arange(3).to(DType::Float32)), (std::vector<double>{0, 1, 2}));
  // Out-of-range floats saturate instead of being undefined behaviour.
  EXPECT_EQ(full({1}, 1e30, DType::Float64).to(DType::Int32).item<std::int32_t>(), INT32_MAX);
}

TEST(TensorAccess, DataWaitsForTheWriterOnly) {
  Stream s;
  StreamContext ctx(s);
  Tensor x = full({4}, 7.0);
  Gate gate;
  gate.hold(s);  // after x's fill: data() must not wait for this (the whole stream)
  auto reader = std::async(std::launch::async, [&] { return x.data<float>()[3]; });
  ASSERT_EQ(reader.wait_for(test::kMeetTimeout), std::future_status::ready)
      << "data() waited for later work on the stream, not just the writer";
  EXPECT_EQ(reader.get(), 7.0f);
  EXPECT_FALSE(s.query());
  gate.open();
  s.synchronize();
  EXPECT_FALSE(gate.timed_out());
}

TEST(TensorAccess, DataWaitsForAPendingWrite) {
  Stream s;
  StreamContext ctx(s);
  Gate gate;
  gate.hold(s);
  Tensor x = full({3}, 5.0);  // queued behind the gate
  EXPECT_FALSE(x.ready());
  auto reader = std::async(std::launch::async, [&] { return x.data<float>()[1]; });
  // While the gate is closed the writer cannot have run: a reader that returned would have read
  // uninitialised memory.
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(x.data_unsafe<float>(), x.data_ptr_unsafe());  // no wait
  gate.open();
  ASSERT_EQ(reader.wait_for(test::kMeetTimeout), std::future_status::ready);
  EXPECT_EQ(reader.get(), 5.0f);
  EXPECT_TRUE(x.ready());
  EXPECT_THROW(x.item<float>(), Error);  // item() needs one element
  EXPECT_FALSE(gate.timed_out());
}

TEST(TensorAccess, MutableDataAlsoWaitsForReaders) {
  Stream s1, s2;
  Tensor a = full({8}, 1.0);
  a.wait();
  Gate gate;
  gate.hold(s1);
  Tensor b;
  {
    StreamContext ctx(s1);
    b = a * 2.0;  // reads a, behind the gate
  }
  const Tensor& ca = a;
  EXPECT_EQ(ca.data<float>()[0], 1.0f);  // const access: the writer is done, readers don't matter
  auto writer = std::async(std::launch::async, [&] { a.data<float>()[0] = 100.0f; });
  EXPECT_EQ(writer.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  gate.open();
  ASSERT_EQ(writer.wait_for(test::kMeetTimeout), std::future_status::ready);
  writer.get();
  EXPECT_EQ(b.data<float>()[0], 2.0f);  // the reader saw the old value
  (void)s2;
}

TEST(TensorAccess, WaitForTimesOutWhileTheWriterIsHeldAndReportsNothing) {
  Stream s;
  StreamContext ctx(s);
  Gate gate;
  gate.hold(s);
  Tensor x = full({2}, 3.0);  // queued behind the gate
  EXPECT_FALSE(x.wait_for(std::chrono::milliseconds(20)));
  EXPECT_FALSE(x.wait_for(std::chrono::nanoseconds(0), /*for_write=*/true));
  gate.open();
  EXPECT_TRUE(x.wait_for(test::kMeetTimeout));
  EXPECT_TRUE(x.ready());
  EXPECT_EQ(x.data<float>()[1], 3.0f);
  EXPECT_FALSE(gate.timed_out());
  // A failed writer: wait_for does not raise it (nor report it); the read that follows does.
  Tensor bad = full({2}, 1, DType::Int32) / zeros({2}, DType::Int32);
  EXPECT_TRUE(bad.wait_for(test::kMeetTimeout));
  EXPECT_THROW(bad.data<std::int32_t>(), Error);
}

TEST(TensorLifetime, DroppedTensorsLiveUntilQueuedWorkFinishes) {
  Stream s;
  StreamContext ctx(s);
  Gate gate;
  gate.hold(s);
  Tensor c;
  {
    Tensor a = full({1000}, 2.0);
    Tensor b = full({1000}, 3.0);
    c = a * b;
  }  // a and b dropped while their fills and the product are still queued
  gate.open();
  EXPECT_EQ(to_vector(c), std::vector<double>(1000, 6.0));
}

TEST(TensorLifetime, FromBlobIsZeroCopyAndDeleterRunsAfterQueuedWork) {
  std::vector<double> buf = {1, 2, 3, 4, 5, 6};
  std::atomic<int> deleted{0};
  Stream s;
  StreamContext ctx(s);
  Gate gate;
  gate.hold(s);
  Tensor out;
  {
    Tensor t = from_blob(buf.data(), {2, 3}, DType::Float64, [&](void* p) {
      EXPECT_EQ(p, buf.data());
      deleted.fetch_add(1);
    });
    EXPECT_EQ(t.data_unsafe<double>(), buf.data());
    out = t + 1.0;  // queued behind the gate; t dropped at the end of the scope
  }
  EXPECT_EQ(deleted.load(), 0) << "deleter ran while queued work still used the memory";
  gate.open();
  EXPECT_EQ(to_vector(out), (std::vector<double>{2, 3, 4, 5, 6, 7}));
  s.synchronize();
  // The kernel's capture is released after it ran; synchronize() orders that before us.
  EXPECT_EQ(deleted.load(), 1);
  buf[0] = 42;  // still ours: from_blob never copied or freed it
}

TEST(TensorLifetime, FromBlobChecks) {
  alignas(8) char raw[16] = {};
  expect_error_containing([&] { from_blob(raw + 1, {2}, DType::Float32); }, {"aligned"});
  expect_error_containing([&] { from_blob(nullptr, {2}, DType::Float32); }, {"null"});
  std::int32_t v[3] = {4, 5, 6};
  Tensor t = from_blob(v, {3}, DType::Int32);
  t.fill_(9);
  t.wait();
  EXPECT_EQ(v[1], 9);  // writes go to the caller's memory
}

// Strided external memory (a numpy or DLPack view) becomes a view with those strides: the first
// element at `data`, negative and zero strides allowed, overlapping layouts refused.
TEST(TensorLifetime, FromBlobWithStridesIsAView) {
  std::vector<double> buf(12);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<double>(i);
  // buf as a [3, 4] matrix, rows reversed and every other column reversed: m[::-1, ::-2].
  std::atomic<int> deleted{0};
  {
    Tensor t = from_blob(buf.data() + 11, {3, 2}, {-4, -2}, DType::Float64, [&](void* p) {
      EXPECT_EQ(p, buf.data() + 11);  // the pointer it was given, not the lowest address
      deleted.fetch_add(1);
    });
    EXPECT_EQ(t.strides(), (Shape{-4, -2}));
    EXPECT_EQ(t.data_unsafe<double>(), buf.data() + 11);
    EXPECT_EQ(to_vector(t), (std::vector<double>{11, 9, 7, 5, 3, 1}));
    EXPECT_EQ(to_vector(sum(t, 0)), (std::vector<double>{21, 15}));
    t.copy_(arange(6, DType::Float64).reshape({3, 2}));
    t.wait();
  }
  EXPECT_EQ(deleted.load(), 1);
  EXPECT_EQ(buf, (std::vector<double>{0, 5, 2, 4, 4, 3, 6, 2, 8, 1, 10, 0}));
  // A transposed view, and a broadcast one (stride 0: read, not written).
  Tensor tr = from_blob(buf.data(), {4, 3}, {1, 4}, DType::Float64);
  EXPECT_EQ(to_vector(tr).front(), 0.0);
  EXPECT_EQ(to_vector(tr)[1], 4.0);  // tr[0, 1] = buf[4]
  Tensor wide = from_blob(buf.data(), {3, 4}, {0, 1}, DType::Float64);
  EXPECT_EQ(to_vector(wide)[8], buf[0]);
  expect_error_containing([&] { wide.fill_(1.0); }, {"expanded"});
  // Sliding windows overlap: refused, naming the layout.
  expect_error_containing(
      [&] {
        from_blob(buf.data(), {4, 3}, {2, 1}, DType::Float64);
      },
      {"[4, 3]", "[2, 1]", "share memory"});
  expect_error_containing(
      [&] {
        from_blob(buf.data(), {4, 3}, {1}, DType::Float64);
      },
      {"1 strides", "[4, 3]"});
  expect_error_containing(
      [&] {
        from_blob(buf.data(), {3, 2}, {std::numeric_limits<std::int64_t>::max(), 1},
                  DType::Float64);
      },
      {"spans more memory"});
  // Empty: any strides.
  EXPECT_EQ(from_blob(buf.data(), {0, 3}, {-5, 7}, DType::Float64).numel(), 0);
}

TEST(TensorRandom, SameSeedSameNumbersWhateverStreamOrWorkerCount) {
  test::ThreadCountGuard guard;
  std::vector<double> ref_u, ref_n, ref_u64;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    Stream s(Device{}, workers % 2 == 0 ? 0 : -1);
    StreamContext ctx(s);
    auto u = to_vector(rand({300, 401}, 1234));  // large: split across workers
    auto n = to_vector(randn({300, 401}, 1234, DType::Float64));
    auto u64 = to_vector(rand({1001}, 99, DType::Float64));
    if (ref_u.empty()) {
      ref_u = u;
      ref_n = n;
      ref_u64 = u64;
      continue;
    }
    EXPECT_EQ(u, ref_u) << workers << " workers";
    EXPECT_EQ(n, ref_n) << workers << " workers";
    EXPECT_EQ(u64, ref_u64) << workers << " workers";
  }
  EXPECT_NE(to_vector(rand({16}, 1)), to_vector(rand({16}, 2)));
}

TEST(TensorRandom, Distribution) {
  const auto u = to_vector(rand({200000}, 7));
  const auto n = to_vector(randn({200000}, 7, DType::Float64));
  double usum = 0, nsum = 0, nsq = 0;
  for (double v : u) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    usum += v;
  }
  for (double v : n) {
    ASSERT_TRUE(std::isfinite(v));
    nsum += v;
    nsq += v * v;
  }
  // Deterministic for this seed; the bounds are ~10 standard errors wide.
  EXPECT_NEAR(usum / 200000, 0.5, 0.01);
  EXPECT_NEAR(nsum / 200000, 0.0, 0.03);
  EXPECT_NEAR(nsq / 200000, 1.0, 0.03);
  // float32 randn is the float64 sequence rounded.
  const auto n32 = to_vector(randn({1000}, 7));
  for (std::size_t i = 0; i < n32.size(); ++i) EXPECT_EQ(n32[i], static_cast<float>(n[i]));
}

TEST(TensorRandom, GeneratorContinuesTheSeedSequence) {
  Generator gen(55);
  auto first = to_vector(rand({10}, gen, DType::Float64));
  auto second = to_vector(rand({10}, gen, DType::Float64));
  EXPECT_EQ(gen.offset(), 20u);
  auto whole = to_vector(rand({20}, 55, DType::Float64));
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, whole);
  gen.manual_seed(55);
  EXPECT_EQ(gen.offset(), 0u);
  EXPECT_EQ(to_vector(randn({5}, gen)), to_vector(randn({5}, 55)));
  Generator copy = gen;  // handle: shares the offset
  rand({3}, copy);
  EXPECT_EQ(gen.offset(), 8u);
}

TEST(TensorCreate, CreationRunsOnTheCurrentStream) {
  Stream s;
  Gate gate;
  gate.hold(s);
  Tensor t;
  {
    StreamContext ctx(s);
    t = ones({4});  // queued on s behind the gate: not ready yet
  }
  EXPECT_FALSE(t.ready());
  gate.open();
  t.wait();
  EXPECT_TRUE(t.ready());
  EXPECT_EQ(to_vector(t), std::vector<double>(4, 1.0));
}

}  // namespace
}  // namespace streamrt

// collective_util.h: typed buffers, deterministic inputs and a reference
// reduction for the backend test suites.
//
// Every rank can compute every other rank's input locally (InputValue is a
// pure function of dtype, op, rank and index), so each result is checked
// against an oracle computed on the spot, independent of the backend.
// Inputs are small and exactly representable in every dtype (multiples of
// 0.25 within [-4, 4], small integers, and for PROD values whose products
// stay small), so sums and products are exact in f16/bf16 too and only AVG
// needs a rounding tolerance.
#ifndef SYNCLINE_TESTS_BACKENDS_COLLECTIVE_UTIL_H_
#define SYNCLINE_TESTS_BACKENDS_COLLECTIVE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "syncline/communicator.h"
#include "syncline/types.h"

namespace syncline::testing {

// A communicator over `backend` from the rendezvous environment RunRanks()
// sets, with `timeout` as init and op deadline; null (and a gtest failure
// naming why) if it could not be created.
std::unique_ptr<Communicator> ConnectForTest(const std::string& backend,
                                             absl::Duration timeout);

inline const std::vector<DataType>& AllDataTypes() {
  static const std::vector<DataType> kAll = {
      DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
      DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64};
  return kAll;
}

inline const std::vector<ReduceOp>& AllReduceOps() {
  static const std::vector<ReduceOp> kAll = {
      ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg};
  return kAll;
}

// Element counts each op is checked with: empty, one, odd, and about 2 MiB
// (plus a few elements, so that chunks do not divide evenly).
std::vector<size_t> TestCounts(DataType dtype);

// TypedBuffer: `count` elements of `dtype`, read and written as doubles.
class TypedBuffer {
 public:
  TypedBuffer(DataType dtype, size_t count);
  void Set(size_t i, double value);
  double Get(size_t i) const;
  BufferView View() { return syncline::View(bytes_.data(), count_, dtype_); }
  // A view of elements [offset, offset + count).
  BufferView Slice(size_t offset, size_t count);
  size_t count() const { return count_; }
  DataType dtype() const { return dtype_; }

 private:
  DataType dtype_;
  size_t count_;
  size_t elem_;
  std::vector<uint8_t> bytes_;
};

// The value rank `rank` contributes at `index` for a reduction with `op`
// (any op but PROD gives the same values; use kSum for data movement).
double InputValue(DataType dtype, ReduceOp op, int rank, size_t index);

// Fills `buffer` with InputValue(dtype, op, rank, first + i).
void FillInput(TypedBuffer& buffer, ReduceOp op, int rank, size_t first = 0);

// The reduction over ranks 0..size-1 of InputValue(dtype, op, r, index), in
// the dtype's semantics (AVG on integers truncates toward zero).
double ExpectedReduce(DataType dtype, ReduceOp op, int size, size_t index);

// Compares got[i] with want(i) for every i < got.count(). Exact for
// integers and data movement (`exact`); otherwise a relative tolerance that
// covers one rounding of the dtype. Returns "" on success, or a description
// of the first mismatches and how many there were.
template <typename WantFn>
std::string Compare(const TypedBuffer& got, WantFn want, bool exact);

double Tolerance(DataType dtype);

template <typename WantFn>
std::string Compare(const TypedBuffer& got, WantFn want, bool exact) {
  const double tol = exact ? 0.0 : Tolerance(got.dtype());
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.count(); ++i) {
    const double g = got.Get(i);
    const double w = want(i);
    const double scale = w < 0 ? -w : w;
    const double diff = g > w ? g - w : w - g;
    if (!(diff <= tol * (scale > 1.0 ? scale : 1.0))) {
      if (bad < 3) {
        first += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " +
                 std::to_string(w) + ";";
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(got.count()) +
         " elements differ (" + DataTypeName(got.dtype()) + "):" + first;
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_BACKENDS_COLLECTIVE_UTIL_H_

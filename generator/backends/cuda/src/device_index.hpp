// The index plans of Floorline's own CUDA kernels (device_kernels.cu), host-side and free of CUDA
// headers so that tests without a GPU or toolkit headers check them: the strided copy's and the
// broadcast's dims and strides, and their coalescing. Shapes and strides in elements.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace floorline::kernels::device {

constexpr int kMaxRank = 8;

// dst[dst_offset + Σ i_k·dst_strides[k]] = src[src_offset + Σ i_k·src_strides[k]] for every index i of
// `dims`: Transpose, Slice, Concat and Split pieces, Expand (stride 0), Pad's interior, layouts.
struct StridedCopy {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t src_strides[kMaxRank] = {};
  int64_t dst_strides[kMaxRank] = {};
  int64_t src_offset = 0, dst_offset = 0;
};
// The copy of `dims` (rank at most kMaxRank: the caller checks) with these strides and offsets.
inline StridedCopy make_strided_copy(const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& src_strides, int64_t src_offset,
                                     const std::vector<int64_t>& dst_strides, int64_t dst_offset) {
  StridedCopy c;
  c.rank = static_cast<int>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    c.dims[k] = dims[k];
    c.src_strides[k] = src_strides[k];
    c.dst_strides[k] = dst_strides[k];
  }
  c.src_offset = src_offset;
  c.dst_offset = dst_offset;
  return c;
}

// The same index space in the fewest dims: dims of extent 1 dropped, and each dim merged into the
// one before it where every stride array walks the pair as one run (stride[k-1] = stride[k] ×
// dims[k]: a Slice along the last axis of [B, S, 3E] is 2-D, a contiguous copy 1-D). The kernels
// spend a division per dim and element on their index, so this is most of their speed
// (docs/BACKENDS.md, "Floorline's CUDA kernels"). `strides` holds `count` arrays of `rank` strides
// each; returns the new rank (at least 1; a dims array of extent 1 everywhere becomes [1]).
inline int coalesce_dims(int rank, int64_t* dims, int64_t* const* strides, int count) {
  int out = 0;
  for (int k = 0; k < rank; ++k) {
    if (dims[k] == 1) continue;
    bool joins = out > 0;
    for (int a = 0; a < count && joins; ++a) joins = strides[a][out - 1] == strides[a][k] * dims[k];
    if (joins) {
      dims[out - 1] *= dims[k];
      for (int a = 0; a < count; ++a) strides[a][out - 1] = strides[a][k];
      continue;
    }
    dims[out] = dims[k];
    for (int a = 0; a < count; ++a) strides[a][out] = strides[a][k];
    ++out;
  }
  if (out == 0) {
    dims[0] = 1;
    for (int a = 0; a < count; ++a) strides[a][0] = 0;
    out = 1;
  }
  for (int k = out; k < rank; ++k) {
    dims[k] = 0;
    for (int a = 0; a < count; ++a) strides[a][k] = 0;
  }
  return out;
}
inline StridedCopy coalesced(StridedCopy c) {
  int64_t* strides[2] = {c.src_strides, c.dst_strides};
  c.rank = coalesce_dims(c.rank, c.dims, strides, 2);
  return c;
}

// Whether every element offset `offset + Σ i_k·strides[k]` over `dims` fits in 32 bits (signed): the
// kernels then index in 32-bit arithmetic, whose division is several times cheaper than 64-bit.
inline bool fits_int32(int rank, const int64_t* dims, const int64_t* strides, int64_t offset) {
  int64_t lo = offset, hi = offset;
  for (int k = 0; k < rank; ++k) {
    const int64_t reach = (dims[k] - 1) * strides[k];
    (reach < 0 ? lo : hi) += reach;
  }
  return lo >= 0 && hi <= std::numeric_limits<int32_t>::max();
}

// y[i] = op(a[Σ i_k·a_strides[k]], b[Σ i_k·b_strides[k]]) over `dims` (stride 0: broadcast).
struct Broadcast {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};
// The same broadcast in the fewest dims (coalesce_dims over a's and b's strides; y is row-major over
// dims, which merges wherever a and b do).
inline Broadcast coalesced(Broadcast s) {
  int64_t* strides[2] = {s.a_strides, s.b_strides};
  s.rank = coalesce_dims(s.rank, s.dims, strides, 2);
  return s;
}

}  // namespace floorline::kernels::device

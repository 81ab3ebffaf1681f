// Reference computations that live in their own files (one file per op family), for
// reference.cpp's kind table.
#pragma once

#include <vector>

#include "floorline/kernels/reference.hpp"

namespace floorline::kernels::reference_detail {

// LSTM, GRU and RNN (reference_recurrent.cpp): the ONNX operator equations
// (onnx/docs/Operators.md), every direction, layout 0 and 1, sequence_lens (an operand with no
// data means every sequence runs its full length, as the kernels time it), initial states,
// peepholes, clip, input_forget, linear_before_reset and the activations Sigmoid, Tanh and Relu.
// Outputs in the problem's output order (roles y/y0 = Y, y1 = Y_h, y2 = Y_c).
Result<std::vector<HostTensor>> recurrent(const Problem& p, const std::vector<HostTensor>& in);

// CumSum, ArgMax/ArgMin and Mean (reference_misc.cpp).
Result<std::vector<HostTensor>> cumsum(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> arg_extreme(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> mean(const Problem& p, const std::vector<HostTensor>& in);

// TopK (outputs Values, Indices), GatherND, NonZero and NonMaxSuppression
// (reference_detection.cpp). NonZero and NonMaxSuppression return the count the data gives.
Result<std::vector<HostTensor>> topk(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> gather_nd(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> nonzero(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> non_max_suppression(const Problem& p, const std::vector<HostTensor>& in);

// RoiAlign, GridSample and ScatterElements (reference_sampling.cpp).
Result<std::vector<HostTensor>> roi_align(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> grid_sample(const Problem& p, const std::vector<HostTensor>& in);
Result<std::vector<HostTensor>> scatter_elements(const Problem& p, const std::vector<HostTensor>& in);

}  // namespace floorline::kernels::reference_detail

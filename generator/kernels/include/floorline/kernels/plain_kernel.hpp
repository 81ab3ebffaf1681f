// floorline/kernels/plain_kernel.hpp — a kernel over plain row-major f32 buffers: aligned buffers,
// random fills, verification against the reference and replay ports. The base of the OpenBLAS
// kernels and of the recurrent formulation both CPU backends share (standard_recurrent.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/random.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {

// 64-byte aligned floats, zeroed; placed by the factory's PlacementScope (buffer.hpp).
struct PlainBuffer {
  HostBuffer own;
  float* data = nullptr;  // own storage, or a buffer bound by replay
  int64_t elements = 0;
  explicit PlainBuffer(int64_t n = 0)
      : own((static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64),
        data(static_cast<float*>(own.data())),
        elements(n) {}
};

// One buffer per operand of the Problem, inputs filled at random; verify() runs on fresh values of
// the ports (constants keep theirs) and compares every output with the reference element by element
// (f32, strict fp32 math: verify_tolerance(p_)).
class PlainKernel : public Kernel {
 public:
  explicit PlainKernel(Problem p) : p_(std::move(p)) {
    for (const auto& op : p_.inputs) in_.emplace_back(elements(op.shape));
    for (const auto& op : p_.outputs) out_.emplace_back(elements(op.shape));
    for (size_t k = 0; k < in_.size(); ++k) fill_input(k, 11 * k + 3);
  }
  std::string implementation() const override { return impl_; }
  int64_t workspace_bytes() const override { return workspace_; }
  Status verify() override {
    try {
      std::vector<HostTensor> inputs;
      for (size_t k = 0; k < in_.size(); ++k) {
        if (is_port(k))  // constants keep the values the case was built with
          fill_input(k, 1000 + k);
        inputs.push_back(
            {p_.inputs[k].shape, std::vector<float>(in_[k].data, in_[k].data + in_[k].elements)});
      }
      run();
      auto expected = reference(p_, inputs, {});
      if (!expected) return expected.error();
      for (size_t k = 0; k < out_.size() && k < expected->size(); ++k)
        FL_TRY(compare_output(out_[k].data, (*expected)[k], verify_tolerance(p_)));
      return {};
    } catch (const std::exception& e) {
      return error_of(e);
    }
  }
  std::optional<Port> port(bool output, size_t k) const override {
    const auto& list = output ? out_ : in_;
    if (k >= list.size() || (!output && !is_port(k))) return std::nullopt;
    return Port{list[k].data, list[k].elements * static_cast<int64_t>(sizeof(float)), "plain"};
  }
  Status bind(bool output, size_t k, void* data) override {
    auto& list = output ? out_ : in_;
    if (k >= list.size() || (!output && !is_port(k)))
      return make_error("{} {} of this case cannot be wired to another case", output ? "output" : "input", k);
    list[k].data = static_cast<float*>(data);
    return {};
  }

 protected:
  // Input k uniform at random from `seed`, on ±fill_half_width(p_, k) (problem.hpp: weights scaled
  // by their fan-in, everything else on [-1, 1)).
  void fill_input(size_t k, uint64_t seed) {
    const float a = fill_half_width(p_, k);
    fill_uniform(in_[k].data, in_[k].elements, seed, -a, 2 * a);
  }
  // Constants (a convolution's weights and bias) are not wired by replay.
  virtual bool is_port(size_t k) const { return k < in_.size(); }
  Problem p_;
  std::vector<PlainBuffer> in_, out_;
  std::string impl_;
  int64_t workspace_ = 0;
};

}  // namespace floorline::kernels

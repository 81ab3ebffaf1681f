// The generic oneDNN Kernel: allocates, initialises, runs and verifies the primitives of a Build;
// shared by the factory (onednn_kernel.cpp) and replay's conversions (conversion.cpp).
#pragma once

#include <omp.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/reference.hpp"
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

// --- the kernel -----------------------------------------------------------------------------------

struct Step {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  std::vector<std::pair<dnnl::reorder, std::pair<memory, memory>>>
      in_conversions;  // view → format, before timing
  std::vector<std::pair<dnnl::reorder, std::pair<memory, memory>>>
      out_conversions;                              // format → view, for verify
  std::vector<std::pair<memory, memory>> prefills;  // (prefill tensor view, dst memory in its format)
  memory scratchpad;
  bool once = false;  // StepDef::once: run by initialise(), not by run()
};

class OnednnKernel final : public Kernel {
 public:
  // `problem` is what verify() computes the reference of.
  OnednnKernel(Problem problem, Build b, std::string impl, dt type, uint64_t seed)
      : problem_(std::move(problem)), b_(std::move(b)), impl_(std::move(impl)), type_(type), seed_(seed) {}

  Status init() {
    user_.resize(b_.tensors.size());
    dev_.resize(b_.tensors.size());
    used_.assign(b_.tensors.size(), false);
    for (const auto& s : b_.steps)
      for (const auto& a : s.args) {
        used_[a.tensor] = true;
        if (a.prefill >= 0) used_[a.prefill] = true;
      }
    for (size_t t = 0; t < b_.tensors.size(); ++t)  // the source of a reciprocal (read, never an argument)
      if (used_[t] && b_.tensors[t].reciprocal_of >= 0)
        used_[static_cast<size_t>(b_.tensors[t].reciprocal_of)] = true;
    for (size_t t = 0; t < b_.tensors.size(); ++t)
      if (!b_.tensors[t].values.empty()) used_[t] = true;
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      if (!used_[t]) continue;
      const auto& td = b_.tensors[t];
      const dims d = td.shape.empty() ? dims{1} : dims(td.shape.begin(), td.shape.end());
      user_[t] = host_memory(memory::desc(d, dt::f32, plain_strides(d)));
      const dt tt = tensor_type(td);
      dev_[t] = tt == dt::f32 ? user_[t] : host_memory(memory::desc(d, tt, plain_strides(d)));
    }
    for (const auto& sd : b_.steps) {
      Step s;
      s.once = sd.once;
      s.prim = dnnl::primitive(sd.pd().get());
      for (const auto& a : sd.args) {
        const auto& td = b_.tensors[a.tensor];
        const dt tt = tensor_type(td);
        const size_t esize = memory::data_type_size(tt);
        const memory::desc want = sd.pd().query_md(dnnl::query::exec_arg_md, a.arg);
        if (a.whole) {
          s.args[a.arg] = window(s, a, want);
          continue;
        }
        auto* base = static_cast<char*>(dev_[a.tensor].get_data_handle()) +
                     a.view.offset * static_cast<int64_t>(esize);
        memory view(memory::desc(a.view.d, tt, a.view.strides), cpu_engine(), base);
        memory m = view;
        if (want.get_size() != 0 && want != view.get_desc()) {
          // An input another step reads through the same view in the same format shares its
          // conversion (the parts of a split case read one input, or one set of weights).
          const Use* same = nullptr;
          if (!td.is_output)
            for (const auto& u : uses_)
              if (u.tensor == a.tensor && u.converted && u.view.get_desc() == view.get_desc() &&
                  u.offset_bytes == a.view.offset * static_cast<int64_t>(esize) &&
                  u.converted.get_desc() == want)
                same = &u;
          if (same) {
            s.args[a.arg] = same->converted;
            continue;
          }
          m = host_memory(want);
          if (td.is_output)
            s.out_conversions.push_back({dnnl::reorder(m, view), {m, view}});
          else
            s.in_conversions.push_back({dnnl::reorder(view, m), {view, m}});
        }
        uses_.push_back(
            {a.tensor, view, a.view.offset * static_cast<int64_t>(esize), m == view ? memory() : m, {}});
        if (a.prefill >= 0) {
          memory src(memory::desc(a.view.d, tt, plain_strides(a.view.d)), cpu_engine(),
                     dev_[a.prefill].get_data_handle());
          s.prefills.push_back({src, m});
        }
        s.args[a.arg] = m;
      }
      const memory::desc sp = sd.pd().scratchpad_desc();
      if (sp.get_size() > 0) {
        s.scratchpad = host_memory(sp);
        s.args[DNNL_ARG_SCRATCHPAD] = s.scratchpad;
        workspace_ += static_cast<int64_t>(sp.get_size());
      }
      // Outputs the primitive produces that Floorline does not read (statistics, workspace).
      for (int arg : {DNNL_ARG_WORKSPACE, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE}) {
        if (s.args.count(arg)) continue;
        const memory::desc md = sd.pd().query_md(dnnl::query::exec_arg_md, arg);
        if (md.get_size() > 0) s.args[arg] = host_memory(md);
      }
      steps_.push_back(std::move(s));
    }
    if (b_.parallel)
      for (size_t i = 0; i < steps_.size(); ++i)
        if (!steps_[i].once) {
          run_steps_.push_back(i);
          streams_.emplace_back(cpu_engine());
        }
    initialise(seed_);
    return {};
  }

  void run() override {
    if (b_.parallel) {
      run_parallel();
      return;
    }
    auto& strm = cpu_stream();
    for (auto& s : steps_)
      if (!s.once) s.prim.execute(strm, s.args);
    strm.wait();
  }
  std::string implementation() const override { return impl_; }
  int64_t workspace_bytes() const override { return workspace_; }
  // Every step's scratchpad at `data`: the steps run one after another, so they may share it
  // (a split case's run at the same time: each keeps its own).
  bool share_workspace(void* data) override {
    if (b_.parallel) return false;
    bool any = false;
    for (auto& s : steps_)
      if (s.scratchpad) {
        s.scratchpad.set_data_handle(data);
        any = true;
      }
    return any;
  }

  // Every own buffer that no argument of a step run() executes points into: the plain copies
  // (user_, dev_) of an operand converted at build time or bound elsewhere, a converted copy whose
  // handle bind() moved, a scratchpad share_workspace() replaced.
  // Its ports' former buffers are among them (every port's memory is one of buffers_): `former`
  // and `now` add nothing. Each buffer is given back once (released_).
  int64_t release_unused_buffers(const std::vector<Port>& former, const std::vector<Port>& now) override {
    (void)former;
    (void)now;
    std::vector<std::pair<uintptr_t, uintptr_t>> used;
    for (const auto& s : steps_) {
      if (s.once) continue;
      for (const auto& [arg, m] : s.args) {
        const auto at = reinterpret_cast<uintptr_t>(m.get_data_handle());
        if (at != 0) used.emplace_back(at, at + m.get_desc().get_size());
      }
    }
    int64_t released = 0;
    released_.resize(buffers_.size(), false);
    for (size_t k = 0; k < buffers_.size(); ++k) {
      const HostBuffer& b = buffers_[k];
      const auto at = reinterpret_cast<uintptr_t>(b.data());
      const bool touched = std::any_of(
          used.begin(), used.end(), [&](const auto& r) { return r.first < at + b.bytes() && at < r.second; });
      if (touched || released_[k]) continue;
      released_[k] = true;
      released += static_cast<int64_t>(release_pages(b.data(), b.bytes()));
    }
    return released;
  }

  // A port is the memory run() itself reads or writes for the operand: the implementation's own
  // (blocked) buffer when the operand is converted once at build time, else the plain buffer.
  // An operand that several primitive arguments read, one of them through a conversion, has none.
  std::optional<Port> port(bool output, size_t k) const override {
    const memory* m = port_memory(output, k);
    if (!m) return std::nullopt;
    const memory::desc md = m->get_desc();
    const size_t t = output ? b_.n_inputs + k : k;
    void* data = m == &dev_[t] && bound_.count(t) ? bound_.at(t) : m->get_data_handle();
    return Port{data, static_cast<int64_t>(md.get_size()), port_layout(md)};
  }

  Status bind(bool output, size_t k, void* data) override {
    if (!port_memory(output, k))
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    const int t = static_cast<int>(output ? b_.n_inputs + k : k);
    bound_[static_cast<size_t>(t)] = data;
    for (auto& u : uses_) {
      if (u.tensor != t) continue;
      if (u.converted)
        u.converted.set_data_handle(data);
      else
        u.view.set_data_handle(static_cast<char*>(data) + u.offset_bytes);
      for (auto& [m, offset] : u.windows) m.set_data_handle(static_cast<char*>(data) + offset);
    }
    return {};
  }

  // The memory of port(output, k), or nullptr (see port()).
  const memory* port_memory(bool output, size_t k) const {
    if (k >= (output ? b_.n_outputs : b_.n_inputs)) return nullptr;
    const int t = static_cast<int>(output ? b_.n_inputs + k : k);
    if (!used_[static_cast<size_t>(t)]) return nullptr;
    const Use* converted = nullptr;
    int n = 0;
    for (const auto& u : uses_)
      if (u.tensor == t) {
        ++n;
        if (u.converted) converted = &u;
      }
    if (converted) return n == 1 ? &converted->converted : nullptr;
    return &dev_[static_cast<size_t>(t)];
  }

  Status verify() override {
    if (!b_.not_verifiable.empty()) return make_error(Disposition::kNotVerifiable, "{}", b_.not_verifiable);
    try {
      return compare_with_reference();
    } catch (const dnnl::error& e) {
      return make_error("oneDNN: {}", e.what());
    }
  }

 private:
  Status compare_with_reference() {
    initialise(seed_ + 7);
    run();
    auto& strm = cpu_stream();
    for (auto& s : steps_)
      for (auto& [r, mm] : s.out_conversions) r.execute(strm, mm.first, mm.second);
    for (size_t t = 0; t < b_.tensors.size(); ++t)
      if (used_[t] && b_.tensors[t].is_output && dev_[t] != user_[t])
        dnnl::reorder(dev_[t], user_[t]).execute(strm, dev_[t], user_[t]);
    strm.wait();
    std::vector<HostTensor> ins, extras;
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      if (b_.tensors[t].is_output) continue;
      HostTensor h{b_.tensors[t].shape, {}};
      if (used_[t]) {
        const float* p = static_cast<const float*>(user_[t].get_data_handle());
        h.data.assign(p, p + elements(h.shape));
      }
      (t < b_.n_inputs ? ins : extras).push_back(std::move(h));
    }
    FL_ASSIGN_OR_RETURN(auto ref, reference(problem_, ins, extras));
    const DType storage = type_ == dt::f32    ? DType::kF32
                          : type_ == dt::bf16 ? DType::kBF16
                          : type_ == dt::f16  ? DType::kF16
                                              : DType::kInt8;
    const Tolerance tol = verify_tolerance(problem_, storage, own_math_mode(storage), b_.fast_algorithm);
    for (size_t k = 0; k < b_.n_outputs; ++k) {
      const size_t t = b_.n_inputs + k;
      if (!used_[t] || k >= ref.size()) continue;
      if (auto st = compare_output(static_cast<const float*>(user_[t].get_data_handle()), ref[k], tol); !st)
        return st.error().with_context(fmt::format("output {}", k));
    }
    return {};
  }

  // Fresh random inputs in every format the primitives read them in.
  void initialise(uint64_t seed) {
    auto& strm = cpu_stream();
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      if (!used_[t]) continue;
      const auto& td = b_.tensors[t];
      const Fill f = td.is_output ? Fill::kUniform : td.fill;
      float* data = static_cast<float*>(user_[t].get_data_handle());
      const int64_t n = elements(td.shape);
      if (f == Fill::kInteger) {
        fill_integers(data, n, td.lo, td.hi, seed + t * 131);
      } else {
        fill_random(data, n, f, seed + t * 131);
        if (td.scale != 1.f)
          for (int64_t i = 0; i < n; ++i) data[i] *= td.scale;
      }
      if (!td.values.empty()) std::copy(td.values.begin(), td.values.end(), data);
      if (td.reciprocal_of >= 0) {  // the reciprocal tensor comes after its source (filled already)
        const float* from =
            static_cast<const float*>(user_[static_cast<size_t>(td.reciprocal_of)].get_data_handle());
        for (int64_t i = 0; i < n; ++i) data[i] = 1.f / from[i];
      }
      if (dev_[t] != user_[t]) {
        dnnl::reorder(user_[t], dev_[t]).execute(strm, user_[t], dev_[t]);
        // The reference reads what the kernel reads: values rounded to the case's type.
        dnnl::reorder(dev_[t], user_[t]).execute(strm, dev_[t], user_[t]);
      }
    }
    for (auto& s : steps_) {
      if (!s.once) continue;
      for (auto& [r, mm] : s.in_conversions) r.execute(strm, mm.first, mm.second);
      s.prim.execute(strm, s.args);
    }
    for (auto& s : steps_) {
      if (s.once) continue;
      for (auto& [r, mm] : s.in_conversions) r.execute(strm, mm.first, mm.second);
      for (auto& [src, dst] : s.prefills)
        if (src != dst) dnnl::reorder(src, dst).execute(strm, src, dst);
    }
    strm.wait();
  }

  // The memory a split case's part reads or writes for `a` (ArgDef::whole): `want` at the part's
  // offset into the tensor held whole, on the plain buffer where the whole format is plain, else on
  // one converted buffer that every part's window shares, converted once (inputs: before timing,
  // by the first step that reads it; outputs: for verify()), and prefilled once for a fused sum.
  memory window(Step& s, const ArgDef& a, const memory::desc& want) {
    const auto& td = b_.tensors[a.tensor];
    const dt tt = tensor_type(td);
    const dims d = td.shape.empty() ? dims{1} : dims(td.shape.begin(), td.shape.end());
    const memory::desc plain_md(d, tt, plain_strides(d));
    Use* u = nullptr;
    for (auto& candidate : uses_)
      if (candidate.tensor == a.tensor && !candidate.windows.empty()) u = &candidate;
    if (!u) {
      memory view(plain_md, cpu_engine(), dev_[a.tensor].get_data_handle());
      memory converted;
      if (*a.whole != plain_md) {
        converted = host_memory(*a.whole);
        if (td.is_output)
          s.out_conversions.push_back({dnnl::reorder(converted, view), {converted, view}});
        else
          s.in_conversions.push_back({dnnl::reorder(view, converted), {view, converted}});
      }
      if (a.prefill >= 0)  // a fused sum: the whole output first filled from the summed tensor
        s.prefills.push_back({memory(plain_md, cpu_engine(), dev_[a.prefill].get_data_handle()),
                              converted ? converted : view});
      uses_.push_back({a.tensor, view, 0, converted, {}});
      u = &uses_.back();
    }
    const memory& whole = u->converted ? u->converted : u->view;
    memory m(want, cpu_engine(), static_cast<char*>(whole.get_data_handle()) + a.whole_offset_bytes);
    u->windows.push_back({m, a.whole_offset_bytes});
    return m;
  }

  // Build::parallel: step i on OpenMP thread i, each on its own stream, all at the same time.
  void run_parallel() {
    const int n = static_cast<int>(run_steps_.size());
#pragma omp parallel num_threads(n)
    for (int i = omp_get_thread_num(); i < n; i += omp_get_num_threads()) {
      Step& s = steps_[run_steps_[static_cast<size_t>(i)]];
      s.prim.execute(streams_[static_cast<size_t>(i)], s.args);
      streams_[static_cast<size_t>(i)].wait();
    }
  }

  // A memory object on a HostBuffer of this kernel (buffer.hpp: placed by the factory's
  // PlacementScope, on huge pages where asked and allowed), instead of oneDNN's own allocation.
  memory host_memory(const memory::desc& md) {
    buffers_.emplace_back(md.get_size());
    return memory(md, cpu_engine(), buffers_.back().data());
  }

  dt tensor_type(const TensorDef& td) const {
    return td.type ? *td.type : td.f32_only ? dt::f32 : type_;
  }

  Problem problem_;
  Build b_;
  std::string impl_;
  dt type_;
  uint64_t seed_;
  std::vector<HostBuffer> buffers_;  // declared before every memory object on them: freed last
  std::vector<bool> released_;       // buffers_ given back by release_unused_buffers
  std::vector<memory> user_, dev_;
  std::vector<bool> used_;
  std::vector<Step> steps_;
  int64_t workspace_ = 0;
  // Every primitive argument that reads or writes a data tensor: the plain view of the tensor's
  // buffer (at offset_bytes), and the implementation's own buffer when it converts the tensor.
  struct Use {
    int tensor = 0;
    memory view;
    int64_t offset_bytes = 0;
    memory converted;  // empty when the primitive uses the view directly
    // A tensor held whole (ArgDef::whole): the parts' memories in it, at their byte offsets.
    std::vector<std::pair<memory, int64_t>> windows;
  };
  std::vector<size_t> run_steps_;      // Build::parallel: the steps run() runs (not `once`)
  std::vector<dnnl::stream> streams_;  // ... and a stream for each
  std::vector<Use> uses_;
  std::map<size_t, void*> bound_;  // plain tensors bound to outside buffers (replay)
};

}  // namespace floorline::kernels::onednn_detail

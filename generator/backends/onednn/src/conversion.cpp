// Replay's layout conversions between two oneDNN cases: make_onednn_conversion and its kernel.
#include "kernel.hpp"

namespace floorline::kernels {

using namespace onednn_detail;

namespace {

// Replay's layout conversion: reorders from a producer's output buffer into a consumer's input
// buffer, through a plain buffer when both are blocked with different dims.
class ConversionKernel final : public Kernel {
 public:
  void add(memory from, memory to) {
    reorders_.push_back({dnnl::reorder(from, to), {from, to}});
    impl_ += (impl_.empty() ? "" : " + ") + format_name(from.get_desc()) + ">" + format_name(to.get_desc());
  }
  void keep(memory m) { owned_.push_back(std::move(m)); }
  void set_destination(memory m) { dest_ = std::move(m); }
  std::optional<Port> port(bool output, size_t k) const override {
    if (!output || k != 0 || !dest_) return std::nullopt;
    const memory::desc md = dest_.get_desc();
    return Port{dest_.get_data_handle(), static_cast<int64_t>(md.get_size()), port_layout(md)};
  }
  void run() override {
    auto& strm = cpu_stream();
    for (auto& [r, mm] : reorders_) r.execute(strm, mm.first, mm.second);
    strm.wait();
  }
  std::string implementation() const override { return "reorder " + impl_; }
  int64_t workspace_bytes() const override { return 0; }
  Status verify() override {
    return make_error(Disposition::kNotVerifiable, "a layout conversion has no ONNX counterpart");
  }

 private:
  std::vector<std::pair<dnnl::reorder, std::pair<memory, memory>>> reorders_;
  std::vector<memory> owned_;
  memory dest_;
  std::string impl_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_onednn_conversion(const PortRef& from_ref, const PortRef& to_ref) {
  const auto* p = dynamic_cast<const OnednnKernel*>(from_ref.kernel);
  const auto* c = dynamic_cast<const OnednnKernel*>(to_ref.kernel);
  if (!p && !c)
    return make_error(Disposition::kUnsupported, "a oneDNN conversion has a oneDNN case on one side");
  const memory* from_port = p ? p->port_memory(from_ref.output, from_ref.index) : nullptr;
  const memory* to_port = c ? c->port_memory(to_ref.output, to_ref.index) : nullptr;
  if ((p && !from_port) || (c && !to_port))
    return make_error(Disposition::kUnsupported, "no port to convert between");
  // The other side, another backend's case (Floorline's concat, an OpenBLAS GEMM, XNNPACK's NHWC
  // operators...), must hold its operand plain, in a blocked layout named as oneDNN's (Floorline's
  // concat@blocked<B>c), or channels-last of the oneDNN side's dims (XNNPACK's), f32
  // (those backends' only type), of the oneDNN side's element count: it is then seen with the
  // oneDNN side's dims (a reshape of a plain buffer, as between oneDNN cases below).
  auto foreign = [](const PortRef& ref, const memory::desc& other) -> Result<memory::desc> {
    const auto port = ref.kernel->port(ref.output, ref.index);
    if (!port) return make_error(Disposition::kUnsupported, "the other case's operand is no port");
    // Floorline's blocked concat names its ports as oneDNN's blocked layouts are named.
    const memory::dims dims = other.dims();
    memory::desc md;
    if (port->layout == "plain")
      md = memory::desc(other.dims(), memory::data_type::f32, plain_strides(other.dims()));
    else if (dims.size() == 4 && port->layout == blocked_channels_layout(16, dims))
      md = memory::desc(other.dims(), memory::data_type::f32, memory::format_tag::aBcd16b);
    else if (dims.size() == 4 && port->layout == blocked_channels_layout(8, dims))
      md = memory::desc(other.dims(), memory::data_type::f32, memory::format_tag::aBcd8b);
    else if (port->layout == channels_last_layout(dims))  // XNNPACK's NHWC (and NWC, NDHWC) ports
      md = memory::desc(other.dims(), memory::data_type::f32,
                        dims.size() == 3   ? memory::format_tag::acb
                        : dims.size() == 4 ? memory::format_tag::acdb
                                           : memory::format_tag::acdeb);
    else
      return make_error(Disposition::kUnsupported, "the other case's operand is in {}", port->layout);
    if (static_cast<int64_t>(md.get_size()) != port->bytes)
      return make_error(Disposition::kUnsupported,
                        "{} bytes of the other case's operand cannot meet {} f32 elements", port->bytes,
                        md.get_size() / sizeof(float));
    return md;
  };
  memory::desc fd, td;
  if (p) fd = from_port->get_desc();
  if (c) td = to_port->get_desc();
  if (!p) {
    FL_ASSIGN_OR_RETURN(fd, foreign(from_ref, td));
  }
  if (!c) {
    FL_ASSIGN_OR_RETURN(td, foreign(to_ref, fd));
  }
  auto count = [](const memory::desc& d) {
    int64_t n = 1;
    for (auto x : d.dims()) n *= x;
    return n;
  };
  if (count(fd) != count(td) || fd.data_type() != td.data_type())
    return make_error(Disposition::kUnsupported, "{} elements of {} cannot feed {} elements of {}", count(fd),
                      dtype_name(fd.data_type()), count(td), dtype_name(td.data_type()));
  try {
    auto k = std::make_unique<ConversionKernel>();
    const memory source(fd, cpu_engine(), from_ref.data);
    const memory* from = &source;
    const memory dest = to_ref.data ? memory(td, cpu_engine(), to_ref.data) : memory(td, cpu_engine());
    const memory* to = &dest;
    k->set_destination(dest);
    if (fd.dims() == td.dims()) {
      k->add(*from, *to);
    } else if (is_plain(fd)) {  // a reshape of a plain buffer: the same bytes seen with the consumer's dims
      k->add(memory(memory::desc(td.dims(), td.data_type(), plain_strides(td.dims())), cpu_engine(),
                    from->get_data_handle()),
             *to);
    } else if (is_plain(td)) {
      k->add(*from, memory(memory::desc(fd.dims(), fd.data_type(), plain_strides(fd.dims())), cpu_engine(),
                           to->get_data_handle()));
    } else {  // blocked → plain (producer's dims) → blocked (consumer's dims)
      memory tmp(memory::desc(fd.dims(), fd.data_type(), plain_strides(fd.dims())), cpu_engine());
      k->add(*from, tmp);
      k->add(memory(memory::desc(td.dims(), td.data_type(), plain_strides(td.dims())), cpu_engine(),
                    tmp.get_data_handle()),
             *to);
      k->keep(tmp);
    }
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return make_error(Disposition::kUnsupported, "oneDNN has no reorder for this conversion: {}", e.what());
  }
}

}  // namespace floorline::kernels

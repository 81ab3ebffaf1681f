#include "layers_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/output.hpp"
#include "floorline/model_processor/model.hpp"
#include "floorline/model_processor/zoo.hpp"
#include "validate.hpp"

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary
namespace {

using mp::CostClass;
using mp::ModelIR;

struct ModelRow {
  const ModelIR* ir;
  int64_t compute = 0, view = 0, host = 0, unsupported = 0, control = 0, unique = 0;
};

ModelRow model_row(const ModelIR& m) {
  ModelRow r{&m};
  std::set<std::string> keys;
  for (const auto& l : m.layers) {
    switch (l.cost) {
      case CostClass::kCompute:
        ++r.compute;
        break;
      case CostClass::kView:
        ++r.view;
        break;
      case CostClass::kHost:
        ++r.host;
        break;
      case CostClass::kUnsupported:
        ++r.unsupported;
        break;
      case CostClass::kControl:
        ++r.control;
        break;
    }
    if (l.cost_bearing() && l.shapes_known) keys.insert(l.key);
  }
  r.unique = static_cast<int64_t>(keys.size());
  return r;
}

const std::vector<Field<ModelRow>>& model_fields() {
  static const std::vector<Field<ModelRow>> f = {
      {"model", [](const ModelRow& r) { return text_cell(r.ir->name); }},
      {"batch", [](const ModelRow& r) { return int_cell(r.ir->batch); }},
      {"nodes", [](const ModelRow& r) { return int_cell(r.ir->node_count); }},
      {"layers", [](const ModelRow& r) { return int_cell(r.compute + r.unsupported); }},
      {"compute", [](const ModelRow& r) { return int_cell(r.compute); }},
      {"unsupported", [](const ModelRow& r) { return int_cell(r.unsupported); }},
      {"view", [](const ModelRow& r) { return int_cell(r.view); }},
      {"host", [](const ModelRow& r) { return int_cell(r.host); }},
      {"unique", [](const ModelRow& r) { return int_cell(r.unique); }},
      {"gflops",
       [](const ModelRow& r) { return float_cell(static_cast<double>(r.ir->total_flops()) / 1e9, 3); }},
      {"mbytes",
       [](const ModelRow& r) { return float_cell(static_cast<double>(r.ir->total_bytes()) / 1e6, 1); }},
      {"process_ms", [](const ModelRow& r) { return float_cell(r.ir->process_ms, 1); }},
  };
  return f;
}

const std::vector<Field<mp::KindSummary>>& kind_fields() {
  static const std::vector<Field<mp::KindSummary>> f = {
      {"kind",
       [](const mp::KindSummary& k) {
         return text_cell(k.kind == mp::LayerKind::kUnsupported ? "Unsupported:" + k.op_type
                                                                : std::string(mp::kind_name(k.kind)));
       }},
      {"instances", [](const mp::KindSummary& k) { return int_cell(k.instances); }},
      {"unique", [](const mp::KindSummary& k) { return int_cell(k.unique); }},
      {"models", [](const mp::KindSummary& k) { return int_cell(k.models); }},
      {"gflops", [](const mp::KindSummary& k) { return float_cell(static_cast<double>(k.flops) / 1e9, 3); }},
  };
  return f;
}

const std::vector<Field<mp::UniqueConfig>>& unique_fields() {
  static const std::vector<Field<mp::UniqueConfig>> f = {
      {"count", [](const mp::UniqueConfig& u) { return int_cell(u.count); }},
      {"models", [](const mp::UniqueConfig& u) { return int_cell(static_cast<int64_t>(u.models.size())); }},
      {"kind",
       [](const mp::UniqueConfig& u) { return text_cell(std::string(mp::kind_name(u.config.kind))); }},
      {"flops", [](const mp::UniqueConfig& u) { return int_cell(u.flops); }},
      {"bytes", [](const mp::UniqueConfig& u) { return int_cell(u.bytes); }},
      {"hash", [](const mp::UniqueConfig& u) { return text_cell(mp::key_hash_hex(u.key)); }},
      {"key", [](const mp::UniqueConfig& u) { return text_cell(u.key); }},
  };
  return f;
}

struct LayerRow {
  const ModelIR* ir;
  const mp::Layer* layer;
};
const std::vector<Field<LayerRow>>& layer_fields() {
  static const std::vector<Field<LayerRow>> f = {
      {"model", [](const LayerRow& r) { return text_cell(r.ir->name); }},
      {"batch", [](const LayerRow& r) { return int_cell(r.ir->batch); }},
      {"index", [](const LayerRow& r) { return int_cell(r.layer->index); }},
      {"name", [](const LayerRow& r) { return text_cell(r.layer->name); }},
      {"cost", [](const LayerRow& r) { return text_cell(std::string(mp::cost_class_name(r.layer->cost))); }},
      {"flops", [](const LayerRow& r) { return int_cell(r.layer->flops); }},
      {"bytes", [](const LayerRow& r) { return int_cell(r.layer->bytes); }},
      {"preds",
       [](const LayerRow& r) {
         std::vector<int64_t> p(r.layer->preds.begin(), r.layer->preds.end());
         Cell c = text_cell(mp::ints_string(p));
         c.json = p;
         return c;
       }},
      {"key", [](const LayerRow& r) { return text_cell(r.layer->key); }},
  };
  return f;
}

}  // namespace

void add_layers_command(CLI::App& app, LayersOptions& opts, int& exit_code) {
  auto* cmd = app.add_subcommand("layers", "Process ONNX models into layers and unique layer configurations");
  cmd->add_option("models", opts.models, "ONNX files or folders (searched recursively for *.onnx)")
      ->required();
  cmd->add_option("--batch", opts.batches, "Batch sizes, comma-separated")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(int_in(1, kMaxBatch, "batch size"));
  add_dim_option(cmd, opts.dims);
  cmd->add_option("--max-detections", opts.max_detections,
                  "Elements NonZero/NonMaxSuppression are assumed to select (their data-dependent sizes; "
                  "reports state it)")
      ->check(int_in(1, kMaxBatch, "detections"));
  cmd->add_option("--format", opts.format, "Output format")->check(CLI::IsMember({"table", "json", "csv"}));
  cmd->add_option("--out", opts.out, "Write the output to this file ('-' for standard output)");
  cmd->add_flag("--show-unique", opts.show_unique,
                "List every unique layer configuration with its multiplicity");
  cmd->add_flag("--show-layers", opts.show_layers, "List every layer of every model");
  cmd->add_option("--db", opts.db, "Record the models, their layers and configs into this results database");
  cmd->callback([&opts, &exit_code] { exit_code = run_layers(opts); });
}

int run_layers(const LayersOptions& opts) {
  auto files = find_model_files(opts.models);
  if (!files) {
    std::fprintf(stderr, "floorline layers: %s\n", files.error().message.c_str());
    return 2;
  }
  {
    std::vector<std::string> inputs = opts.models;
    if (!opts.db.empty()) inputs.push_back(opts.db);
    if (auto st = check_out_not_input(opts.out, inputs); !st) {
      std::fprintf(stderr, "floorline layers: %s\n", st.error().message.c_str());
      return 2;
    }
  }
  const bool color = use_color(stderr);
  const bool progress = isatty(fileno(stderr)) != 0;
  mp::ProcessOptions popts;
  popts.batches = opts.batches;
  popts.max_detections = opts.max_detections;
  popts.dims = opts.dims;
  std::vector<ModelIR> models;
  std::vector<mp::ModelFailure> failures;
  const auto t0 = std::chrono::steady_clock::now();
  mp::process_models(*files, popts, [&](size_t k, Result<std::vector<ModelIR>> result) {
    const auto& path = (*files)[k];
    if (progress) std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", k + 1, files->size(), path.filename().c_str());
    if (!result) {
      failures.push_back({path, result.error().message});
      return;
    }
    for (auto& m : *result) models.push_back(std::move(m));
  });
  if (progress) std::fprintf(stderr, "\r\033[K");
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Warnings go to stderr, once per model (not per batch).
  std::set<std::string> warned;
  for (const auto& m : models)
    for (const auto& w : m.warnings)
      if (warned.insert(m.path.string() + w).second)
        std::fprintf(stderr, "%s %s: %s\n", yellow("warning:", color).c_str(), m.path.c_str(), w.c_str());

  const auto unique = mp::dedup(models);
  const auto kinds = mp::summarize_kinds(models, unique);
  std::vector<ModelRow> rows;
  int64_t instances = 0;
  for (const auto& m : models) {
    rows.push_back(model_row(m));
    instances += rows.back().compute + rows.back().unsupported;
  }
  int64_t unique_instances = 0;
  for (const auto& u : unique) unique_instances += u.count;
  const double reduction = unique.empty() ? 0.0 : static_cast<double>(unique_instances) / unique.size();
  std::vector<LayerRow> layer_rows;
  if (opts.show_layers)
    for (const auto& m : models)
      for (const auto& l : m.layers) layer_rows.push_back({&m, &l});

  std::string out;
  if (opts.format == "json") {
    nlohmann::json j;
    j["models"] = render_json(model_fields(), rows);
    j["kinds"] = render_json(kind_fields(), kinds);
    j["summary"] = {{"models", models.size()},
                    {"failed", failures.size()},
                    {"layer_instances", instances},
                    {"unique_configs", unique.size()},
                    {"deduplicated_instances", unique_instances},
                    {"reduction_factor", reduction},
                    {"process_s", total_s}};
    j["failures"] = nlohmann::json::array();
    for (const auto& f : failures) j["failures"].push_back({{"path", f.path.string()}, {"error", f.error}});
    if (opts.show_unique) {
      j["unique"] = render_json(unique_fields(), unique);
      for (size_t k = 0; k < unique.size(); ++k) j["unique"][k]["in_models"] = unique[k].models;
    }
    if (opts.show_layers) j["layers"] = render_json(layer_fields(), layer_rows);
    for (size_t k = 0; k < models.size(); ++k) {
      if (!models[k].assumption.empty()) j["models"][k]["assumption"] = models[k].assumption;
      if (!models[k].notes.empty()) j["models"][k]["notes"] = models[k].notes;
    }
    // Names come from the model file: bytes that are not UTF-8 become U+FFFD instead of an exception.
    out = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else if (opts.format == "csv") {
    if (opts.show_layers)
      out = render_csv(layer_fields(), layer_rows);
    else if (opts.show_unique)
      out = render_csv(unique_fields(), unique);
    else
      out = render_csv(model_fields(), rows);
  } else {
    out += render_table(model_fields(), rows);
    for (const auto& m : models)
      if (!m.assumption.empty())
        out += fmt::format("assumption: {} (batch {}): {}\n", m.name, m.batch, m.assumption);
    for (const auto& m : models)
      for (const auto& note : m.notes) out += fmt::format("note: {} (batch {}): {}\n", m.name, m.batch, note);
    out += fmt::format("\nZoo: {} model(s) processed, {} failed, in {:.2f} s\n",
                       files->size() - failures.size(), failures.size(), total_s);
    out +=
        fmt::format("     {} cost-bearing layer instances, {} unique configurations, reduction {:.2f}x\n\n",
                    unique_instances, unique.size(), reduction);
    out += render_table(kind_fields(), kinds);
    if (opts.show_unique) out += "\n" + render_table(unique_fields(), unique);
    if (opts.show_layers) out += "\n" + render_table(layer_fields(), layer_rows);
  }
  if (auto st = write_checked(opts.out, out); !st) {
    std::fprintf(stderr, "floorline layers: %s\n", st.error().message.c_str());
    return 1;
  }
  int db_status = 0;
  if (!opts.db.empty()) {
    auto db = open_for_writing("layers", opts.db);
    auto st = db ? db->record_models(models) : Status(db.error());
    if (!st) {
      std::fprintf(stderr, "%s %s\n", red("error:", color).c_str(), st.error().message.c_str());
      db_status = 1;
    } else {
      std::fprintf(stderr, "recorded %zu model(s) at %zu batch size(s) into %s\n",
                   files->size() - failures.size(), opts.batches.size(), opts.db.c_str());
    }
  }
  for (const auto& f : failures)
    std::fprintf(stderr, "%s %s\n", red("error:", color).c_str(), f.error.c_str());
  if (!failures.empty()) std::fprintf(stderr, "%zu of %zu model(s) failed\n", failures.size(), files->size());
  // The process ends after this command: its models (every layer of every model, most of what it
  // allocated) are left to the exit rather than freed one allocation at a time.
  static auto* const kept = new std::vector<ModelIR>;
  *kept = std::move(models);
  return failures.empty() && db_status == 0 ? 0 : 1;
}

}  // namespace floorline::cli

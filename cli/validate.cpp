#include "validate.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "floorline/common/isa.hpp"
#include "floorline/common/output.hpp"
#include "floorline/model_processor/zoo.hpp"

namespace floorline::cli {

int64_t max_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0) return 1024;
  return std::min<int64_t>(1024, 4 * static_cast<int64_t>(hw));
}

namespace {

std::string unit_suffix(const std::string& what) {
  return what.empty() ? "" : " (" + what + ")";
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi, const std::string& what) {
  const std::string range = fmt::format("an integer from {} to {}{}", lo, hi, unit_suffix(what));
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        int64_t v = 0;
        const char* first = text.data();
        const char* last = text.data() + text.size();
        const auto [end, ec] = std::from_chars(first, last, v);
        if (text.empty() || ec != std::errc() || end != last || v < lo || v > hi)
          return fmt::format("{} is not {}", text, range);
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

void add_dim_option(CLI::App* cmd, std::map<std::string, std::vector<int64_t>>& dims) {
  cmd->add_option_function<std::vector<std::string>>(
         "--dim",
         [&dims](const std::vector<std::string>& given) {
           for (const auto& text : given) {
             const auto eq = text.find('=');
             const auto colon = text.substr(0, eq).find(':');
             if (eq == std::string::npos || eq == 0 || eq + 1 == text.size() || colon == 0 || colon + 1 == eq)
               throw CLI::ValidationError("--dim",
                                          fmt::format("{}: expected [MODEL:]NAME=VALUE[,VALUE...]", text));
             const std::string name = text.substr(0, eq);
             if (dims.count(name))
               throw CLI::ValidationError("--dim", fmt::format("{}: {} is given twice", text, name));
             std::vector<int64_t> values;
             std::string rest = text.substr(eq + 1);
             for (size_t at = 0; at <= rest.size();) {
               const size_t comma = std::min(rest.find(',', at), rest.size());
               std::string v = rest.substr(at, comma - at);
               const std::string why = int_in(0, int64_t{1} << 31, "")(v);
               if (!why.empty()) throw CLI::ValidationError("--dim", fmt::format("{}: {}", text, why));
               values.push_back(std::stoll(v));
               at = comma + 1;
             }
             dims[name] = std::move(values);
           }
         },
         "Value(s) of a named symbolic input dim, NAME=V or NAME=V1,V2 to sweep (repeatable; e.g. "
         "--dim sequence_length=128 --dim past_sequence_length=0,512): each combination is a scenario, "
         "named MODEL[NAME=V;...]; MODEL:NAME=V applies to the model of that file stem only, over NAME=V "
         "(--dim llama_1b_decode:sequence_length=1)")
      ->allow_extra_args(false)
      ->type_name("[MODEL:]NAME=VALUES");
}

CLI::Validator real_in(double lo, double hi, const std::string& what, bool lo_open) {
  const std::string range = fmt::format(fmt::runtime(lo_open ? "a finite number over {:g}, at most {:g}{}"
                                                             : "a finite number from {:g} to {:g}{}"),
                                        lo, hi, unit_suffix(what));
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size() && errno != ERANGE;
        if (!parsed || !std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo))
          return fmt::format("{} is not {}", text, range);
        return {};
      },
      fmt::format("NUMBER in {}{:g}, {:g}]", lo_open ? "(" : "[", lo, hi));
}

Status check_out_not_input(const std::string& out, const std::vector<std::string>& inputs) {
  if (out.empty() || out == "-") return {};
  struct stat o {};
  if (::stat(out.c_str(), &o) != 0) return {};  // does not exist yet: cannot be an input
  for (const auto& in : inputs) {
    struct stat i {};
    if (::stat(in.c_str(), &i) != 0) continue;
    if (i.st_dev == o.st_dev && i.st_ino == o.st_ino)
      return make_error("{}: is also an input ({}); choose another --out", out, in);
    // A folder of models: the output must not be one of the files read from it either.
    if (S_ISDIR(i.st_mode)) {
      std::error_code ec;
      for (auto it = std::filesystem::recursive_directory_iterator(in, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        struct stat f {};
        if (::stat(it->path().c_str(), &f) == 0 && f.st_dev == o.st_dev && f.st_ino == o.st_ino)
          return make_error("{}: is also an input ({}); choose another --out", out, it->path().string());
      }
    }
  }
  return {};
}

std::vector<mp::ModelIR> process_models(const std::vector<std::filesystem::path>& files,
                                        const mp::ProcessOptions& options, int& failures) {
  const bool color = output::use_color(stderr);
  std::vector<mp::ModelIR> models;
  for (const auto& path : files) {
    auto r = mp::process_model(path, options);
    if (!r) {
      std::fprintf(stderr, "%s %s\n", output::red("error:", color).c_str(), r.error().message.c_str());
      ++failures;
      continue;
    }
    for (auto& m : *r) models.push_back(std::move(m));
  }
  return models;
}

Result<ReadInputs> open_read_inputs(const std::vector<std::string>& paths, const std::string& db,
                                    const std::string& out, const mp::ProcessOptions& options) {
  FL_ASSIGN_OR_RETURN(const auto files, find_model_files(paths));
  std::vector<std::string> inputs = paths;
  inputs.push_back(db);
  FL_TRY(check_out_not_input(out, inputs));
  benchdb::OpenOptions ro;
  ro.read_only = true;
  FL_ASSIGN_OR_RETURN(auto opened, benchdb::Database::open(db, ro));
  ReadInputs r{std::move(opened), {}, 0};
  r.models = process_models(files, options, r.failures);
  return r;
}

std::optional<std::string> embedded_zoo() {
  for (const std::filesystem::path& p :
       {std::filesystem::path("models/zoo"), std::filesystem::path(FLOORLINE_SOURCE_DIR) / "models/zoo"}) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) return p.string();
  }
  return std::nullopt;
}

Result<std::vector<std::filesystem::path>> find_model_files(const std::vector<std::string>& paths) {
  std::vector<std::filesystem::path> out;
  for (const auto& p : paths) {
    FL_ASSIGN_OR_RETURN(auto found, mp::find_models({p}));
    std::error_code ec;
    if (found.empty() && std::filesystem::is_directory(p, ec))
      return make_error("{}: no .onnx file in this folder", p);
    out.insert(out.end(), found.begin(), found.end());
  }
  if (out.empty()) return make_error("no model given");
  return out;
}

Result<benchdb::Database> open_for_writing(const std::string& command, const std::string& path) {
  FL_ASSIGN_OR_RETURN(auto db, benchdb::Database::open(path));
  FL_ASSIGN_OR_RETURN(const auto dead, db.mark_dead_runs());
  for (const auto& d : dead)
    std::fprintf(stderr,
                 "floorline %s: %s: run %lld (pid %lld, started %s) died without finishing: marked died\n",
                 command.c_str(), path.c_str(), static_cast<long long>(d.run_id),
                 static_cast<long long>(d.pid), d.started_at.c_str());
  return db;
}

Status write_checked(const std::string& out, const std::string& text) {
  const bool to_stdout = out == "-";
  std::FILE* f = to_stdout ? stdout : std::fopen(out.c_str(), "wb");
  if (!f) return make_error("cannot write {}: {}", out, std::strerror(errno));
  errno = 0;
  const size_t n = std::fwrite(text.data(), 1, text.size(), f);
  int err = n == text.size() ? 0 : (errno ? errno : EIO);
  if (std::fflush(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (!to_stdout && std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err) return make_error("cannot write {}: {}", to_stdout ? "standard output" : out, std::strerror(err));
  return {};
}

void add_isa_option(CLI::App* cmd, const std::string& what) {
  cmd->add_option_function<std::string>(
         "--isa",
         [](const std::string& name) {
           // The plugins load at the first use of a backend, after the options are parsed: each
           // library reads its cap then (generator/src/registry.cpp).
           setenv(kIsaCapVariable, name.c_str(), /*overwrite=*/1);
         },
         what + " (" + isa_names() + ")")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            const auto level = check_isa_cap(name);
            return level ? std::string() : level.error().message;
          },
          "ISA", "isa"));
}

}  // namespace floorline::cli

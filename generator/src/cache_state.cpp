#include "floorline/generator/cache_state.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "floorline/generator/replay.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::gen {

std::string_view cache_state_name(CacheState s) {
  return s == CacheState::kWarm ? "warm" : s == CacheState::kMemory ? "memory" : "llc";
}

namespace {

// The size of cpu0's data or unified cache of `level` from sysfs ("32768K"), 0 where there is none.
int64_t sysfs_cache_bytes(int level) {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(level_file >> l)) break;
    if (!(type_file >> type) || !(size_file >> size) || l != level || type == "Instruction") continue;
    char* end = nullptr;
    const long long n = std::strtoll(size.c_str(), &end, 10);
    const int64_t unit = *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1;
    return n > 0 ? n * unit : 0;
  }
  return 0;
}

}  // namespace

CacheSizes cache_sizes() {
  // sysfs first: it gives one instance of each cache, where sysconf may give a whole socket's L3
  // (a 2-core AMD EPYC VM: sysconf 256 MiB, sysfs 32 MiB shared by cpu 0-1, as lscpu says).
  CacheSizes s;
  s.l2 = sysfs_cache_bytes(2);
  if (s.l2 <= 0) s.l2 = std::max<long>(0, ::sysconf(_SC_LEVEL2_CACHE_SIZE));
  s.llc = sysfs_cache_bytes(3);
  if (s.llc <= 0) s.llc = std::max<long>(0, ::sysconf(_SC_LEVEL3_CACHE_SIZE));
  if (s.l2 <= 0) s.l2 = int64_t{1} << 20;
  if (s.llc <= 0) s.llc = int64_t{32} << 20;
  s.llc = std::max(s.llc, s.l2);  // a machine without an L3: L2 is its last level
  return s;
}

int64_t flush_bytes(CacheState state, int threads, const CacheSizes& sizes) {
  if (state == CacheState::kWarm) return 0;
  return state == CacheState::kMemory ? 2 * sizes.llc : 2 * sizes.l2 * std::max(1, threads);
}

CacheFlusher::CacheFlusher(CacheState state, int threads, const CacheSizes& sizes)
    : state_(state), threads_(std::max(1, threads)) {
  lines_ = static_cast<size_t>(flush_bytes(state, threads_, sizes) / kLine);
  buffer_ = std::make_unique<unsigned char[]>(std::max<size_t>(1, lines_) * kLine);
  std::fill_n(buffer_.get(), lines_ * kLine, static_cast<unsigned char>(0));  // pages mapped now
}

CacheFlusher::~CacheFlusher() {
  std::free(dirty_);
}

std::pair<size_t, size_t> thread_share(size_t lines, int i, int n) {
  const size_t parts = static_cast<size_t>(std::max(1, n));
  // lines / n each, the first lines % n one more: none empty while lines ≥ n.
  const size_t base = lines / parts, extra = lines % parts, k = static_cast<size_t>(std::max(0, i));
  const size_t first = k * base + std::min(k, extra);
  return {std::min(lines, first), std::min(lines, first + base + (k < extra ? 1 : 0))};
}

int64_t dirty_fill_bytes(const CacheSizes& sizes) {
  return std::min<int64_t>(2 * sizes.llc, int64_t{64} << 20);
}

void CacheFlusher::dirty() {
  dirty_part(0, 1, next_generation());
}

void CacheFlusher::allocate_dirty() {
  if (!dirty_) {
    constexpr size_t kHuge = size_t{2} << 20;
    const auto bytes = static_cast<size_t>(dirty_fill_bytes());
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    dirty_ = static_cast<unsigned char*>(std::aligned_alloc(kHuge, rounded));
    if (!dirty_) throw std::bad_alloc();
    (void)::madvise(dirty_, rounded, MADV_HUGEPAGE);  // a hint: 4 KiB pages where it is refused
    dirty_lines_ = bytes / kLine;
  }
}

unsigned char CacheFlusher::next_generation() {
  allocate_dirty();
  return ++generation_;
}

void CacheFlusher::dirty_part(int i, int n, unsigned char value) {
  const auto [first, end] = thread_share(dirty_lines_, i, n);
  for (size_t l = first; l < end; ++l) dirty_[l * kLine] = value;
}

unsigned CacheFlusher::flush_part(int i, int n) const {
  const auto [first, end] = thread_share(lines_, i, n);
  return touch(buffer_.get() + first * kLine, static_cast<int64_t>((end - first) * kLine));
}

void CacheFlusher::flush() {
  if (lines_ == 0) return;
  std::vector<unsigned> sums(static_cast<size_t>(threads_), 0);
  auto read = [this, &sums](int t) { sums[static_cast<size_t>(t)] = flush_part(t, threads_); };
  if (threads_ == 1) {
    read(0);
  } else {
    std::vector<std::thread> others;
    others.reserve(static_cast<size_t>(threads_) - 1);
    for (int t = 1; t < threads_; ++t) others.emplace_back(read, t);
    read(0);
    for (auto& th : others) th.join();
  }
  for (const unsigned v : sums) sink_ += v;
}

double run_delay_us() {
  std::ifstream in("/proc/thread-self/schedstat");
  double on_cpu_ns = 0, waiting_ns = -1e3;
  in >> on_cpu_ns >> waiting_ns;
  return in ? waiting_ns / 1e3 : -1;
}

long involuntary_switches() {
  rusage u{};
  return ::getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_nivcsw : 0;
}

unsigned touch(const void* data, int64_t bytes) {
  const auto* p = static_cast<const volatile unsigned char*>(data);
  unsigned sum = 0;
  for (int64_t i = 0; i < bytes; i += 64) sum += p[i];
  return sum;
}

bool evict(const void* data, int64_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const auto* p = static_cast<const char*>(data);
  for (int64_t i = 0; i < bytes; i += 64) _mm_clflush(p + i);
  if (bytes > 0) _mm_clflush(p + bytes - 1);
  _mm_mfence();
  return true;
#else
  (void)data;
  (void)bytes;
  return false;
#endif
}

std::vector<CacheTiming> time_in_cache_states(kernels::Kernel& kernel, const kernels::Problem& problem,
                                              const std::vector<CacheFlusher*>& flushers, int samples,
                                              double long_call, int long_samples, const Team& team) {
  // The weights' buffers as run() reads them, and the activation inputs, which the step before has
  // just written.
  std::vector<kernels::Port> weights, warm;
  bool every_weight = true;
  for (size_t k = 0; k < problem.inputs.size(); ++k) {
    auto port = kernel.port(false, k);
    const bool usable = port && port->data && port->bytes > 0;
    if (kernels::weight_operand(problem, k)) {
      if (usable)
        weights.push_back(*port);
      else
        every_weight = false;
    } else if (usable) {
      warm.push_back(*port);
    }
  }
  // The output buffers run() writes (for the memory state's second call: the dst from memory too).
  std::vector<kernels::Port> outputs;
  for (size_t o = 0; o < problem.outputs.size(); ++o)
    if (auto port = kernel.port(true, o); port && port->data && port->bytes > 0) outputs.push_back(*port);
  // A fresh build's first calls fault in pages and set things up.
  const double per_call = kernels::warm_up(kernel, 0.01);
  const int n = std::max(1, per_call >= long_call ? std::min(samples, long_samples) : samples);
  std::vector<std::vector<double>> us(flushers.size()), dst_us(flushers.size()), dirty_us(flushers.size());
  std::vector<CacheTiming> out(flushers.size());
  std::atomic<unsigned> sink{0};
  // Each phase of a preparation on the case's threads (`team`), else on this one.
  auto run = [&team](const std::function<void(int, int)>& work) {
    if (team)
      team(work);
    else
      work(0, 1);
  };
  // Thread i of n's share of a buffer, by whole lines.
  auto part = [](const kernels::Port& p, int i, int n) {
    const auto [first, end] = thread_share(static_cast<size_t>((p.bytes + 63) / 64), i, n);
    const int64_t lo = static_cast<int64_t>(first) * 64;
    return std::pair{static_cast<const char*>(p.data) + lo,
                     std::min(p.bytes, static_cast<int64_t>(end) * 64) - lo};
  };
  for (size_t f = 0; f < flushers.size(); ++f) {
    CacheFlusher& flusher = *flushers[f];
    // From memory, where every weight has its port: those lines alone evicted, the rest as the
    // call before left it (code, page tables, the library's own state, the output buffer).
    // (evict of nothing: whether the ISA can evict lines at all; else the flush.)
    const bool targeted = flusher.state() == CacheState::kMemory && every_weight && evict(nullptr, 0);
    // One call after `prepare`, taken again while it was switched out (the lowest of its calls).
    auto take = [&](auto&& prepare) {
      double call_us = 0;
      for (int attempt = 0;; ++attempt) {
        prepare();  // its last phase on the team: the workers spin for the call after it
        const long switches = involuntary_switches();
        const double delay = run_delay_us();
        const double us_now = kernel.timed_run() * 1e6;
        call_us = attempt == 0 ? us_now : std::min(call_us, us_now);  // an interrupted call only runs high
        if (involuntary_switches() == switches || attempt == kMaxRetakes) break;
        // Switched out: on one thread, where this thread's wait for a CPU says what it lost, a call
        // that lost under 1% of its time (a kernel thread's microseconds) stands; else it is taken again.
        const double lost = run_delay_us() - delay;
        if (flusher.threads() == 1 && delay >= 0 && lost < 0.01 * us_now) break;
        ++out[f].retaken;
      }
      return call_us;
    };
    // The phases, each thread its share (one thread: all of it; the flush then on the flusher's
    // own threads where the case has several).
    auto evict_ports = [&](const std::vector<kernels::Port>& ports) {
      run([&](int i, int n) {
        for (const auto& p : ports) {
          const auto [data, bytes] = part(p, i, n);
          if (bytes > 0) evict(data, bytes);
        }
      });
    };
    auto evict_weights = [&] { evict_ports(weights); };
    auto touch_ports = [&](const std::vector<kernels::Port>& ports) {
      run([&](int i, int n) {
        unsigned sum = 0;
        for (const auto& p : ports) {
          const auto [data, bytes] = part(p, i, n);
          if (bytes > 0) sum += touch(data, bytes);
        }
        sink.fetch_add(sum, std::memory_order_relaxed);
      });
    };
    auto touch_warm = [&] { touch_ports(warm); };
    auto flush_only = [&] {
      run([&](int i, int n) {
        if (n == 1)
          flusher.flush();
        else
          sink.fetch_add(flusher.flush_part(i, n), std::memory_order_relaxed);
      });
    };
    auto flush = [&] {
      flush_only();
      touch_warm();
    };
    auto fill_dirty = [&] {
      const unsigned char value = flusher.next_generation();
      run([&](int i, int n) { flusher.dirty_part(i, n, value); });
    };
    for (int i = 0; i < n; ++i) {
      if (flusher.state() == CacheState::kMemory && i < kDirtySamples)
        // Among dirty lines: the fill, then the activation inputs and the output buffers read back
        // (where the call before left them, as in the memory reading) and the weights evicted (or
        // the flush first where they cannot be: the fill alone may leave them in a larger cache).
        dirty_us[f].push_back(take([&] {
          if (!targeted) flush_only();
          fill_dirty();
          touch_warm();
          if (targeted) {
            touch_ports(outputs);
            evict_weights();
          }
        }));
      if (targeted) {
        us[f].push_back(take(evict_weights));
        // The same with the output buffers evicted too: a pass's pooled output buffer was last
        // touched layers back, and a kernel that writes it first reads its lines in.
        if (!outputs.empty())
          dst_us[f].push_back(take([&] {
            evict_weights();
            evict_ports(outputs);
          }));
      } else if (flusher.state() == CacheState::kWarm) {
        us[f].push_back(take([&] { run([](int, int) {}); }));  // the team woken alone
      } else {
        us[f].push_back(take(flush));
      }
    }
    out[f].targeted = targeted;
  }
  {
    volatile unsigned kept = sink.load();
    (void)kept;
  }
  for (size_t f = 0; f < flushers.size(); ++f) {
    auto& v = us[f];
    std::sort(v.begin(), v.end());
    CacheTiming& t = out[f];
    t.state = flushers[f]->state();
    t.samples = static_cast<int>(v.size());
    t.min_us = v.front();
    t.median_us = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    t.flush_bytes = flushers[f]->bytes();
    // From memory: the dst evicted too where it was (a targeted call with output ports), else the
    // memory reading itself (a flush of 2 × the LLC leaves the output buffer in memory already; a
    // case without output ports keeps its buffer where the call before left it).
    if (t.state == CacheState::kMemory) {
      t.dst_min_us = dst_us[f].empty() ? t.min_us : *std::min_element(dst_us[f].begin(), dst_us[f].end());
      if (!dirty_us[f].empty()) t.dirty_min_us = *std::min_element(dirty_us[f].begin(), dirty_us[f].end());
    }
  }
  return out;
}

std::vector<CacheTiming> time_on_device(kernels::Kernel& kernel, const Backend& backend,
                                        const std::vector<CacheState>& states, int samples, double long_call,
                                        int long_samples) {
  struct ColdOff {
    const Backend& b;
    ~ColdOff() { (void)b.set_cold_cache(false); }
  } off{backend};
  const double per_call = kernels::warm_up(kernel, 0.01);
  const int n = std::max(1, per_call >= long_call ? std::min(samples, long_samples) : samples);
  std::vector<CacheTiming> out;
  for (const CacheState state : states) {
    const bool cold = state == CacheState::kMemory;
    if (const Status s = backend.set_cold_cache(cold); !s.ok()) throw std::runtime_error(s.error().message);
    std::vector<double> us;
    for (int i = 0; i < n; ++i) us.push_back(kernel.timed_run() * 1e6);
    std::sort(us.begin(), us.end());
    CacheTiming t;
    t.state = state;
    t.samples = static_cast<int>(us.size());
    t.min_us = us.front();
    t.median_us = us.size() % 2 ? us[us.size() / 2] : 0.5 * (us[us.size() / 2 - 1] + us[us.size() / 2]);
    t.flush_bytes = cold ? backend.cold_cache_bytes() : 0;
    if (cold) t.dst_min_us = t.min_us;  // the flush evicted the output buffers too
    out.push_back(t);
  }
  return out;
}

double warm_min(const std::vector<CacheTiming>& timings) {
  for (const CacheTiming& t : timings)
    if (t.state == CacheState::kWarm) return t.min_us;
  return 0;
}

bool disturbed(const std::vector<CacheTiming>& timings, double case_us) {
  const double warm = warm_min(timings);
  return case_us >= kSecondLookFromUs && warm > kSecondLookAbove * case_us;
}

Result<CacheStageSummary> time_cache_states(benchdb::Database& db, const Plan& plan,
                                            const std::vector<const Backend*>& backends, int64_t system_id,
                                            DType dtype, const CacheStageOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  CacheStageSummary sum;
  if (options.states.empty()) return sum;
  FL_ASSIGN_OR_RETURN(auto budget, db.thread_budget(system_id));
  if (!options.thread_budget)
    std::erase_if(budget, [&](const benchdb::BudgetSystem& s) { return s.system_id != system_id; });
  std::map<int, int64_t> system_at;  // thread count → the budget's system measured at it
  for (const auto& s : budget) system_at.emplace(static_cast<int>(s.threads), s.system_id);

  // The cases S takes: each config's best, and each fused variant's, within the thread budget.
  FL_ASSIGN_OR_RETURN(const auto unfused, best_cases(db, system_id, plan, dtype, options.thread_budget));
  FL_ASSIGN_OR_RETURN(const auto fused, best_fused_cases(db, system_id, plan, dtype, options.thread_budget));
  std::vector<const ChosenCase*> todo;
  std::set<std::pair<std::string, int>> seen;
  for (const auto& [key, c] : unfused)
    if (seen.emplace(c.spec.name, c.threads).second) todo.push_back(&c);
  for (const auto& [key, c] : fused)
    if (seen.emplace(c.spec.name, c.threads).second) todo.push_back(&c);
  // The cases E's layout choice runs layers on (CacheStageOptions::also), found among the passed ones.
  CaseAlternatives passed;
  if (!options.also.empty()) {
    FL_ASSIGN_OR_RETURN(passed, passed_cases(db, system_id, plan, dtype, options.thread_budget));
    for (const auto& [key, cases] : passed)
      for (const auto& c : cases)
        if (options.also.count({c.spec.name, c.threads}) && seen.emplace(c.spec.name, c.threads).second)
          todo.push_back(&c);
  }
  // One backend and thread count after another: its pool is set up once and parked once.
  std::stable_sort(todo.begin(), todo.end(), [](const ChosenCase* a, const ChosenCase* b) {
    return std::tie(a->spec.variant.backend, a->threads) < std::tie(b->spec.variant.backend, b->threads);
  });
  sum.cases = static_cast<int64_t>(todo.size());

  std::map<std::pair<CacheState, int>, std::unique_ptr<CacheFlusher>> flushers;
  auto flusher = [&](CacheState s, int threads) -> CacheFlusher& {
    auto& f = flushers[{s, threads}];
    if (!f) f = std::make_unique<CacheFlusher>(s, threads);
    return *f;
  };
  const Backend* current = nullptr;
  int current_threads = 0;
  for (const ChosenCase* c : todo) {
    const auto sys = system_at.find(c->threads);
    const auto be = std::find_if(backends.begin(), backends.end(),
                                 [&](const Backend* b) { return b->name() == c->spec.variant.backend; });
    if (sys == system_at.end() || be == backends.end()) continue;
    // The flush is the CPU's: a device backend's cases are timed with its own (time_on_device).
    const bool device = (*be)->device_kind() != "cpu";
    if (device && (*be)->cold_cache_bytes() <= 0) continue;
    // By the indexed uid (FNV-1a of the name, Database::upsert_case), the name to confirm it: a scan
    // by name took 11 ms a case on the 81,000 cases of a zoo sweep, 30 s for a stage with nothing to do.
    FL_ASSIGN_OR_RETURN(const auto id, db.query("SELECT id FROM cases WHERE uid = ?1 AND name = ?2",
                                                {mp::key_hash_hex(c->spec.name), c->spec.name}));
    if (id.rows.empty()) continue;
    const int64_t case_id = std::get<int64_t>(id.rows[0][0]);
    if (!options.force) {
      // Every state, and from memory the dst reading too (a row of schema 10 has none), and on the
      // CPU the dirty one (none before schema 12; a device has none).
      FL_ASSIGN_OR_RETURN(
          const auto have,
          db.query(fmt::format("SELECT count(DISTINCT state), count(*) FILTER (WHERE state = 'memory' AND "
                               "(dst_memory_min_us IS NULL{})) FROM cache_times WHERE system_id = ?1 AND "
                               "case_id = ?2",
                               device ? "" : " OR dirty_memory_min_us IS NULL"),
                   {sys->second, case_id}));
      if (std::get<int64_t>(have.rows[0][0]) >= static_cast<int64_t>(options.states.size()) &&
          std::get<int64_t>(have.rows[0][1]) == 0) {
        ++sum.present;
        continue;
      }
    }
    if (current && (current != *be || current_threads != c->threads)) current->park_threads();
    current = *be;
    current_threads = c->threads;
    current->set_threads(c->threads);
    auto fail = [&](const std::string& why) {
      ++sum.failed;
      if (sum.errors.size() < 5) sum.errors.push_back(fmt::format("{}: {}", c->spec.name, why));
    };
    auto kernel = current->factory()(placed_as_benched(c->spec, options.huge_pages));
    if (!kernel) {
      fail(kernel.error().message);
      continue;
    }
    try {
      std::vector<CacheFlusher*> fs;
      if (!device)
        for (const CacheState s : options.states) fs.push_back(&flusher(s, c->threads));
      // At several threads, each preparation on the case's own pool (time_in_cache_states).
      const Backend* backend = current;
      const int threads = c->threads;
      Team team;
      if (threads > 1)
        team = [backend, threads](const std::function<void(int, int)>& work) {
          backend->on_threads(threads, work);
        };
      auto time_case = [&] {
        return device ? time_on_device(**kernel, **be, options.states, options.samples, options.long_call,
                                       options.long_samples)
                      : time_in_cache_states(**kernel, c->spec.problem, fs, options.samples,
                                             options.long_call, options.long_samples, team);
      };
      auto timings = time_case();
      if (disturbed(timings, c->us)) {
        ++sum.second_looks;
        auto again = time_case();
        // The set kept counts its retakes below; the other one's here.
        const bool lower = warm_min(again) < warm_min(timings);
        for (const CacheTiming& t : lower ? timings : again) sum.retaken += t.retaken;
        if (lower) {
          ++sum.second_lower;
          timings = std::move(again);
        }
      }
      for (const CacheTiming& t : timings) {
        if (!(t.min_us > 0) || (t.dst_min_us && !(*t.dst_min_us > 0)) ||
            (t.dirty_min_us && !(*t.dirty_min_us > 0)))
          throw std::runtime_error("a call timed at 0 µs");
        benchdb::CacheTimeRow row;
        row.system_id = sys->second;
        row.case_id = case_id;
        row.state = std::string(cache_state_name(t.state));
        row.median_us = t.median_us;
        row.min_us = t.min_us;
        row.samples = t.samples;
        row.flush_bytes = t.flush_bytes;
        row.dst_memory_min_us = t.dst_min_us;
        row.dirty_memory_min_us = t.dirty_min_us;
        row.measured_at = benchdb::utc_now();
        FL_TRY(db.upsert_cache_time(row));
        sum.retaken += t.retaken;
      }
      ++sum.timed;
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
  if (current) current->park_threads();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace floorline::gen

// The simulator's schedule model (Note [Simulator model]): the window of an AccessModel as a
// repeating schedule of page events, the data state of each page, and the checks every replay
// shares. Internal to runtime/simulator/; the replays over it are reactive.cc, predictive.cc and
// bound.cc, their entry points simulate.h. It reads the AccessModel struct only, so it is tested on
// hand-built models.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/simulator/simulate.h"

namespace vc {
namespace sim {

// Note [Simulator model]
// Steady state. The window is replayed `repetitions` times and only the last repetition is
// reported; the earlier ones warm the cache. Before the first, pages of allocations live at the
// window start are on the host with valid data and nothing is resident. A page created in the
// window is created again, empty, every repetition (replacing the previous repetition's instance if
// it was never freed). A page live at the window start and freed in it returns, on the host with
// valid data, at the start of the next repetition: the model cannot tell which later allocation
// holds its successor's data, so the predictive policy never fetches it ahead of that return.
//
// Data. An access needs a copy in (H2D) only if the page holds data and the access reads it (any
// role but kWritten); a page created in the window holds none until written, and one that holds
// none costs nothing to drop. A page written (kWritten, kReadWritten, kUnknown) since its host copy
// was made is dirty. Freed pages vanish without write-back under both policies; a free takes effect
// when the op before it has ended.
//
// Timing. Each engine runs its batches first in, first out; a batch costs latency_s, then its bytes
// at the rate link_rates() gives (both directions busy share both_bytes_per_s). An op starts when
// the previous op has ended and all its pages have arrived; the wait is stall. Bytes are counted
// for the repetition of the op they are moved for (eager write-backs: the repetition running when
// they are issued), so the last repetition's prefetches issued during the one before count, and
// prefetches it issues for a following repetition do not.
//
// Ties. Equal next use: clean before dirty, then lower page index. LRU: the pages of one op are
// ordered as the op lists them.
//
// The policies and the bound replay this schedule: Note [Simulated reactive paging] (reactive.cc),
// Note [Simulated predictive paging] (predictive.cc), Note [Simulated bound] (bound.cc).

inline bool reads(Role role) { return role != Role::kWritten; }
inline bool writes(Role role) { return role != Role::kRead; }

// What happens to a page at a boundary between ops.
enum class Change : uint8_t { kFree, kCreate, kReturn };
struct Boundary {
  uint32_t page;
  Change change;
};

// Kinds of a page's events in the repeating schedule.
constexpr uint8_t kEvKill = 0;       // free, create or return: the GPU copy's data ends here
constexpr uint8_t kEvRead = 1;       // an access that needs the data
constexpr uint8_t kEvOverwrite = 2;  // an access that overwrites it unread (kWritten)

// The window as a repeating schedule. A key orders events: 2i is the boundary before window op i,
// 2i+1 op i's accesses; a global key adds 2n per repetition (global op g = rep * n + i has keys 2g
// and 2g+1). Frees listed after the last op are put at the boundary before op 0 of the next
// repetition, followed by the return of pages that were live at the window start.
struct Schedule {
  uint64_t n = 0;
  std::vector<uint64_t> page_bytes;
  std::vector<uint64_t> footprint;  // bytes each window op touches
  std::vector<uint32_t> bound_first;
  std::vector<Boundary> bounds;  // before window op i: bounds[bound_first[i] .. bound_first[i+1])
  std::vector<uint32_t> ev_first, kill_first;  // per page
  std::vector<uint64_t> ev_key, kill_key;      // window keys, ascending per page
  std::vector<uint8_t> ev_kind;
  std::vector<uint8_t> born;     // created in the window
  std::vector<uint8_t> returns;  // live at the window start, freed in it
};

// Empty if the model is well formed.
std::string check_model(const AccessModel &m);
Schedule make_schedule(const AccessModel &m);
// Global op of the next access at or after global key g that needs the page's present data, or
// kNever if the data is dead (the page is overwritten unread or freed first, or never used again).
uint64_t next_need(const Schedule &s, uint32_t page, uint64_t g);
// Eviction priority of a page after global key g: its next need, or kNever (evict first, save
// nothing) when it holds no data, such as a page created and not yet written.
uint64_t keep_until(const Schedule &s, uint32_t page, bool has_data, uint64_t g);
// Global key of the next free, create or return at or after global key g; kNever if none.
uint64_t next_kill(const Schedule &s, uint32_t page, uint64_t g);
double sum_seconds(const std::vector<double> &secs);
// Shared checks; an empty string means the replay can run.
std::string check_config(const AccessModel &m, const Schedule &s, const SimConfig &c);

// Data state of a page, common to every replay.
struct Data {
  bool exists = false, has_data = false, dirty = false;
};
void init_data(const Schedule &s, std::vector<Data> *data);
void apply_change(Change change, Data *d);
// An op's access, after which the page holds data if the op wrote it.
void touch(Role role, Data *d);

// The policies, over `reps` repetitions of the window (reactive.cc, predictive.cc).
SimResult run_reactive(const AccessModel &m, const Schedule &s, const SimConfig &c, int reps);
SimResult run_predictive(const AccessModel &m, const Schedule &s, const SimConfig &c, int reps);

}  // namespace sim
}  // namespace vc

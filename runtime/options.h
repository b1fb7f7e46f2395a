// The one options table. Every VRAMCACHE_* variable is a row here; the library, the `vramcache`
// command and the README's option list are all generated from it. Parsing is pure (the
// environment comes in as a lookup function), so it is tested without touching the process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace vc {

// X(id, ENV_NAME, kind, default, choices-or-example, description)
// For kChoice rows the choices are '|'-separated and the value is stored as the choice's index.
// kSize values are bytes with an optional binary suffix (64K, 2M, 24G); kCount values are
// positive integers. Limits beyond the kind's are checked in check_option() (options.cc).
#define VC_OPTIONS(X)                                                                               \
  X(kMode, "VRAMCACHE_MODE", kChoice, "count", "off|count|profile",                                  \
    "what the library does: `off` passes every call through untouched; `count` also counts "        \
    "allocations, frees, launches (decoded or not), GEMMs, copies and synchronizations and "        \
    "prints a summary at exit; `profile` records the access trace of the first iterations "         \
    "(`vramcache profile` sets this)")                                                              \
  X(kLogLevel, "VRAMCACHE_LOG_LEVEL", kChoice, "warn", "error|warn|info|debug",                      \
    "least severe log level written")                                                              \
  X(kLogFile, "VRAMCACHE_LOG_FILE", kPath, "", "/tmp/vramcache.log",                                 \
    "append log lines to this file instead of stderr; `%p` becomes the process id, `%r` its rank "  \
    "(RANK, else 0), as in every path option")                                             \
  X(kSummaryFile, "VRAMCACHE_SUMMARY_FILE", kPath, "", "/tmp/vramcache-summary.json",                \
    "also write the exit summary as JSON to this file")                                            \
  X(kActivity, "VRAMCACHE_ACTIVITY", kBool, "0", "1",                                                \
    "also collect CUPTI kernel and memory activity records, so the summary can compare launches "   \
    "and allocations seen against what CUPTI recorded (adds tracing overhead; profile mode always " \
    "collects kernel and copy times)")                                                             \
  X(kTraceFile, "VRAMCACHE_TRACE_FILE", kPath, "vramcache.vctrace", "/tmp/job.vctrace",              \
    "profile mode: where the trace is written; `%p` in it becomes the process id (one trace per "    \
    "process when several run under the library)")                                                    \
  X(kProfileIterations, "VRAMCACHE_PROFILE_ITERATIONS", kCount, "3", "5",                            \
    "profile mode: iterations to record after the first (warm-up) one; recording then stops and "   \
    "the trace is written while the program goes on")                                             \
  X(kPageSize, "VRAMCACHE_PAGE_SIZE", kSize, "2M", "256K",                                           \
    "unit of bookkeeping and reuse distances: a power of two from 64K to 1G")                      \
  X(kBudget, "VRAMCACHE_BUDGET", kSize, "0", "24G",                                                 \
    "page the application's device memory under this many GPU-resident bytes (`vramcache run "     \
    "--budget` sets it); its allocations are paged (VRAMCACHE_BACKEND) and the policy moves what "  \
    "kernels need into the budget; 0: no paging")                                                 \
  X(kPolicy, "VRAMCACHE_POLICY", kChoice, "predictive", "predictive|reactive",                       \
    "with a budget: `reactive` brings data in when a kernel uses it and evicts the least recently " \
    "used (what unified-memory oversubscription does); `predictive` learns the first iterations "   \
    "and then prefetches ahead of use and evicts what is needed last, falling back to reactive "    \
    "while the program departs from what it learned")                                              \
  X(kPrefetchAhead, "VRAMCACHE_PREFETCH_AHEAD", kSize, "0", "512M",                                 \
    "with the predictive policy: most bytes fetched ahead for kernels still to come; more hides "   \
    "more of the link behind compute but evicts more that is needed again; 0: 1/32 of the budget "  \
    "with the explicit backend, 1/16 with the managed one")                                         \
  X(kPrefetchLead, "VRAMCACHE_PREFETCH_LEAD", kCount, "1000000", "2000",                                 \
    "with the predictive policy: a page is fetched when the kernel time until its use, as measured " \
    "while learning, is within the link's time for what is queued ahead of it plus this many "       \
    "microseconds, and not before (within the window; a very large value, as the default: as far "  \
    "as the window allows)")                                                                       \
  X(kBypass, "VRAMCACHE_BYPASS", kBool, "1", "0",                                                   \
    "with the predictive policy: a page an op needs that would be the first evicted if it came in "  \
    "(the plan uses it after every resident page) is reached where it is, over the link, instead "   \
    "of moved")                                                                                      \
  X(kBackend, "VRAMCACHE_BACKEND", kChoice, "explicit", "managed|explicit",                          \
    "with a budget: how data moves. `explicit`: address space in frames of device or pinned host "   \
    "memory, moved by copies at the link's rate and remapped (an evicted frame stays reachable at "  \
    "home); where the device cannot map host memory that way, `managed` instead, with one log "      \
    "line. `managed`: allocations become managed memory moved by prefetches")                      \
  X(kFrameSize, "VRAMCACHE_FRAME_SIZE", kSize, "0", "32M",                                          \
    "with the explicit backend: the unit that moves, a power of two from 2M to 256M (the last "     \
    "frame of an allocation is smaller); 0: 1/128 of the budget, from 2M to 256M")                  \
  X(kHomeOnDemand, "VRAMCACHE_HOME_ON_DEMAND", kBool, "1", "0",                                     \
    "with the explicit backend: an evicted frame is left unmapped, and mapped at home only when an " \
    "op vramcache sees may reach it there (mapping host memory costs the driver 10-20x more than "   \
    "device memory); 0: mapped at home at each eviction, so that an access vramcache cannot see "    \
    "(through a pointer kept in device memory) still finds it")                                     \
  X(kCleanCheck, "VRAMCACHE_CLEAN_CHECK", kBool, "1", "0",                                           \
    "with the explicit backend: vramcache's own kernel hashes each piece of a frame (2 MiB) as it "  \
    "arrives on the device and before it leaves (a 128-bit keyed hash), and only the pieces that "   \
    "changed are copied home; in profile mode the same hash, before and after each op, makes the "  \
    "trace's write records; 0: every evicted frame an op may have written is copied home whole, "     \
    "and a profile has no write records")                                                           \
  X(kHostLimit, "VRAMCACHE_HOST_LIMIT", kSize, "0", "96G",                                           \
    "with a budget: most bytes of paged allocations in total (each may live on the host); past "    \
    "it an allocation fails with the out-of-memory code; with VRAMCACHE_SWAP_DIR, most bytes of "    \
    "frames held in host memory instead (the rest on disk); 0: 85% of physical memory")           \
  X(kSwapDir, "VRAMCACHE_SWAP_DIR", kPath, "", "/mnt/nvme/tmp",                                     \
    "with a host limit: frames past VRAMCACHE_HOST_LIMIT live in a swap file in this folder, on a "  \
    "local disk that can do direct I/O; the file is private (never named, or unlinked at once; "     \
    "mode 0600), so nothing is left behind however the process ends; its space is reserved as "     \
    "frames go there, and when the disk is full an allocation fails with the out-of-memory code; "   \
    "unset: no disk tier")                                                                         \
  X(kDiskDepth, "VRAMCACHE_DISK_DEPTH", kCount, "16", "32",                                          \
    "with a swap folder: direct I/O requests of 1 MiB kept in flight on the disk (io_uring), from 1 " \
    "to 1024")                                                                                     \
  X(kDiskProbe, "VRAMCACHE_DISK_PROBE", kSize, "256M", "64M",                                        \
    "with a swap folder: bytes written then read back at start, in a private file of their own, to " \
    "time the disk as the link is timed (its rates are given against the disk's in the summary); " \
    "0: not timed")                                                                                \
  X(kStatusInterval, "VRAMCACHE_STATUS_INTERVAL", kCount, "10", "2",                                 \
    "with a budget: seconds between status lines (resident bytes, bytes moved each way, misses) "   \
    "at log level info")                                                                          \
  X(kResidencyFile, "VRAMCACHE_RESIDENCY_FILE", kPath, "", "/tmp/residency-%p.csv",                  \
    "with a budget: every 100 ms, write the pager's resident bytes, the device's used memory (with "  \
    "the explicit backend a residency figure; with the managed one it keeps pages moved out), "   \
    "bytes moved and the system's monotonic clock to this CSV file; `%p` becomes the process id "  \
    "(`vramcache run --report` sets it)")                                                          \
  X(kCompressRank, "VRAMCACHE_COMPRESS_RANK", kRank, "0", "h/4",                                   \
    "with a budget: outputs of recognized GEMMs (bf16, fp16 or fp32, both sides at least 512) that " \
    "would move out or stay idle until read are kept as two thin factors of this rank and rebuilt "  \
    "before the read (lossy; deterministic for a run): a whole number, or `h/N`, the output's width " \
    "over N (the lesser of its inner dimension and the GEMM's k: a transformer's hidden size); 0: "  \
    "off. Explicit backend only; `vramcache run --compress h/4` sets it. "                             \
    "The exit summary gives outputs compressed, MB saved, rebuild time and sampled error per GEMM " \
    "(docs/paging.md)")                                                                              \
  X(kAllowOversubscribe, "VRAMCACHE_ALLOW_OVERSUBSCRIBE", kBool, "0", "1",                           \
    "let managed allocations exceed the device's free memory (read at the first managed "           \
    "allocation); without it such an "                                                             \
    "allocation fails with the out-of-memory code (never set this on a shared machine)")

enum class OptionKind { kChoice, kBool, kPath, kSize, kCount, kRank };  // kRank: runtime/compress/rank.h

enum OptionId : int {
#define VC_OPTION_ID(id, env, kind, def, choices, doc) id,
  VC_OPTIONS(VC_OPTION_ID)
#undef VC_OPTION_ID
  kOptionCount
};

struct OptionSpec {
  const char *env;
  OptionKind kind;
  const char *def;
  const char *choices;  // kChoice: "a|b|c"; otherwise an example value
  const char *doc;
};
extern const OptionSpec kOptionSpecs[kOptionCount];

// Values of kMode, in the order of its choices.
enum class Mode : int { kOff = 0, kCount = 1, kProfile = 2 };
// Values of kPolicy.
enum class PagingPolicy : int { kPredictive = 0, kReactive = 1 };
// Values of kBackend.
enum class PagingBackend : int { kManaged = 0, kExplicit = 1 };

struct Options {
  int64_t num[kOptionCount] = {};  // kChoice: index; kBool: 0/1; kSize: bytes; kCount: the number
  std::string str[kOptionCount];   // kPath: the path; every kind: the text as given

  Mode mode() const { return static_cast<Mode>(num[kMode]); }
  bool flag(OptionId id) const { return num[id] != 0; }
};

using EnvLookup = std::function<const char *(const char *name)>;

// Fills `out` from `lookup` (defaults for unset or empty variables). On a bad value returns false
// and sets `error` to one line naming the variable, the bad value and a valid example.
// `all_names` lists every VRAMCACHE_* variable present, so misspelled ones are caught too.
bool parse_options(const EnvLookup &lookup, const char *const *environ_list, Options *out,
                   std::string *error);

// Parses "2M", "64K", "24G", "1024" (bytes; binary suffixes K, M, G, T, case-insensitive, an
// optional trailing B). False on anything else or on overflow.
bool parse_size(const std::string &text, uint64_t *bytes);

// A path option's value with `%p` replaced by this process's id and `%r` by its rank (RANK, else 0),
// so that several processes under the library write apart (every path option).
std::string expand_path(std::string path);

// The explicit backend's frame for a budget when VRAMCACHE_FRAME_SIZE is not given: the one place
// that decides it, for the library and for the pager replay of `vramcache simulate` and `advise`
// (Note [Frame size] in options.cc: 1/128 of the budget rounded down to a power of two, from 2M to
// 256M).
uint64_t default_frame_size(uint64_t budget);
// The explicit backend's frame: VRAMCACHE_FRAME_SIZE, or where it is 0, default_frame_size.
uint64_t frame_size(const Options &o);

// Markdown table of every option (the README's list is generated from this).
std::string options_markdown();

}  // namespace vc

// The arguments of the subcommands that read a trace (report, simulate, advise): declared in one
// place (trace_args.cc, with CLI11), validated there with one line per mistake, so a subcommand's
// code receives checked values. Parsing only: nothing here reads the trace.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/simulator/simulate.h"

namespace vc {

enum class TraceCommand { kReport, kSimulate, kAdvise };

struct TraceArgs {
  uint64_t budget = 0;          // --budget, 0 = not given
  uint64_t page_size = 0;       // --page-size, 0 = the trace's own
  uint64_t prefetch_ahead = 0;  // --prefetch-ahead (simulate), 0 = the pager's default
  uint64_t frame_size = 0;      // --frame-size (simulate): the pager replay's frames, 0 = the library's default
  LinkModel link;               // --link GBPS each way
  uint64_t host_limit = 0;      // --host-limit SIZE: simulate and report, three levels (0: two); advise, see below
  double disk_bps = 0;          // --disk GBPS (simulate, with --host-limit), bytes per second
  int64_t compress_rank = 0;    // --compress RANK (simulate): VRAMCACHE_COMPRESS_RANK's encoding, 0 = off
  std::string out;              // -o FILE
  std::string perfetto;         // --perfetto FILE.json (report)
  bool json = false;            // --json (advise)
  // advise: the cost of one remap of a frame, microseconds, fixed and per MiB of the frame
  // (--remap-us, --remap-us-per-mib; Note [Remap cost] in advise.cc); --host-limit says whether the
  // homes fit (0: not asked).
  double remap_us = 60, remap_us_per_mib = 2.2;
  std::string trace;            // the trace file
};

// Parses the arguments after the subcommand's name. Returns -1 when the subcommand should go on,
// else the exit code to return: 0 after --help (printed to stdout), 2 after a usage error (one line
// on stderr).
int parse_trace_args(int argc, char **argv, TraceCommand cmd, TraceArgs *args);

}  // namespace vc

// The options of report, simulate and advise, declared once (declare_options) and checked after
// CLI11 has split them, so that each mistake is one line in the command's own words ("--budget 12Q
// is not a size") and exit code 2. A new option of a subcommand is one line in declare_options and,
// if it needs a check, one in check_options.
#include "profiler/trace_args.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "runtime/compress/rank.h"
#include "runtime/options.h"
#include "runtime/trace_validate.h"

namespace vc {
namespace {

const char *name_of(TraceCommand cmd) {
  switch (cmd) {
    case TraceCommand::kReport: return "report";
    case TraceCommand::kSimulate: return "simulate";
    case TraceCommand::kAdvise: return "advise";
  }
  return "?";
}

const char *about(TraceCommand cmd) {
  switch (cmd) {
    case TraceCommand::kReport:
      return "Summary of a recorded trace, its HTML report (next to the trace unless -o) and, with --perfetto, its "
             "timeline as Chrome trace-event JSON for Perfetto UI or chrome://tracing. Needs no GPU.";
    case TraceCommand::kSimulate:
      return "Predicted traffic, stalls and step time for a budget (the simulator), and what the library's own pager "
             "would move (the pager replay). Needs no GPU.";
    case TraceCommand::kAdvise:
      return "Sweeps the settings a user would try on the GPU (frame size, prefetch window, bypass) with the pager "
             "replay and the simulator, each step priced with its link time and its frames' remaps, prints the best few, "
             "and says when vramcache is the wrong tool. Needs no GPU.";
  }
  return "";
}

// The values as typed, checked by check_options.
struct Raw {
  std::string budget, page_size, frame_size, prefetch_ahead, link, remap_us, remap_us_per_mib, host_limit, disk, compress;
};

void declare_options(CLI::App *app, TraceCommand cmd, Raw *raw, TraceArgs *args) {
  const bool report = cmd == TraceCommand::kReport, simulate = cmd == TraceCommand::kSimulate,
             advise = cmd == TraceCommand::kAdvise;
  app->add_option("--budget", raw->budget,
                  report ? "a budget to price besides 25/50/75% of the peak (e.g. 16G)" : "GPU memory for the program's data (e.g. 16G); required");
  app->add_option("--link", raw->link, "PCIe rate each way in GB/s (default 55)");
  if (!advise) app->add_option("--page-size", raw->page_size, "page size of the model, a power of two from 64K to 1G (default: the trace's)");
  if (simulate)
    app->add_option("--frame-size", raw->frame_size,
                    "the pager replay's frames, a power of two from 64K to 1G (default: the library's for the budget, "
                    "or --page-size if given); the simulator's pages stay the trace's");
  if (simulate) app->add_option("--prefetch-ahead", raw->prefetch_ahead, "the pager replay's prefetch window (default 1/32 of the budget)");
  if (!advise) app->add_option("--host-limit", raw->host_limit, report ? "host memory for frames' homes, the rest on disk: the report charts the three levels (with --disk)" : "host memory for frames' homes, the rest on disk: the three-level replay (with --disk)");
  if (simulate)
    app->add_option("--compress", raw->compress,
                    "predict compression of GEMM outputs at this rank (as VRAMCACHE_COMPRESS_RANK: a whole number or "
                    "h/N), from the trace's GEMM records");
  app->add_option("--disk", raw->disk, "the swap disk's rate in GB/s, reads and writes sharing it (with --host-limit)");
  if (!advise) app->add_option("-o", args->out, report ? "the HTML report's file (default: TRACE with .html)" : "write the figures as JSON to this file");
  if (report) app->add_option("--perfetto", args->perfetto, "also write the timeline as Chrome trace-event JSON (Perfetto UI, chrome://tracing)");
  if (advise) {
    app->add_flag("--json", args->json, "print the advice as JSON instead of text");
    app->add_option("--remap-us", raw->remap_us, "fixed cost of remapping one frame, microseconds (default 60)");
    app->add_option("--remap-us-per-mib", raw->remap_us_per_mib, "and its cost per MiB of the frame (default 2.2)");
    app->add_option("--host-limit", raw->host_limit,
                    "pinned host memory for frames' homes (VRAMCACHE_HOST_LIMIT, e.g. 64G); below the peak a swap file "
                    "takes the rest: with --disk the best setting is replayed on three levels at this limit, half and twice it");
  }
  app->add_option("TRACE", args->trace, "the trace file (.vctrace)");
}

bool size_value(const char *flag, const std::string &value, uint64_t *out) {
  if (value.empty()) return true;
  if (!parse_size(value.c_str(), out) || *out == 0) {
    fprintf(stderr, "vramcache: %s %s is not a size (for example %s 16G)\n", flag, value.c_str(), flag);
    return false;
  }
  return true;
}

// A number typed for `flag`, from lo to hi; empty: nothing given, *out left as it is. `needs` ends
// the message.
bool number_value(const char *flag, const std::string &text, double lo, double hi, const std::string &needs, double *out) {
  if (text.empty()) return true;
  char *end = nullptr;
  const double v = strtod(text.c_str(), &end);
  if (*end || !(v >= lo && v <= hi)) return fprintf(stderr, "vramcache: %s needs %s\n", flag, needs.c_str()), false;
  *out = v;
  return true;
}

bool power_of_two(const char *flag, uint64_t v) {
  if (!v || (v >= kMinPageSize && v <= kMaxPageSize && !(v & (v - 1)))) return true;
  return fprintf(stderr, "vramcache: %s must be a power of two from 64K to 1G\n", flag), false;
}

bool check_options(TraceCommand cmd, const Raw &raw, TraceArgs *args) {
  if (!size_value("--budget", raw.budget, &args->budget) || !size_value("--page-size", raw.page_size, &args->page_size) ||
      !size_value("--prefetch-ahead", raw.prefetch_ahead, &args->prefetch_ahead) ||
      !size_value("--frame-size", raw.frame_size, &args->frame_size) ||
      !size_value("--host-limit", raw.host_limit, &args->host_limit) || !power_of_two("--frame-size", args->frame_size) ||
      !power_of_two("--page-size", args->page_size))
    return false;
  if (cmd != TraceCommand::kAdvise && raw.host_limit.empty() != raw.disk.empty())
    return fprintf(stderr, "vramcache: --host-limit and --disk go together (for example --host-limit 16G --disk 2)\n"), false;
  double disk = 0, link = 0;
  if (!number_value("--disk", raw.disk, 1e-3, 1e6, "GB/s, from 0.001 to 1000000, e.g. --disk 2", &disk) ||
      !number_value("--link", raw.link, 1e-3, 1e6, "GB/s each way, from 0.001 to 1000000, e.g. --link 55", &link))
    return false;
  args->disk_bps = disk * 1e9;
  if (link) {
    args->link.h2d_bytes_per_s = args->link.d2h_bytes_per_s = link * 1e9;
    args->link.both_bytes_per_s = std::min(args->link.both_bytes_per_s, 2 * link * 1e9);
  }
  for (auto [flag, text, out] : {std::tuple{"--remap-us", &raw.remap_us, &args->remap_us},
                                 std::tuple{"--remap-us-per-mib", &raw.remap_us_per_mib, &args->remap_us_per_mib}})
    if (!number_value(flag, *text, 0, 1e6, std::string("microseconds from 0 to 1000000, e.g. ") + flag + " 60", out))
      return false;
  std::string why;
  if (!raw.compress.empty() && !parse_compress_rank(raw.compress, &args->compress_rank, &why))
    return fprintf(stderr, "vramcache: --compress %s: %s\n", raw.compress.c_str(), why.c_str()), false;
  if (args->trace.empty()) return fprintf(stderr, "vramcache %s: no trace file given\n", name_of(cmd)), false;
  if (cmd != TraceCommand::kReport && !args->budget)
    return fprintf(stderr, "vramcache %s: --budget SIZE is required (for example --budget 16G)\n", name_of(cmd)), false;
  return true;
}

}  // namespace

int parse_trace_args(int argc, char **argv, TraceCommand cmd, TraceArgs *args) {
  std::string name = std::string("vramcache ") + name_of(cmd);
  CLI::App app{about(cmd), name};
  app.allow_extras();  // reported below in the command's words, the first one only
  app.footer("Exit codes: 0 done; 1 the trace could not be read or a file not written (one line says why); 2 usage error.");
  Raw raw;
  declare_options(&app, cmd, &raw, args);
  try {
    std::vector<std::string> rest;
    for (int i = argc - 1; i >= 0; --i) rest.push_back(argv[i]);  // CLI11 takes them last first
    app.parse(rest);
  } catch (const CLI::CallForHelp &) {
    fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ArgumentMismatch &e) {
    fprintf(stderr, "%s: %s (see %s --help)\n", name.c_str(), e.what(), name.c_str());
    return 2;
  } catch (const CLI::ParseError &e) {
    fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    return 2;
  }
  if (!app.remaining().empty()) {
    fprintf(stderr, "%s: unexpected argument %s\n", name.c_str(), app.remaining().front().c_str());
    return 2;
  }
  return check_options(cmd, raw, args) ? -1 : 2;
}

}  // namespace vc

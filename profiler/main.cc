// The `vramcache` command: run and profile a program under the library, report, simulate and
// advise on a recorded trace. It validates the configuration before the program starts (a bad value
// is one line and exit code 2, and nothing runs). Every option flag of run and profile is derived
// from the options table: VRAMCACHE_LOG_LEVEL is --log-level. Those flags end at the first "--",
// after which everything is the program's, so they are split here rather than by CLI11 (whose
// prefix mode does not stop at "--"); the trace subcommands' options are CLI11's (trace_args.cc).
// It links the runtime core, never the hooks.
#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "profiler/commands.h"
#include "runtime/options.h"

extern char **environ;

namespace {

constexpr int kUsageError = 2;

#ifndef VC_VERSION
#define VC_VERSION "0.1"
#endif
#ifndef VC_COMMIT
#define VC_COMMIT "unknown"
#endif

const char kExitCodes[] =
    "Exit codes: run and profile: the program's own (128 + N if signal N killed it), 127 if it could not be\n"
    "started, 2 if the configuration is wrong (nothing runs), 1 if the program succeeded but its report could\n"
    "not be written; report, simulate, advise: 0 done, 1 the trace could not be read or a file not written,\n"
    "2 usage error.\n";

void usage(FILE *out) {
  fprintf(out,
          "usage: vramcache run [OPTIONS] -- COMMAND [ARGS...]   run COMMAND with libvramcache.so preloaded\n"
          "       vramcache run --report DIR [OPTIONS] -- COMMAND [ARGS...]\n"
          "                                                      also record its trace, then write DIR/report-PID.html\n"
          "                                                      and DIR/timeline-PID.json (Perfetto)\n"
          "                                                      for each process, with the resident bytes measured\n"
          "                                                      over time under --budget\n"
          "       vramcache profile [--iterations N] [-o DIR] [OPTIONS] -- COMMAND [ARGS...]\n"
          "                                                      record COMMAND's access trace, then report it\n"
          "       vramcache report [--budget SIZE] [--link GBPS] [--page-size SIZE] [--host-limit SIZE --disk GBPS] [-o FILE.html] [--perfetto FILE.json] TRACE\n"
          "                                                      summary and HTML report of a recorded trace, and its\n"
          "                                                      timeline for Perfetto UI or chrome://tracing\n"
          "       vramcache simulate --budget SIZE [--link GBPS] [--page-size SIZE] [--prefetch-ahead SIZE] [--host-limit SIZE --disk GBPS] [-o FILE.json] TRACE\n"
          "                                                      predicted traffic, stalls and step time for a budget\n"
          "                                                      (and, with a host limit, the disk's traffic and the three-level bound)\n"
          "       vramcache advise --budget SIZE [--link GBPS] [--json] TRACE\n"
          "                                                      the best frame size, prefetch window and bypass for\n"
          "                                                      a budget, or why vramcache is the wrong tool\n"
          "       vramcache options [--markdown]                 list every option\n"
          "       vramcache --version                            the version and the commit it was built from\n"
          "       vramcache help, vramcache SUBCOMMAND --help\n"
          "OPTIONS of run and profile (each sets the VRAMCACHE_* variable of the same name):\n");
  for (const vc::OptionSpec &spec : vc::kOptionSpecs) {
    std::string flag = "--";
    for (const char *p = spec.env + strlen("VRAMCACHE_"); *p; ++p) flag += *p == '_' ? '-' : char(tolower(*p));
    fprintf(out, "  %-26s %s (%s; default %s)\n", (flag + " V").c_str(), spec.env, spec.choices,
            *spec.def ? spec.def : "unset");
  }
  fputs(kExitCodes, out);
}

bool is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

// --log-level -> VRAMCACHE_LOG_LEVEL; null if no option has that flag.
const char *env_for_flag(const char *flag) {
  if (strncmp(flag, "--", 2) != 0) return nullptr;
  if (!strcmp(flag, "--compress")) return "VRAMCACHE_COMPRESS_RANK";  // the short name of --compress-rank
  std::string want = "VRAMCACHE_";
  for (const char *p = flag + 2; *p; ++p) want += *p == '-' ? '_' : char(toupper(*p));
  for (const vc::OptionSpec &spec : vc::kOptionSpecs)
    if (want == spec.env) return spec.env;
  return nullptr;
}

std::string self_dir() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (slash) *slash = '\0';
  return path;
}

// Sets the VRAMCACHE_* variables given as flags up to "--"; returns the index of the command
// after "--", -1 (message printed) or -2 (--help: usage printed to stdout). `extra` handles flags of the calling subcommand.
int parse_run_flags(int argc, char **argv, const char *what,
                    const std::function<int(int, char **)> &extra = nullptr) {
  int i = 0;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    if (is_help(argv[i])) {
      usage(stdout);
      return -2;
    }
    if (extra) {
      int used = extra(argc - i, argv + i);
      if (used < 0) return -1;
      if (used > 0) {
        i += used - 1;
        continue;
      }
    }
    const char *env = env_for_flag(argv[i]);
    if (!env || i + 1 >= argc || strcmp(argv[i + 1], "--") == 0) {
      fprintf(stderr, "vramcache %s: %s %s\n", what, argv[i], env ? "needs a value" : "is not an option");
      usage(stderr);
      return -1;
    }
    setenv(env, argv[++i], 1);
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "vramcache %s: no command given (put it after --)\n", what);
    return -1;
  }
  return i + 1;
}

// Validates the configuration (into `out` if given) and puts the library in LD_PRELOAD. False:
// message printed.
bool prepare_preload(vc::Options *out = nullptr) {
  vc::Options options;
  std::string error;
  if (!vc::parse_options([](const char *name) { return getenv(name); }, environ, &options, &error)) {
    fprintf(stderr, "vramcache: %s\n", error.c_str());
    return false;
  }
  // Next to the command (build/), or in ../lib beside its bin/ (make install PREFIX=...).
  std::string lib = self_dir() + "/libvramcache.so", installed = self_dir() + "/../lib/libvramcache.so";
  if (access(lib.c_str(), R_OK) != 0 && access(installed.c_str(), R_OK) == 0) lib = installed;
  if (access(lib.c_str(), R_OK) != 0) {
    fprintf(stderr, "vramcache: %s not found (build it with `make`, or install with `make install`)\n", lib.c_str());
    return false;
  }
  const char *old = getenv("LD_PRELOAD");
  std::string preload = old && *old ? lib + ":" + old : lib;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (out) *out = options;
  return true;
}

// Creates the folder `dir` (not its parents). False: message printed.
bool make_folder(const std::string &dir, const char *what) {
  struct stat st;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "vramcache %s: cannot create %s: %s\n", what, dir.c_str(), strerror(errno));
    return false;
  }
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "vramcache %s: cannot create %s: it exists and is not a folder\n", what, dir.c_str());
    return false;
  }
  return true;
}

// Runs `command` to its end, in a child under the environment set so far. True: it ran, `rc` is its
// exit code (128 + the signal if it was killed). False: it did not run (message printed), `rc` is
// what to exit with: 127 if it could not be started.
bool run_to_end(char **command, const char *what, int *rc) {
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "vramcache %s: fork failed: %s\n", what, strerror(errno));
    return *rc = 1, false;
  }
  if (pid == 0) {
    execvp(command[0], command);
    fprintf(stderr, "vramcache: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  unsetenv("LD_PRELOAD");  // the reports are written by this process, which needs no hooks
  return *rc != 127;
}

// What `run --report DIR` writes, one of each per process: PREFIX<pid>SUFFIX (the library replaces
// %p with the pid). Files of an earlier run must not pass for this one's, so they are removed before
// it; only names with a number there, so that a report the user renamed stays.
struct ReportFile {
  const char *prefix, *suffix;
};
constexpr ReportFile kTraceFiles{"trace-", ".vctrace"}, kResidencyFiles{"residency-", ".csv"},
    kReportFiles{"report-", ".html"}, kSummaryFiles{"summary-", ".txt"}, kTimelineFiles{"timeline-", ".json"};

std::string report_file(const std::string &dir, const ReportFile &f, const std::string &pid) {
  return dir + "/" + f.prefix + pid + f.suffix;
}

// The process ids of the files `f` in `dir`, in increasing order.
std::vector<std::string> pids_of(const std::string &dir, const ReportFile &f) {
  const std::string prefix = f.prefix, suffix = f.suffix;
  std::vector<std::string> pids;
  DIR *d = opendir(dir.c_str());
  if (!d) return pids;
  while (const dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string pid = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (pid.find_first_not_of("0123456789") == std::string::npos) pids.push_back(pid);
  }
  closedir(d);
  std::sort(pids.begin(), pids.end(), [](const std::string &x, const std::string &y) {
    return x.size() != y.size() ? x.size() < y.size() : x < y;
  });
  return pids;
}

// `run --report DIR`: the command runs in profile mode (so the library writes the trace of its first
// iterations) with its trace and residency file in DIR; then each trace is reported with the
// residency file of the same process. Exit code: the program's, else 1 if a report failed.
int run_reported(const std::string &dir, char **command) {
  setenv("VRAMCACHE_MODE", "profile", 1);
  setenv("VRAMCACHE_TRACE_FILE", report_file(dir, kTraceFiles, "%p").c_str(), 1);
  setenv("VRAMCACHE_RESIDENCY_FILE", report_file(dir, kResidencyFiles, "%p").c_str(), 1);
  vc::Options options;
  if (!prepare_preload(&options) || !make_folder(dir, "run")) return kUsageError;
  for (const ReportFile &f : {kTraceFiles, kResidencyFiles, kReportFiles, kSummaryFiles, kTimelineFiles})
    for (const std::string &pid : pids_of(dir, f)) unlink(report_file(dir, f, pid).c_str());
  int rc = 0;
  if (!run_to_end(command, "run", &rc)) return rc;
  std::vector<std::string> pids = pids_of(dir, kTraceFiles);
  if (pids.empty()) {
    fprintf(stderr, "vramcache run: %s exited with %d and no trace was written to %s (it did no CUDA work, or was killed)\n",
            command[0], rc, dir.c_str());
    return rc;
  }
  if (rc) fprintf(stderr, "vramcache run: %s exited with %d; reporting the traces it left\n", command[0], rc);
  int report_rc = 0;
  for (const std::string &pid : pids) {
    std::string html = report_file(dir, kReportFiles, pid), summary = report_file(dir, kSummaryFiles, pid),
                residency = report_file(dir, kResidencyFiles, pid), timeline = report_file(dir, kTimelineFiles, pid);
    if (access(residency.c_str(), F_OK) != 0) residency.clear();  // no budget, or paging never started
    printf("\nvramcache run: process %s: %s, %s\n", pid.c_str(), html.c_str(), summary.c_str());
    fflush(stdout);  // before the report's lines, which may go to stderr
    if (vc::report_command(report_file(dir, kTraceFiles, pid), html, summary, uint64_t(options.num[vc::kBudget]), 0,
                           vc::LinkModel{}, residency, timeline) != 0)
      report_rc = 1;
  }
  return rc ? rc : report_rc;
}

int run(int argc, char **argv) {
  const char *report_dir = nullptr;
  int cmd = parse_run_flags(argc, argv, "run", [&](int n, char **a) -> int {
    if (strcmp(a[0], "--report") != 0) return 0;
    if (n < 2 || !strcmp(a[1], "--")) return fprintf(stderr, "vramcache run: --report needs a folder\n"), -1;
    report_dir = a[1];
    return 2;
  });
  if (cmd < 0) return cmd == -2 ? 0 : kUsageError;
  if (report_dir) return run_reported(report_dir, argv + cmd);
  if (!prepare_preload()) return kUsageError;
  execvp(argv[cmd], argv + cmd);
  fprintf(stderr, "vramcache: cannot run %s: %s\n", argv[cmd], strerror(errno));
  return 127;
}

// Runs the program to its end (the trace is written by the library), then reports the trace.
int profile(int argc, char **argv) {
  std::string dir = "vramcache-profile";
  int cmd = parse_run_flags(argc, argv, "profile", [&](int n, char **a) -> int {
    if (!strcmp(a[0], "-o") || !strcmp(a[0], "--output")) {
      if (n < 2) return fprintf(stderr, "vramcache profile: -o needs a folder\n"), -1;
      dir = a[1];
      return 2;
    }
    if (!strcmp(a[0], "--iterations")) {
      if (n < 2) return fprintf(stderr, "vramcache profile: --iterations needs a number\n"), -1;
      setenv("VRAMCACHE_PROFILE_ITERATIONS", a[1], 1);
      return 2;
    }
    return 0;
  });
  if (cmd < 0) return cmd == -2 ? 0 : kUsageError;
  if (!make_folder(dir, "profile")) return kUsageError;
  std::string trace = dir + "/trace.vctrace";
  unlink(trace.c_str());  // a trace left from an earlier run must not pass for this one's
  setenv("VRAMCACHE_MODE", "profile", 1);
  setenv("VRAMCACHE_TRACE_FILE", trace.c_str(), 1);
  setenv("VRAMCACHE_LOG_LEVEL", getenv("VRAMCACHE_LOG_LEVEL") ? getenv("VRAMCACHE_LOG_LEVEL") : "info", 1);
  if (!prepare_preload()) return kUsageError;
  int rc = 0;
  if (!run_to_end(argv + cmd, "profile", &rc)) return rc;
  if (access(trace.c_str(), R_OK) != 0) {
    fprintf(stderr, "vramcache profile: %s exited with %d and no trace was written (it did no CUDA work, or was killed)\n",
            argv[cmd], rc);
    return rc ? rc : 1;
  }
  if (rc) fprintf(stderr, "vramcache profile: %s exited with %d; reporting the trace it left\n", argv[cmd], rc);
  int report_rc = vc::report_command(trace, dir + "/report.html", dir + "/summary.txt", 0);
  return rc ? rc : report_rc;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kUsageError : 0;
  }
  if (!strcmp(argv[1], "run")) return run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "profile")) return profile(argc - 2, argv + 2);
  if (!strcmp(argv[1], "report")) return vc::report_main(argc - 2, argv + 2);
  if (!strcmp(argv[1], "simulate")) return vc::simulate_main(argc - 2, argv + 2);
  if (!strcmp(argv[1], "advise")) return vc::advise_main(argc - 2, argv + 2);
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    if (argc > 2) return fprintf(stderr, "vramcache --version: unexpected argument %s\n", argv[2]), kUsageError;
    printf("vramcache %s (commit %s)\n", VC_VERSION, VC_COMMIT);
    return 0;
  }
  if (!strcmp(argv[1], "options")) {
    if (argc == 3 && is_help(argv[2])) {
      printf("usage: vramcache options [--markdown]\n  every VRAMCACHE_* option with its default and values;\n"
             "  --markdown: as the README's table\n");
      return 0;
    }
    if (argc > 3 || (argc == 3 && strcmp(argv[2], "--markdown") != 0)) {
      fprintf(stderr, "vramcache options: unexpected argument %s (only --markdown)\n", argv[argc == 3 ? 2 : 3]);
      return kUsageError;
    }
    if (argc > 2) {
      fputs(vc::options_markdown().c_str(), stdout);
    } else {
      for (const vc::OptionSpec &spec : vc::kOptionSpecs)
        printf("%-30s %s\n%-30s   default %s, values %s\n", spec.env, spec.doc, "",
               *spec.def ? spec.def : "unset", spec.choices);
    }
    return 0;
  }
  fprintf(stderr, "vramcache: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return kUsageError;
}

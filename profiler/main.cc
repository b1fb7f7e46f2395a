// The `vramcache` command. It validates the configuration before the program starts (a bad value
// is one line and exit code 2, and nothing runs), then execs the program with the library
// preloaded. Every option flag is derived from the options table: VRAMCACHE_LOG_LEVEL is
// --log-level. It links the runtime core, never the hooks.
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "runtime/options.h"

extern char **environ;

namespace {

constexpr int kUsageError = 2;

void usage(FILE *out) {
  fprintf(out,
          "usage: vramcache run [OPTIONS] -- COMMAND [ARGS...]   run COMMAND with libvramcache.so preloaded\n"
          "       vramcache options [--markdown]                 list every option\n"
          "       vramcache help\n"
          "options of run (each sets the VRAMCACHE_* variable of the same name):\n");
  for (const vc::OptionSpec &spec : vc::kOptionSpecs) {
    std::string flag = "--";
    for (const char *p = spec.env + strlen("VRAMCACHE_"); *p; ++p) flag += *p == '_' ? '-' : char(tolower(*p));
    fprintf(out, "  %-26s %s (%s; default %s)\n", (flag + " V").c_str(), spec.env, spec.choices,
            *spec.def ? spec.def : "unset");
  }
}

// --log-level -> VRAMCACHE_LOG_LEVEL; null if no option has that flag.
const char *env_for_flag(const char *flag) {
  if (strncmp(flag, "--", 2) != 0) return nullptr;
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

int run(int argc, char **argv) {
  int i = 0;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    const char *env = env_for_flag(argv[i]);
    if (!env || i + 1 >= argc || strcmp(argv[i + 1], "--") == 0) {
      fprintf(stderr, "vramcache run: %s %s\n", argv[i], env ? "needs a value" : "is not an option");
      usage(stderr);
      return kUsageError;
    }
    setenv(env, argv[++i], 1);
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "vramcache run: no command given (put it after --)\n");
    return kUsageError;
  }
  vc::Options options;
  std::string error;
  if (!vc::parse_options([](const char *name) { return getenv(name); }, environ, &options, &error)) {
    fprintf(stderr, "vramcache: %s\n", error.c_str());
    return kUsageError;
  }
  std::string lib = self_dir() + "/libvramcache.so";
  if (access(lib.c_str(), R_OK) != 0) {
    fprintf(stderr, "vramcache: %s not found (build it with `make`)\n", lib.c_str());
    return kUsageError;
  }
  const char *old = getenv("LD_PRELOAD");
  std::string preload = old && *old ? lib + ":" + old : lib;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  execvp(argv[i + 1], argv + i + 1);
  fprintf(stderr, "vramcache: cannot run %s: %s\n", argv[i + 1], strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kUsageError : 0;
  }
  if (!strcmp(argv[1], "run")) return run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "options")) {
    if (argc > 2 && !strcmp(argv[2], "--markdown")) {
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

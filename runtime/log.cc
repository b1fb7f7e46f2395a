// Implementation of the one log format. Lines are formatted into a stack buffer and written with
// one write(2), so lines from several threads never interleave.
#include "runtime/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace vc {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<int> g_fd{2};
const char *const kNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
}  // namespace

const char *process_rank() {
  static const char *rank = [] {
    const char *r = getenv("RANK");  // torchrun, and most launchers of one process per GPU
    return r && *r && strspn(r, "0123456789") == strlen(r) ? r : nullptr;
  }();
  return rank;
}

void log_configure(LogLevel level, const char *path) {
  g_level.store(static_cast<int>(level));
  if (path && *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) g_fd.store(fd);
    else log_write(LogLevel::kWarn, __FILE__, __LINE__, "cannot open log file %s; logging to stderr", path);
  }
}

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_write(LogLevel level, const char *file, int line, const char *fmt, ...) {
  char buf[1024];
  const char *base = strrchr(file, '/');
  // Keep the folder: "runtime/options.cc" says more than "options.cc".
  if (base) {
    const char *p = base;
    while (p > file && p[-1] != '/') --p;
    base = p;
  } else {
    base = file;
  }
  const char *rank = process_rank();
  int n = snprintf(buf, sizeof buf, "vramcache %s%s%s%d:%ld %s %s:%d ", rank ? "rank " : "", rank ? rank : "", rank ? " " : "", getpid(),
                   (long)syscall(SYS_gettid), kNames[static_cast<int>(level)], base, line);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && n < (int)sizeof buf) n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n >= (int)sizeof buf - 1) n = sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(g_fd.load(std::memory_order_relaxed), buf, n);
  (void)w;
}

}  // namespace vc

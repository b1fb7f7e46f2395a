// One log format for the whole library: `vramcache <pid>:<tid> LEVEL file:line message`.
// The level is checked before any formatting, so a disabled line costs one load and a compare.
// Must not allocate on the heap or call into CUDA: it runs inside hooks and constructors.
#pragma once

namespace vc {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Set once at start-up from the options; read on every log call.
// The process's rank among the processes of one job (the RANK variable of torchrun and most
// launchers), or null. Log lines, the summary and `%r` in paths name it.
const char *process_rank();

void log_configure(LogLevel level, const char *path);
LogLevel log_level();
void log_write(LogLevel level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace vc

#define VC_LOG(lvl, ...)                                                              \
  do {                                                                                \
    if (static_cast<int>(lvl) <= static_cast<int>(::vc::log_level()))                 \
      ::vc::log_write(lvl, __FILE__, __LINE__, __VA_ARGS__);                          \
  } while (0)
#define VC_ERROR(...) VC_LOG(::vc::LogLevel::kError, __VA_ARGS__)
#define VC_WARN(...) VC_LOG(::vc::LogLevel::kWarn, __VA_ARGS__)
#define VC_INFO(...) VC_LOG(::vc::LogLevel::kInfo, __VA_ARGS__)
#define VC_DEBUG(...) VC_LOG(::vc::LogLevel::kDebug, __VA_ARGS__)

// Repeated warnings are capped: each call site logs at most kMaxRepeats times, then once more
// to say it goes quiet. The counter is per call site (a function-local static).
#define VC_WARN_CAPPED(...)                                                           \
  do {                                                                                \
    static std::atomic<int> vc_seen_{0};                                              \
    int vc_n_ = vc_seen_.fetch_add(1, std::memory_order_relaxed);                     \
    if (vc_n_ < 5) VC_WARN(__VA_ARGS__);                                              \
    if (vc_n_ == 5) VC_WARN("(further warnings from this place are suppressed)");     \
  } while (0)

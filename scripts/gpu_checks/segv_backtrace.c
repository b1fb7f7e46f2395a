// Diagnostic preload (not part of the library): on SIGSEGV, SIGBUS or SIGABRT, every frame of the
// faulting thread to stderr, with the load bases of the shared objects so that the offsets can be
// resolved here with addr2line against the same build. Then the signal's default action.
//   cc -shared -fPIC -o /tmp/segv_bt.so scripts/gpu_checks/segv_backtrace.c
//   LD_PRELOAD=/tmp/segv_bt.so:build/libvramcache.so CMD
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char alt_stack[1 << 16];

static void on_fault(int sig, siginfo_t *info, void *ctx) {
  (void)ctx;
  char line[128];
  int n = snprintf(line, sizeof line, "segv_backtrace: signal %d at address %p, thread %d\n", sig, info->si_addr,
                   (int)gettid());
  write(2, line, n);
  void *frames[64];
  int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGABRT, &sa, NULL);
}

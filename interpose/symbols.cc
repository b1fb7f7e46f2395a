// The resolver of real functions, the exported dlsym, and the lookup that both dlsym and
// cuGetProcAddress use to hand out wrappers (Note [Lookup by identity] in hooks.def).
#include "interpose/symbols.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <string>
#include <vector>

#include "interpose/observer/without_cupti.h"
#include "interpose/library.h"
#include "interpose/observed.h"
#include "runtime/log.h"

namespace vc::interpose {

const HookRow kHooks[kHookCount] = {
#define VC_HOOK(lib, symbol, base, version, ptds, type) \
  {Lib::lib, #symbol, base, version, ptds != 0, reinterpret_cast<void *>(static_cast<Type_##symbol>(&::symbol))},
#include "interpose/hooks.def"
#undef VC_HOOK
};

namespace {

std::atomic<void *> g_real[kHookCount];

}  // namespace

const char *lib_soname(Lib lib) {
  switch (lib) {
    case Lib::kCudart: return "libcudart.so.13";
    case Lib::kCuda: return "libcuda.so.1";
    case Lib::kCublas: return "libcublas.so.13";
    case Lib::kCublasLt: return "libcublasLt.so.13";
    case Lib::kCupti: return "libcupti.so.13";
    case Lib::kNccl: return "libnccl.so.2";
  }
  return "";
}

}  // namespace vc::interpose

// Note [dlsym before start-up]
// Objects initialized before vramcache's constructor look functions up through our exported dlsym:
// a sanitizer's runtime (ThreadSanitizer finds the C library's functions it intercepts with
// dlsym(RTLD_NEXT, name) as it starts, before any code it instruments may run) or the constructor of
// a library loaded ahead of us. Until the constructor has decided to hand out wrappers (and forever
// in off mode) the exported dlsym is therefore a jump to glibc's own, written in assembly: it runs
// no instrumented code, opens no object (a dlopen there would run initializers of objects not yet
// ready), and since the jump leaves the caller's return address in place, glibc answers RTLD_NEXT
// and RTLD_DEFAULT for the real caller, exactly. Once wrapping is on, it jumps to
// vc_dlsym_wrapped, which still sees the caller's return address. x86-64 only, as the library is.
extern "C" {
__attribute__((visibility("hidden"))) unsigned char vc_dlsym_wraps = 0;
__attribute__((visibility("hidden"))) void *vc_glibc_dlsym_fn = nullptr;

// glibc's dlsym, found once through dlvsym (which nothing interposes): the newest version first,
// then the x86-64 baseline. Called from the assembly below before sanitizers are ready.
__attribute__((visibility("hidden"), used, no_sanitize("thread"))) void *vc_resolve_glibc_dlsym() {
  void *fn = __atomic_load_n(&vc_glibc_dlsym_fn, __ATOMIC_ACQUIRE);
  if (fn) return fn;
  fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!fn) fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (fn) __atomic_store_n(&vc_glibc_dlsym_fn, fn, __ATOMIC_RELEASE);
  return fn;
}
}

asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    cmpb $0, vc_dlsym_wraps(%rip)
    jne vc_dlsym_wrapped
    movq vc_glibc_dlsym_fn(%rip), %rax
    testq %rax, %rax
    jnz 1f
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call vc_resolve_glibc_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 2f
1:  jmp *%rax
2:  ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");

namespace vc::interpose {

void wrap_lookups() { __atomic_store_n(&vc_dlsym_wraps, 1, __ATOMIC_RELEASE); }

void *real_dlsym(void *handle, const char *name) {
  using DlsymFn = void *(*)(void *, const char *);
  auto fn = reinterpret_cast<DlsymFn>(vc_resolve_glibc_dlsym());
  return fn ? fn(handle, name) : nullptr;
}

namespace {

// The C library's own dlopen and dlclose, for lookups. A tool that interposes dlopen may call
// dlsym (ours) from inside its dlopen while holding a lock; a lookup through its dlopen then
// waits for that lock forever (compute-sanitizer's did, under `bash scripts/memcheck.sh OUT`;
// tests/interpose/run.sh, case 9, plays it with a fake tool). A lookup only takes a reference
// (RTLD_NOLOAD), so no tool needs to see it. The C library's handle comes from
// dlmopen, which such tools leave alone (a link_map is not a handle for every object).
struct LibcDl {
  void *(*open)(const char *, int) = &dlopen;  // if not found (glibc before 2.34): whatever binds
  int (*close)(void *) = &dlclose;
};

const LibcDl &libc_dl() {
  static const LibcDl dl = [] {
    LibcDl d;
    void *libc = dlmopen(LM_ID_BASE, "libc.so.6", RTLD_LAZY | RTLD_NOLOAD);  // never closed: it stays
    for (const char *version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
      void *o = libc ? dlvsym(libc, "dlopen", version) : nullptr, *c = libc ? dlvsym(libc, "dlclose", version) : nullptr;
      if (o && c) {
        d.open = reinterpret_cast<void *(*)(const char *, int)>(o);
        d.close = reinterpret_cast<int (*)(void *)>(c);
        break;
      }
    }
    return d;
  }();
  return dl;
}

// `name` in the already-loaded object `path`, or null. RTLD_NOLOAD only takes a reference.
void *lookup_in(const char *path, const char *name) {
  void *h = libc_dl().open(path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return nullptr;
  void *p = real_dlsym(h, name);
  libc_dl().close(h);
  return p;
}

bool in_this_library(const void *p) {
  Dl_info mine, theirs;
  return dladdr(reinterpret_cast<const void *>(&lookup_in), &mine) && dladdr(p, &theirs) &&
         mine.dli_fbase == theirs.dli_fbase;
}

}  // namespace

void *real_symbol(Lib lib, const char *name) {
  // RTLD_NEXT finds libraries in the global scope; the soname finds ours when opened RTLD_LOCAL.
  void *p = real_dlsym(RTLD_NEXT, name);
  if (!p) p = lookup_in(lib_soname(lib), name);
  if (p) return p;
  // Another version of the library (libcudart.so.12, say) opened RTLD_LOCAL by an extension:
  // its callers still reach our export, so find the definition in whatever object has it. Names
  // are collected first: dlopen must not run inside dl_iterate_phdr, which holds a loader lock.
  std::vector<std::string> objects;
  dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t, void *arg) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string> *>(arg)->push_back(info->dlpi_name);
        return 0;
      },
      &objects);
  for (const std::string &object : objects)
    if (void *q = lookup_in(object.c_str(), name); q && !in_this_library(q)) return q;
  return nullptr;
}

void *resolve_real(std::atomic<void *> &slot, Lib lib, const char *symbol, const void *own) {
  void *p = slot.load(std::memory_order_acquire);
  if (p) return p;
  p = real_symbol(lib, symbol);
  if (p == own) p = nullptr;  // never our own export
  if (p) slot.store(p, std::memory_order_release);
  return p;
}

void *real_function(HookId id) { return resolve_real(g_real[id], kHooks[id].lib, kHooks[id].symbol, kHooks[id].wrapper); }

namespace {

// A driver function the launch observer needs (observed_family(name)), looked up by `name`: its
// wrapper, or `found` (a miss, reported: Note [Observing without CUPTI]).
void *wrap_observed(const char *name, void *found) {
  if (void *w = observed_wrapper(found)) return w;
  note_unmatched_lookup(name);
  observed_lookup_missed(name);
  return found;
}

}  // namespace

void *wrap_dlsym_result(const char *name, void *found) {
  if (!found || !name || !((name[0] == 'c' && name[1] == 'u') || strncmp(name, "nccl", 4) == 0)) return found;
  if (name[0] == 'c' && observed_family(name)) return wrap_observed(name, found);
  for (int i = 0; i < kHookCount; ++i) {
    if (strcmp(kHooks[i].symbol, name) != 0) continue;
    if (found == kHooks[i].wrapper) return found;
    // A library that is not in the global scope (opened RTLD_LOCAL) is found through its
    // handle only: adopt what the caller found if we had nothing yet.
    void *expected = nullptr;
    g_real[i].compare_exchange_strong(expected, found);
    if (real_function(HookId(i)) == found) return kHooks[i].wrapper;
    note_unmatched_lookup(name);
    return found;
  }
  return found;
}

void *wrap_proc_address(const char *base, void *found) {
  if (!found || !base) return found;
  bool named = false;
  for (int i = 0; i < kHookCount; ++i) {
    if (kHooks[i].lib != Lib::kCuda || strcmp(kHooks[i].base, base) != 0) continue;
    named = true;
    if (found == kHooks[i].wrapper) return found;
    if (real_function(HookId(i)) == found) return kHooks[i].wrapper;
  }
  if (named) {
    note_unmatched_lookup(base);
    return found;
  }
  return observed_family(base) ? wrap_observed(base, found) : found;
}

namespace {

// dlsym(RTLD_NEXT, name) means "after the object that called dlsym". Called through us, glibc
// would search after vramcache instead, so find the caller's object and search the ones after it
// in load order. A link_map is not a valid handle for every object (the vDSO, ld.so), so each is
// reopened by name with RTLD_NOLOAD, which only takes a reference.
void *next_after(const void *caller, const char *name) {
  Dl_info info;
  struct link_map *map = nullptr;
  if (!dladdr1(caller, &info, reinterpret_cast<void **>(&map), RTLD_DL_LINKMAP) || !map)
    return real_dlsym(RTLD_NEXT, name);
  for (struct link_map *m = map->l_next; m; m = m->l_next) {
    if (!m->l_name || !*m->l_name) continue;
    if (void *p = lookup_in(m->l_name, name)) return p;
  }
  return nullptr;
}

}  // namespace
}  // namespace vc::interpose

// The exported dlsym once lookups are wrapped (Note [dlsym before start-up]): reached by a jump, so
// the return address is the caller's.
extern "C" __attribute__((visibility("hidden"), used, noinline)) void *vc_dlsym_wrapped(void *handle, const char *name) {
  using namespace vc::interpose;
  void *caller = __builtin_return_address(0);
  void *found = handle == RTLD_NEXT ? next_after(caller, name) : real_dlsym(handle, name);
  // RTLD_DEFAULT searches the caller's own scope too (its RTLD_LOCAL dependencies), which glibc
  // would take from us, not from the caller: search the caller's object and its dependencies.
  if (!found && handle == RTLD_DEFAULT) {
    Dl_info info;
    if (dladdr(caller, &info) && info.dli_fname && *info.dli_fname) found = lookup_in(info.dli_fname, name);
  }
  return wrap_dlsym_result(name, found);
}

// Profile mode's device side of the write records (Note [Write records] in runtime/trace.h): the
// piece hash kernel of the clean check (interpose/piece_hasher.h) on a stream of vramcache's own,
// ordered after and before the program's op by events, behind the runtime's WriteWatch. Started
// only while profiling without a budget; every driver call is a real function, made as vramcache's
// own (OwnCalls), so the observer never sees one. A failure means an op left out of the records.
#pragma once

#include "runtime/runtime.h"

namespace vc::interpose {

// Once, with a current context (an allocation just made): the watch is given to the runtime if
// the hash kernel loads and agrees with the host's definition. Nothing happens outside profile
// mode, under a budget, or with VRAMCACHE_CLEAN_CHECK=0.
void start_write_records(Runtime *rt);

}  // namespace vc::interpose

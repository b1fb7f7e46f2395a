// Errno names for the disk tier's log lines and results ("ENOSPC", not a sentence).
#include "runtime/disk/disk_io.h"

#include <cstdio>
#include <cstring>

namespace vc {

const char *errno_name(int err) {
  const char *name = strerrorname_np(err);
  if (name) return name;
  static thread_local char buf[24];
  snprintf(buf, sizeof buf, "errno %d", err);
  return buf;
}

}  // namespace vc

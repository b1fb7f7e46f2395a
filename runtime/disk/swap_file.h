// The swap file's life: a private file for direct I/O in the swap folder that no other process can
// open and that nothing outlives (Note [Private swap file]). Space and I/O are the store's
// (runtime/disk/disk_store.h); this file only opens.
#pragma once

#include <string>

namespace vc {

// Note [Private swap file]
// The file is opened with O_TMPFILE: it never has a name, so it goes with its last descriptor,
// however the process ends (kill -9 included), and no other process can open it by name. Where the
// filesystem refuses O_TMPFILE (EOPNOTSUPP; EISDIR on kernels before 3.11), or `named` is set (the
// tests of that path), it is created under a random name with O_EXCL and unlinked at once; a kill
// in the microseconds between the two leaves a file `.vramcache-swap-XXXXXX` behind, the one window
// there is. A child the program forks holds the file too, until it exits or execs (close-on-exec),
// so the space is given back when the last of them ends. Mode 0600, then O_DIRECT: a folder whose
// filesystem cannot do direct I/O (EINVAL) is refused rather than paged through the page cache,
// which would hold a second copy of every frame in the host memory the disk tier is there to spare.
//
// Returns the descriptor, or -errno with `error` one line naming the folder and the errno.
int open_private_file(const std::string &dir, bool named, std::string *error);

}  // namespace vc

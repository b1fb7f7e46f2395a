// Opening the private swap file (Note [Private swap file] in runtime/disk/swap_file.h).
#include "runtime/disk/swap_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/disk/disk_io.h"

namespace vc {

namespace {

int fail(int err, const std::string &what, const std::string &dir, std::string *error) {
  *error = what + " in " + dir + ": " + errno_name(err);
  return -err;
}

}  // namespace

int open_private_file(const std::string &dir, bool named, std::string *error) {
  int fd = -1;
  if (!named) {
    fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR)
      return fail(errno, "cannot create the swap file", dir, error);
  }
  if (fd < 0) {
    std::string path = dir + "/.vramcache-swap-XXXXXX";
    fd = mkostemp(&path[0], O_CLOEXEC);  // mode 0600, O_EXCL
    if (fd < 0) return fail(errno, "cannot create the swap file", dir, error);
    if (unlink(path.c_str()) != 0) {
      int err = errno;
      close(fd);
      return fail(err, "cannot unlink the new swap file " + path, dir, error);
    }
  }
  // O_TMPFILE's mode is also filtered by the umask, which can only narrow 0600; fchmod makes it exact.
  int flags = fcntl(fd, F_GETFL);
  if (fchmod(fd, 0600) != 0 || flags < 0 || fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) {
    int err = errno;
    close(fd);
    return fail(err, err == EINVAL ? "the filesystem cannot do direct I/O" : "cannot set up the swap file", dir, error);
  }
  return fd;
}

}  // namespace vc

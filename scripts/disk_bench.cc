// The disk benchmark's driver (scripts/disk_bench.sh runs it beside fio on the same file): the swap
// store's sequential direct writes then reads (measure_sequential: the disk probe's path, chunks,
// queue depth and checksums included) on a named file, printed as one JSON line. Not a test.
//   disk_bench FILE BYTES DEPTH CHUNK_BYTES SLOT_BYTES
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/disk/disk_probe.h"
#include "runtime/disk/uring_io.h"
#include "runtime/options.h"

int main(int argc, char **argv) {
  uint64_t bytes = 0, chunk = 0, slot = 0;
  if (argc != 6 || !vc::parse_size(argv[2], &bytes) || !vc::parse_size(argv[4], &chunk) ||
      !vc::parse_size(argv[5], &slot) || atoi(argv[3]) < 1) {
    fprintf(stderr, "usage: disk_bench FILE BYTES DEPTH CHUNK_BYTES SLOT_BYTES\n");
    return 2;
  }
  int fd = open(argv[1], O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  std::string error;
  auto io = vc::UringDiskIo::create(fd, atoi(argv[3]), &error);
  if (!io) {
    fprintf(stderr, "disk_bench: %s\n", error.c_str());
    return 77;
  }
  vc::DiskStore::Config config;
  config.slot_bytes = slot;
  config.chunk_bytes = chunk;
  vc::DiskRates rates;
  {
    vc::DiskStore store(io.get(), config);
    if (!vc::measure_sequential(&store, bytes, &rates, &error)) {
      fprintf(stderr, "disk_bench: %s\n", error.c_str());
      return 1;
    }
    const vc::DiskStats &s = store.stats();
    printf("{\"bytes\": %llu, \"write_bps\": %.0f, \"read_bps\": %.0f, \"resubmits\": %llu, \"retries\": %llu}\n",
           (unsigned long long)rates.bytes, rates.write_bps, rates.read_bps, (unsigned long long)s.resubmits.load(),
           (unsigned long long)s.retries.load());
  }
  return 0;
}

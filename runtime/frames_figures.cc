// The frame mover's figures: the summary's counters and the status line's text (FrameMover::figures,
// FrameMover::describe; runtime/frames.h). Reads what the mover counted; moves nothing. The disk
// level's own figures are in frames_disk.cc.
#include <cstdio>

#include "runtime/frames.h"

namespace vc {

// Copies to the host run on two streams (Note [Clean pieces]): their figures are summed.
void FrameMover::link_time(int dir, uint64_t *bytes, uint64_t *ns, uint64_t *idle_ns) const {
  dev_->copy_time(dir, bytes, ns, idle_ns);
  if (dir != kOut) return;
  uint64_t b, t, i;
  dev_->copy_time(kBack, &b, &t, &i);
  *bytes += b, *ns += t, *idle_ns += i;
}

std::vector<std::pair<std::string, uint64_t>> FrameMover::figures() const {
  uint64_t in_bytes, in_ns, in_idle, out_bytes, out_ns, out_idle, hashed, hash_ns;
  link_time(kIn, &in_bytes, &in_ns, &in_idle);
  link_time(kOut, &out_bytes, &out_ns, &out_idle);
  dev_->hash_time(&hashed, &hash_ns);
  std::vector<std::pair<std::string, uint64_t>> out = {{"frame_size", frame_size_},
          {"link_in_bytes", in_bytes},
          {"link_in_ns", in_ns},
          {"link_out_bytes", out_bytes},
          {"link_out_ns", out_ns},
          {"link_in_idle_ns", in_idle},
          {"link_out_idle_ns", out_idle},
          {"link_probe_in_bps", dev_->probe_rate(kIn)},
          {"link_probe_out_bps", dev_->probe_rate(kOut)},
          {"frames_in_bytes", stats_.in_bytes},
          {"frames_out_bytes", stats_.out_bytes},
          {"frames_clean_bytes", stats_.clean_bytes},
          {"frames_discarded_bytes", stats_.discarded_bytes},
          {"frames_remaps", stats_.remaps},
          {"frames_remap_ns", stats_.remap_ns},
          {"frames_remaps_out_busy", stats_.remaps_out_busy},
          {"frames_remap_out_busy_ns", stats_.remap_out_busy_ns},
          {"frames_remaps_out_idle", stats_.remaps - stats_.remaps_out_busy},
          {"frames_remap_out_idle_ns", stats_.remap_ns - stats_.remap_out_busy_ns},
          {"frames_clean_check", check_},
          {"frames_piece_size", piece_},
          {"frames_unchanged_bytes", stats_.unchanged_bytes},
          {"frames_pieces_hashed", stats_.pieces_hashed},
          {"frames_hash_device_pieces", hashed},
          {"frames_hash_device_ns", hash_ns},
          {"frames_hash_failures", stats_.hash_failures},
          {"frames_unhashed_bytes", stats_.unhashed_bytes},
          {"frames_clean_claims_changed", stats_.clean_claims_changed},
          {"frames_remap_home_ns", stats_.remap_home_ns},
          {"frames_left_unmapped", stats_.left_unmapped},
          {"frames_home_maps", stats_.home_maps},
          {"frames_home_map_ns", stats_.home_map_ns},
          {"frames_cancelled", stats_.cancelled},
          {"frames_freed_moves", stats_.freed_moves},
          {"frames_freed_move_bytes", stats_.freed_move_bytes},
          {"frames_host_waits", stats_.host_waits},
          {"frames_wait_ns", stats_.wait_ns},
          {"frames_chunk_waits", stats_.chunk_waits},
          {"frames_chunk_wait_ns", stats_.chunk_wait_ns},
          {"frames_device_peak", stats_.device_peak},
          {"frames_over_budget", stats_.over_budget}};
  if (disk_) disk_figures(&out);  // Note [Frames on disk]
  return out;
}

std::string FrameMover::describe() const {
  size_t in_flight;
  {
    std::lock_guard lock(mu_);
    in_flight = moves_.size();
  }
  char line[400];
  snprintf(line, sizeof line,
           "frames: %zu moves in flight; copied in %.2f GB, out %.2f GB (%.2f GB left clean); %llu remaps (%.2f s; "
           "%llu while copies to the host ran, %.2f s), %llu cancelled, %llu host waits (%.2f s; for a chunk %.2f s); "
           "device chunks %.2f GB (peak %.2f)",
           in_flight, stats_.in_bytes / 1e9, stats_.out_bytes / 1e9, stats_.clean_bytes / 1e9,
           (unsigned long long)stats_.remaps.load(), stats_.remap_ns / 1e9,
           (unsigned long long)stats_.remaps_out_busy.load(), stats_.remap_out_busy_ns / 1e9,
           (unsigned long long)stats_.cancelled.load(), (unsigned long long)stats_.host_waits.load(),
           stats_.wait_ns / 1e9, stats_.chunk_wait_ns / 1e9, stats_.device_bytes / 1e9, stats_.device_peak / 1e9);
  std::string out = line;
  if (check_) {  // Note [Clean pieces]
    uint64_t hashed, hash_ns;
    dev_->hash_time(&hashed, &hash_ns);
    snprintf(line, sizeof line,
             "; clean check: %.2f GB not copied home (unchanged), %llu pieces hashed (%.3f s on the device), %llu "
             "hashes failed (%.2f GB copied for want of one)",
             stats_.unchanged_bytes / 1e9, (unsigned long long)stats_.pieces_hashed.load(), hash_ns / 1e9,
             (unsigned long long)stats_.hash_failures.load(), stats_.unhashed_bytes / 1e9);
    out += line;
  }
  uint64_t bytes[2], ns[2], idle[2];
  link_time(kIn, &bytes[kIn], &ns[kIn], &idle[kIn]);
  link_time(kOut, &bytes[kOut], &ns[kOut], &idle[kOut]);
  if (ns[kIn] || ns[kOut] || dev_->probe_rate(kIn)) {
    auto rate = [](uint64_t b, uint64_t t) { return t ? b / (t / 1e9) / 1e9 : 0.0; };
    snprintf(line, sizeof line,
             "; link while copying in %.1f GB/s, out %.1f GB/s (pinned copies at start: %.1f / %.1f GB/s); copying "
             "in %.2f s, out %.2f s, between copies in %.2f s, out %.2f s",
             rate(bytes[kIn], ns[kIn]), rate(bytes[kOut], ns[kOut]), dev_->probe_rate(kIn) / 1e9, dev_->probe_rate(kOut) / 1e9,
             ns[kIn] / 1e9, ns[kOut] / 1e9, idle[kIn] / 1e9, idle[kOut] / 1e9);
    out += line;
  }
  if (disk_) out += "; " + describe_disk();
  return out;
}

}  // namespace vc

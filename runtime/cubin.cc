// Note [Layouts from the cubin] (runtime/cubin.h).
#include "runtime/cubin.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace vc {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50, kWrapperMagic = 0x466243B1;
constexpr uint16_t kEntryElf = 2;
constexpr uint64_t kEntryCompressed = 0x8000;
constexpr uint8_t kAttrParamInfo = 0x17, kAttrParamSize = 0x19;  // EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE
constexpr uint64_t kMaxElf = uint64_t(1) << 31;  // no cubin is larger: a header saying so is not one
// A compressed ELF is taken to grow at most this many times, or 1 MiB (zstd can reach 2^17 on
// zeros; cubins compress a few times): a header claiming more is refused before any allocation.
constexpr uint64_t kMaxRatio = 256, kMinPlain = uint64_t(1) << 20;
// The size of an image the driver accepted is in its headers; one read from a file has a size.
constexpr uint64_t kSizeInHeaders = ~uint64_t(0);

template <class T>
T at(const uint8_t *p, size_t offset) {
  T v;
  memcpy(&v, p + offset, sizeof v);
  return v;
}

// The attributes of one .nv.info.<kernel> section: the kernel's layout, or false.
bool read_info(const uint8_t *d, size_t size, std::vector<ParamSlot> *slots) {
  struct Param {
    uint16_t ordinal, offset;
    uint32_t size;
  };
  std::vector<Param> params;
  int64_t total = -1;
  for (size_t j = 0; j + 2 <= size;) {
    uint8_t format = d[j], attr = d[j + 1];
    if (format == 1) {
      j += 2;
    } else if (format == 2 || format == 3) {
      if (j + 4 > size) return false;
      if (attr == kAttrParamSize) total = at<uint16_t>(d, j + 2);
      j += 4;
    } else if (format == 4) {
      if (j + 4 > size) return false;
      uint16_t len = at<uint16_t>(d, j + 2);
      if (j + 4 + len > size) return false;
      if (attr == kAttrParamInfo) {
        if (len < 12) return false;
        // u32 index, u16 ordinal, u16 offset, u32 whose bits 18-31 are the size.
        params.push_back({at<uint16_t>(d, j + 8), at<uint16_t>(d, j + 10), at<uint32_t>(d, j + 12) >> 18});
      }
      j += 4 + len;
    } else {
      return false;  // a format we do not know: the rest cannot be read
    }
  }
  if (total < 0) return false;
  std::sort(params.begin(), params.end(), [](const Param &a, const Param &b) { return a.ordinal < b.ordinal; });
  slots->clear();
  uint32_t end = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].ordinal != i || params[i].offset < end || params[i].size == 0) return false;
    slots->push_back(ParamSlot{params[i].offset, params[i].size});
    end = uint32_t(params[i].offset) + params[i].size;
  }
  return end == uint64_t(total);
}

// An ELF cubin: every .nv.info.<kernel> section that reads as a layout. `size`: the bytes there
// (kSizeInHeaders: as its headers say). False if it is not a 64-bit little-endian ELF.
bool read_elf(const uint8_t *e, uint64_t size, std::vector<KernelLayout> *out) {
  if (size < 64 || memcmp(e, "\x7f" "ELF", 4) != 0 || e[4] != 2 || e[5] != 1) return false;
  uint64_t shoff = at<uint64_t>(e, 0x28);
  uint16_t shentsize = at<uint16_t>(e, 0x3A), shnum = at<uint16_t>(e, 0x3C), shstrndx = at<uint16_t>(e, 0x3E);
  if (shentsize < 64 || shstrndx >= shnum || shoff > kMaxElf) return false;
  uint64_t end = shoff + uint64_t(shnum) * shentsize;
  if (end > size) return false;
  auto section = [&](int i, uint64_t *offset, uint64_t *bytes) {
    const uint8_t *h = e + shoff + uint64_t(i) * shentsize;
    *offset = at<uint64_t>(h, 24), *bytes = at<uint64_t>(h, 32);
    return at<uint32_t>(h, 4) != 8 /* SHT_NOBITS */ && *offset <= kMaxElf && *bytes <= kMaxElf &&
           *offset + *bytes <= size;
  };
  uint64_t str_off = 0, str_size = 0;
  if (!section(shstrndx, &str_off, &str_size)) return false;
  static const char kPrefix[] = ".nv.info.";
  for (int i = 0; i < shnum; ++i) {
    uint32_t name = at<uint32_t>(e + shoff + uint64_t(i) * shentsize, 0);
    uint64_t offset = 0, bytes = 0;
    if (name >= str_size || !section(i, &offset, &bytes)) continue;
    const char *n = reinterpret_cast<const char *>(e + str_off + name);
    size_t len = strnlen(n, str_size - name);
    if (len <= sizeof kPrefix - 1 || strncmp(n, kPrefix, sizeof kPrefix - 1) != 0) continue;
    KernelLayout k;
    k.name.assign(n + sizeof kPrefix - 1, len - (sizeof kPrefix - 1));
    if (read_info(e + offset, bytes, &k.slots)) out->push_back(std::move(k));
  }
  return true;
}

// A fat binary of `limit` bytes at most (kSizeInHeaders: as its header says): its first ELF entry
// that reads.
bool read_fatbin(const uint8_t *f, uint64_t limit, std::vector<KernelLayout> *out) {
  if (limit < 16 || at<uint32_t>(f, 0) != kFatbinMagic) return false;
  uint16_t header = at<uint16_t>(f, 6);
  uint64_t size = at<uint64_t>(f, 8);
  if (header < 16 || size > kMaxElf || header + size > limit) return false;
  for (uint64_t e = header; e + 64 <= header + size;) {
    const uint8_t *entry = f + e;
    uint32_t entry_header = at<uint32_t>(entry, 4);
    uint64_t payload = at<uint64_t>(entry, 8);
    if (entry_header < 64 || payload > kMaxElf || e + entry_header + payload > header + size) return false;
    const uint8_t *data = entry + entry_header;
    if (at<uint16_t>(entry, 0) == kEntryElf) {
      if (at<uint64_t>(entry, 40) & kEntryCompressed) {
        uint32_t compressed = at<uint32_t>(entry, 16);
        uint64_t plain = at<uint64_t>(entry, 56);
        if (compressed <= payload && plain <= kMaxElf && plain <= std::max(kMinPlain, compressed * kMaxRatio)) {
          std::vector<uint8_t> elf(plain);
          size_t got = ZSTD_decompress(elf.data(), elf.size(), data, compressed);
          if (!ZSTD_isError(got) && got == plain && read_elf(elf.data(), got, out)) return true;
        }
      } else if (read_elf(data, payload, out)) {
        return true;
      }
    }
    e += entry_header + payload;
  }
  return false;
}

}  // namespace

std::vector<KernelLayout> read_image_layouts(const void *image) {
  std::vector<KernelLayout> out;
  auto *p = static_cast<const uint8_t *>(image);
  if (!p) return out;
  if (at<uint32_t>(p, 0) == kWrapperMagic) {  // __fatBinC_Wrapper_t {int magic, version; data; ...}
    p = at<const uint8_t *>(p, 8);
    if (!p) return out;
  }
  if (!read_fatbin(p, kSizeInHeaders, &out)) read_elf(p, kSizeInHeaders, &out);
  return out;
}

std::vector<KernelLayout> read_image_layouts(const void *image, size_t size) {
  std::vector<KernelLayout> out;
  auto *p = static_cast<const uint8_t *>(image);
  if (p && !read_fatbin(p, size, &out)) read_elf(p, size, &out);
  return out;
}

void LayoutIndex::add(const std::vector<KernelLayout> &layouts) {
  std::unique_lock lock(mu_);
  for (const KernelLayout &k : layouts) {
    if (conflicted_.count(k.name)) continue;
    auto [it, inserted] = layouts_.emplace(k.name, k.slots);
    if (inserted) continue;
    bool same = it->second.size() == k.slots.size() &&
                std::equal(k.slots.begin(), k.slots.end(), it->second.begin(), [](const ParamSlot &a, const ParamSlot &b) {
                  return a.offset == b.offset && a.size == b.size;
                });
    if (!same) {
      layouts_.erase(it);
      conflicted_.insert(k.name);
    }
  }
}

bool LayoutIndex::find(const std::string &name, std::vector<ParamSlot> *slots) const {
  std::shared_lock lock(mu_);
  auto it = layouts_.find(name);
  if (it == layouts_.end()) return false;
  *slots = it->second;
  return true;
}

size_t LayoutIndex::size() const {
  std::shared_lock lock(mu_);
  return layouts_.size();
}

}  // namespace vc

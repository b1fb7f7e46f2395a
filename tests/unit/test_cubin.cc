// The cubin reader (runtime/cubin.h, Note [Layouts from the cubin]) against fat binaries nvcc made
// of tests/unit/kernels.cu at build time, plain and zstd-compressed.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/cubin.h"

namespace {

std::vector<uint8_t> testdata(const char *name) {
  char exe[4096] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  REQUIRE(n > 0);
  std::string path(exe, size_t(n));
  path = path.substr(0, path.rfind('/')) + "/testdata/" + name;
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "missing " << path << " (made by the Makefile with nvcc)");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string show(const std::vector<vc::ParamSlot> &slots) {
  std::string s;
  for (const vc::ParamSlot &p : slots) s += "(" + std::to_string(p.offset) + "," + std::to_string(p.size) + ")";
  return s;
}

const vc::KernelLayout *named(const std::vector<vc::KernelLayout> &ks, const char *name) {
  for (const vc::KernelLayout &k : ks)
    if (k.name == name) return &k;
  return nullptr;
}

// What nvcc lays out for kernels.cu: scale(float*, const float*, int, double) and
// mixed<float>(float*, Big (41 floats), char, short, long long).
void check_layouts(const std::vector<vc::KernelLayout> &ks) {
  const vc::KernelLayout *scale = named(ks, "scale"), *mixed = named(ks, "_Z5mixedIfEvPT_3Bigcsx");
  REQUIRE(scale);
  REQUIRE(mixed);
  CHECK(show(scale->slots) == "(0,8)(8,8)(16,4)(24,8)");
  CHECK(show(mixed->slots) == "(0,8)(8,164)(172,1)(174,2)(176,8)");
  if (const vc::KernelLayout *none = named(ks, "none")) CHECK(none->slots.empty());
}

}  // namespace

TEST_CASE("cubin: layouts from a plain and a compressed fat binary, a bare ELF and cudart's wrapper") {
  std::vector<uint8_t> plain = testdata("kernels.fatbin"), packed = testdata("kernels-compressed.fatbin");
  check_layouts(vc::read_image_layouts(plain.data()));
  check_layouts(vc::read_image_layouts(packed.data()));
  // The compressed one really is: its ELF is not there as such.
  const char elf[] = "\x7f" "ELF";
  CHECK(std::search(packed.begin(), packed.end(), elf, elf + 4) == packed.end());
  auto at = std::search(plain.begin(), plain.end(), elf, elf + 4);
  REQUIRE(at != plain.end());
  check_layouts(vc::read_image_layouts(&*at));
  struct {
    int magic, version;
    const void *data;
    void *name;
  } wrapper = {int(0x466243B1), 1, packed.data(), nullptr};
  check_layouts(vc::read_image_layouts(&wrapper));
}

TEST_CASE("cubin: what is not an image, or not a consistent layout, gives nothing") {
  std::vector<uint8_t> junk(4096, 0x5a);
  CHECK(vc::read_image_layouts(junk.data()).empty());
  CHECK(vc::read_image_layouts(nullptr).empty());
  // scale's parameters end at 32, its total (EIATTR_CBANK_PARAM_SIZE: format 3, attribute 0x19):
  // a total of 36 drops scale and keeps mixed.
  std::vector<uint8_t> plain = testdata("kernels.fatbin");
  const uint8_t total[] = {0x03, 0x19, 0x20, 0x00};
  auto at = std::search(plain.begin(), plain.end(), total, total + 4);
  REQUIRE(at != plain.end());
  at[2] = 0x24;
  auto ks = vc::read_image_layouts(plain.data());
  CHECK(named(ks, "scale") == nullptr);
  CHECK(named(ks, "_Z5mixedIfEvPT_3Bigcsx") != nullptr);
}

TEST_CASE("cubin: the index keeps a name's layout while every image agrees on it") {
  vc::LayoutIndex index;
  std::vector<vc::ParamSlot> slots;
  CHECK_FALSE(index.find("k", &slots));
  index.add({{"k", {{0, 8}, {8, 4}}}, {"j", {{0, 8}}}});
  index.add({{"k", {{0, 8}, {8, 4}}}});  // the same again: kept
  REQUIRE(index.find("k", &slots));
  CHECK(show(slots) == "(0,8)(8,4)");
  index.add({{"j", {{0, 4}}}});  // another layout under j's name: j is dropped for good
  CHECK_FALSE(index.find("j", &slots));
  index.add({{"j", {{0, 8}}}});
  CHECK_FALSE(index.find("j", &slots));
  CHECK(index.size() == 1);
}

#include "backends/ebpf/type_names.h"

namespace gotap::ebpf {

namespace {
constexpr uint64_t kTypeHeader = 48;  // abi.Type size, unchanged from 1.19 to 1.26
constexpr uint8_t kTflagExtraStar = 2;
constexpr uint8_t kTflagDirectIface126 = 0x20;
constexpr uint8_t kKindDirectIface = 0x20;
}  // namespace

bool TypeNames::valid(uint64_t addr) const {
  if (!elf_ || addr < bias_) return false;
  uint64_t a = addr - bias_;
  return a >= types_ && a < etypes_ && etypes_ - a >= kTypeHeader;
}

std::optional<std::string> TypeNames::name(uint64_t runtime_addr) const {
  if (!valid(runtime_addr)) return std::nullopt;
  uint64_t t = runtime_addr - bias_;
  Bytes hdr = elf_->read(t, kTypeHeader);
  if (hdr.empty()) return std::nullopt;
  uint8_t tflag = hdr[20];
  auto str_off = le32(hdr, 40);
  if (!str_off) return std::nullopt;
  uint64_t n = types_ + static_cast<int32_t>(*str_off);
  Bytes b = elf_->at_vaddr(n);
  if (b.size() < 2) return std::nullopt;
  // A name: flags byte, uvarint length (Go >= 1.17), the bytes.
  uint64_t len = 0;
  size_t i = 1;
  for (int shift = 0; i < b.size() && shift < 64; shift += 7) {
    uint8_t c = b[i++];
    len |= uint64_t(c & 0x7f) << shift;
    if (!(c & 0x80)) break;
  }
  if (len > b.size() - i || len > 4096) return std::nullopt;
  std::string s(reinterpret_cast<const char*>(b.data() + i), len);
  if ((tflag & kTflagExtraStar) && !s.empty() && s[0] == '*') s.erase(0, 1);
  return s;
}

std::optional<GoKind> TypeNames::kind(uint64_t runtime_addr) const {
  if (!valid(runtime_addr)) return std::nullopt;
  Bytes hdr = elf_->read(runtime_addr - bias_, kTypeHeader);
  if (hdr.empty()) return std::nullopt;
  uint8_t k = go_.at_least(1, 26) ? hdr[23] : hdr[23] & 0x1f;
  if (k > static_cast<uint8_t>(GoKind::UnsafePointer)) return std::nullopt;
  return static_cast<GoKind>(k);
}

bool TypeNames::direct_iface(uint64_t runtime_addr) const {
  if (!valid(runtime_addr)) return false;
  Bytes hdr = elf_->read(runtime_addr - bias_, kTypeHeader);
  if (hdr.empty()) return false;
  if (go_.at_least(1, 26)) return hdr[20] & kTflagDirectIface126;
  return hdr[23] & kKindDirectIface;
}

std::optional<uint64_t> TypeNames::size(uint64_t runtime_addr) const {
  if (!valid(runtime_addr)) return std::nullopt;
  return elf_->read_u64(runtime_addr - bias_);
}

}  // namespace gotap::ebpf

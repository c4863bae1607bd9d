#include "core/plan/binary_view.h"

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "core/plan/gccgo_binary.h"
#include "core/sys/proc_maps.h"

namespace gotap {

const std::string& BinaryView::path() const {
  static const std::string none;
  return elf ? elf->path() : none;
}

const PclnFunc* BinaryView::func_at(uint64_t pc) const {
  return pclntab ? pclntab->find(pc) : nullptr;
}

std::string BinaryView::func_name(uint64_t pc) const {
  if (gccgo_funcs) return gccgo_func_name(*gccgo_funcs, pc);
  const PclnFunc* f = func_at(pc);
  return f ? std::string(f->name) : std::string();
}

std::vector<SourceFrame> BinaryView::frames_at(uint64_t pc, size_t max) const {
  std::vector<SourceFrame> out;
  const PclnFunc* f = func_at(pc);
  if (!f) return out;
  const auto ranges = pclntab->inline_ranges(*f);
  const auto tree = pclntab->inline_tree(*f);
  // From the innermost inlined call out to the function itself, through each call's parent
  // pc; bounded, as the tree comes from the file.
  uint64_t at = pc;
  for (int guard = 0; guard < 64 && out.size() < max; ++guard) {
    int idx = -1;
    for (const auto& r : ranges)
      if (at >= r.lo && at < r.hi) idx = r.index;
    const InlinedCall* node = nullptr;
    for (const auto& n : tree)
      if (n.index == idx) node = &n;
    SourceFrame fr;
    fr.func = std::string(node ? node->name : f->name);
    if (auto fl = pclntab->file_line(*f, at)) {
      fr.file = std::string(fl->first);
      fr.line = fl->second;
    }
    fr.inlined = node != nullptr;
    out.push_back(std::move(fr));
    if (!node || node->parent_pc == at) break;
    at = node->parent_pc;
  }
  return out;
}

std::optional<uint64_t> BinaryView::load_bias(int pid) const {
  if (!elf) return std::nullopt;
  // ET_EXEC files load where they were linked.
  if (!elf->is_pie()) return 0;
  const ElfSegment* first = elf->first_load();
  if (!first) return std::nullopt;
  return sys::load_bias(pid, first->vaddr, first->offset);
}

}  // namespace gotap

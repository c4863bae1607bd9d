#include "core/cond/condition.h"

#include <fmt/format.h>

#include "core/cond/parser.h"

namespace gotap::cond {

namespace {

NodePtr make(NodeKind k, size_t pos, std::string text = {}) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->pos = pos;
  n->text = std::move(text);
  return n;
}

void names(const Node& n, std::vector<const Node*>& out) {
  if (n.kind == NodeKind::Name) out.push_back(&n);
  for (const auto& k : n.kids) names(*k, out);
}

bool has_name(const FuncPlan& f, const std::string& name) {
  for (const auto* list : {&f.args, &f.results})
    for (const auto& p : *list)
      if (name == kErrorResult ? p.type_name == "error" : p.name == name) return true;
  return false;
}

NodePtr both(NodePtr a, NodePtr b) {
  if (!a) return b;
  NodePtr n = make(NodeKind::And, b->pos);
  n->kids.push_back(std::move(a));
  n->kids.push_back(std::move(b));
  return n;
}

}  // namespace

Result<Condition> build_condition(const ConditionSpec& spec, const ProbePlan& plan) {
  NodePtr root;
  if (!spec.expr.empty()) {
    ExprError err;
    root = parse(spec.expr, &err);
    if (!root) return make_error("{}", describe(spec.expr, err));
  }
  // The shorthands join --if with &&; their nodes point past the expression.
  const size_t past = spec.expr.size();
  if (spec.slower_ns) {
    NodePtr c = make(NodeKind::Compare, past, ">");
    c->kids.push_back(make(NodeKind::Name, past, "duration"));
    NodePtr d = make(NodeKind::Duration, past);
    d->u = *spec.slower_ns;
    c->kids.push_back(std::move(d));
    root = both(std::move(root), std::move(c));
  }
  if (spec.errors) {
    NodePtr c = make(NodeKind::Compare, past, "!=");
    c->kids.push_back(make(NodeKind::Name, past, kErrorResult));
    c->kids.push_back(make(NodeKind::Nil, past));
    root = both(std::move(root), std::move(c));
  }
  Condition out;
  out.spec = spec;
  // No condition: no program per function (nearly 1 KB each: 43 MB for a whole binary).
  if (!root) return out;
  out.funcs.resize(plan.funcs.size());
  // A name one function lacks makes the condition false for it; a name none has is an error.
  std::vector<const Node*> used;
  names(*root, used);
  for (const Node* n : used) {
    if (n->text == "goid" || n->text == "duration") continue;
    bool found = false;
    for (const auto& f : plan.funcs) found = found || has_name(f, n->text);
    if (found) continue;
    if (n->text == kErrorResult)
      return make_error("--errors: none of the probed functions returns an error");
    return make_error("{}", describe(spec.expr, {n->pos, fmt::format("no probed function has a "
                                                                     "parameter or result named "
                                                                     "{} (`gotap funcs` lists "
                                                                     "them)",
                                                                     n->text)}));
  }
  for (size_t i = 0; i < plan.funcs.size(); ++i) {
    ExprError err;
    std::string missing;
    CompileStatus s =
        compile_for(*root, plan.funcs[i], plan.binary_view, &out.funcs[i], &err, &missing);
    if (s == CompileStatus::Error) {
      if (err.pos >= past)
        return make_error("{}: {} (in {})", spec.errors ? "--errors" : "--slower", err.what,
                          plan.funcs[i].name);
      return make_error("{} (in {})", describe(spec.expr, err), plan.funcs[i].name);
    }
    const FuncProgram& fp = out.funcs[i];
    if (out.ebpf_problem.empty() && !fp.ebpf_problem.empty())
      out.ebpf_problem = describe(
          spec.expr,
          {fp.ebpf_pos, fp.ebpf_problem + ", which eBPF cannot read; use --backend=ptrace"});
  }
  return out;
}

}  // namespace gotap::cond

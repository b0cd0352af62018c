// Loads an MT4G JSON file with sys-sage's MT4G parser and prints the component tree that
// sys-sage built, one line per component, with runs of identical siblings folded into one
// line and a count. `cargo xtask sys-sage` builds this against sys-sage and compares the
// trees of memtopo's exports with the tree of MT4G's own sample.
//
// Each line: depth <TAB> kind <TAB> name <TAB> count <TAB> values (key=value; ...).
// The values of a folded run are those of its first member. After the tree, the data paths
// that end at the first GPU core: "path" <TAB> source kind <TAB> source name <TAB> values.
#include <sys-sage.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using sys_sage::Component;

namespace {

std::string kind(const Component *c) { return c->GetComponentTypeStr(); }

// A cache's name is its type ("L2", "Constant L1.5"); other components have their own.
std::string name(const Component *c) {
  if (c->GetComponentType() == sys_sage::ComponentType::Cache)
    return static_cast<const sys_sage::Cache *>(c)->GetCacheName();
  return c->GetName();
}

// What sys-sage stored about a component: sizes and line sizes in bytes.
std::string values(const Component *c) {
  std::ostringstream out;
  switch (c->GetComponentType()) {
  case sys_sage::ComponentType::Chip: {
    auto chip = static_cast<const sys_sage::Chip *>(c);
    out << "model=" << chip->GetModel() << "; vendor=" << chip->GetVendor();
    break;
  }
  case sys_sage::ComponentType::Memory:
    out << "size=" << static_cast<const sys_sage::Memory *>(c)->GetSize();
    break;
  case sys_sage::ComponentType::Cache: {
    auto cache = static_cast<const sys_sage::Cache *>(c);
    out << "size=" << cache->GetCacheSize() << "; line=" << cache->GetCacheLineSize();
    break;
  }
  default:
    break;
  }
  return out.str();
}

// The shape of a subtree: kinds and names, nested, without ids or values.
std::string shape(const Component *c) {
  std::string s = kind(c) + ":" + name(c) + "(";
  for (auto child : c->GetChildren())
    s += shape(child) + ",";
  return s + ")";
}

void print(const Component *c, int depth, size_t count) {
  std::cout << depth << '\t' << kind(c) << '\t' << name(c) << '\t' << count << '\t'
            << values(c) << '\n';
  const auto &children = c->GetChildren();
  for (size_t i = 0; i < children.size();) {
    size_t j = i + 1;
    std::string first = shape(children[i]);
    while (j < children.size() && shape(children[j]) == first)
      j++;
    print(children[i], depth + 1, j - i);
    i = j;
  }
}

const Component *first_core(const Component *c) {
  if (c->GetComponentType() == sys_sage::ComponentType::Thread)
    return c;
  for (auto child : c->GetChildren())
    if (auto found = first_core(child))
      return found;
  return nullptr;
}

double attribute(const sys_sage::DataPath *dp, const char *name) {
  auto it = dp->attrib.find(name);
  return it == dp->attrib.end() ? -1.0 : *static_cast<double *>(it->second);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: mt4g_tree FILE.json\n";
    return 2;
  }
  auto gpu = new sys_sage::Chip(nullptr, 0, "GPU", sys_sage::ChipType::Gpu);
  if (sys_sage::ParseMt4g(gpu, argv[1]) != 0) {
    std::cerr << "sys-sage could not parse " << argv[1] << '\n';
    return 1;
  }
  print(gpu, 0, 1);
  if (auto core = first_core(gpu)) {
    std::vector<sys_sage::DataPath *> paths;
    core->FindDataPaths(&paths);
    for (auto dp : paths) {
      const Component *source = dp->GetSource() == core ? dp->GetTarget() : dp->GetSource();
      std::cout << "path\t" << kind(source) << '\t' << name(source) << '\t'
                << "latency=" << dp->GetLatency();
      double penalty = attribute(dp, "missPenalty");
      if (penalty > 0)
        std::cout << "; missPenalty=" << penalty;
      std::cout << '\n';
    }
  }
  return 0;
}

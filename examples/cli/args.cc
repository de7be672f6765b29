#include "examples/cli/args.h"

#include <cstdlib>
#include <sstream>

namespace gannet_cli {

bool Args::Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first) {
  auto find_long = [&](const std::string& n) -> const FlagSpec* {
    for (const auto& s : specs) {
      if (s.name == n) return &s;
    }
    return nullptr;
  };
  auto find_short = [&](char c) -> const FlagSpec* {
    for (const auto& s : specs) {
      if (s.short_name == c) return &s;
    }
    return nullptr;
  };
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) positional_.push_back(argv[i]);
      break;
    }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      spec = find_long(name);
      if (spec == nullptr) {
        error_ = "unknown option --" + name;
        return false;
      }
    } else if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
      spec = find_short(a[1]);
      if (spec == nullptr) {
        error_ = "unknown option " + a;
        return false;
      }
    } else {
      positional_.push_back(a);
      continue;
    }
    std::string value = "1";
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        error_ = "option --" + spec->name + " needs a value (" + spec->value_name + ")";
        return false;
      }
    } else if (inline_value) {
      error_ = "option --" + spec->name + " takes no value";
      return false;
    }
    auto& slot = values_[spec->name];
    if (!slot.empty() && !spec->repeatable) {
      error_ = "option --" + spec->name + " given twice";
      return false;
    }
    slot.push_back(value);
  }
  return true;
}

std::optional<std::string> Args::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int Args::GetInt(const std::string& name, int def) {
  auto v = Get(name);
  if (!v) return def;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0') {
    error_ = "option --" + name + " expects an integer, got '" + *v + "'";
    return def;
  }
  return static_cast<int>(x);
}

double Args::GetDouble(const std::string& name, double def) {
  auto v = Get(name);
  if (!v) return def;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0') {
    error_ = "option --" + name + " expects a number, got '" + *v + "'";
    return def;
  }
  return x;
}

unsigned long long Args::GetU64(const std::string& name, unsigned long long def) {
  auto v = Get(name);
  if (!v) return def;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0') {
    error_ = "option --" + name + " expects a non-negative integer, got '" + *v + "'";
    return def;
  }
  return x;
}

std::string FormatFlags(const std::vector<FlagSpec>& specs) {
  std::ostringstream out;
  for (const auto& s : specs) {
    std::string left = "  ";
    left += s.short_name ? std::string("-") + s.short_name + ", " : "    ";
    left += "--" + s.name;
    if (s.takes_value) left += " " + s.value_name;
    out << left;
    out << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << s.help << "\n";
  }
  return out.str();
}

}  // namespace gannet_cli

#include "examples/cli/args.h"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace gannet_cli {
namespace {

// llama.cpp's single-dash words that have no gannet equivalent of that spelling: what to write
// instead, so a llama-cli habit gets an answer rather than a bare "unknown option".
const char* LlamaCppHint(const std::string& word) {
  static const std::map<std::string, const char*> kHints = {
      {"ngl", "gannet keeps the whole model on the GPU; there are no layers to offload: drop -ngl"},
      {"cnv", "for a conversation run `gannet chat`"},
      {"ctk", "the KV cache type is --kv-cache-dtype bf16|fp8"},
      {"ctv", "the KV cache type is --kv-cache-dtype bf16|fp8"},
      {"dev", "the CUDA device is --device N (an ordinal: 0 for CUDA0)"},
      {"fa", "attention is always fused in gannet: drop -fa"},
      {"sysf", "pass the system prompt's text: --system \"$(cat FILE)\""},
  };
  auto it = kHints.find(word);
  return it == kHints.end() ? nullptr : it->second;
}

}  // namespace

bool ParseInt64(const std::string& s, int64_t min, int64_t max, int64_t* out) {
  size_t i = s.size() > 0 && s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (size_t j = i; j < s.size(); ++j) {
    if (s[j] < '0' || s[j] > '9') return false;
  }
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v < min || v > max) return false;
  *out = v;
  return true;
}

bool Args::Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first) {
  auto find_long = [&](const std::string& n) -> const FlagSpec* {
    for (const auto& s : specs) {
      if (s.name == n) return &s;
      for (const auto& a : s.aliases) {
        if (a == n) return &s;
      }
    }
    return nullptr;
  };
  auto find_short = [&](char c) -> const FlagSpec* {
    for (const auto& s : specs) {
      if (s.short_name == c) return &s;
    }
    return nullptr;
  };
  auto find_dash_word = [&](const std::string& w) -> const FlagSpec* {
    for (const auto& s : specs) {
      for (const auto& d : s.dash_words) {
        if (d == w) return &s;
      }
    }
    return nullptr;
  };
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      std::string name = a.substr(2);
      const size_t eq = name.find('=');
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
    } else if (a.size() > 2 && a[0] == '-' && a[1] != '-' && find_dash_word(a.substr(1))) {
      spec = find_dash_word(a.substr(1));
    } else if (a.size() > 2 && a[0] == '-' && a[1] != '-') {
      const FlagSpec* s = find_short(a[1]);
      int64_t number = 0;
      error_ = "unknown option " + a;
      if (s != nullptr && s->takes_value &&
          ParseInt64(a.substr(2), INT64_MIN, INT64_MAX, &number)) {
        error_ += " (write the value as the next argument: -" + std::string(1, a[1]) + " " +
                  a.substr(2) + ")";
      } else if (const char* hint = LlamaCppHint(a.substr(1))) {
        error_ += std::string(" (") + hint + ")";
      } else {
        error_ += " (single-dash options are one letter; long options take two dashes)";
      }
      return false;
    } else {
      error_ = "unexpected argument '" + a +
               "' (every value follows its flag; quote a prompt and pass it with -p)";
      return false;
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

int64_t Args::GetInt(const std::string& name, int64_t def, int64_t min, int64_t max) {
  auto v = Get(name);
  if (!v) return def;
  int64_t x = 0;
  if (!ParseInt64(*v, min, max, &x)) {
    SetError("option --" + name + " expects an integer in [" + std::to_string(min) + ", " +
             std::to_string(max) + "], got '" + *v + "'");
    return def;
  }
  return x;
}

double Args::GetDouble(const std::string& name, double def, double min, double max) {
  auto v = Get(name);
  if (!v) return def;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || end == v->c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(x) ||
      x < min || x > max) {
    std::ostringstream o;
    o << "option --" << name << " expects a number in [" << min << ", " << max << "], got '" << *v
      << "'";
    SetError(o.str());
    return def;
  }
  return x;
}

uint64_t Args::GetU64(const std::string& name, uint64_t def) {
  auto v = Get(name);
  if (!v) return def;
  bool digits = !v->empty() && v->size() <= 20;
  for (char c : *v) digits = digits && c >= '0' && c <= '9';
  errno = 0;
  const unsigned long long x = digits ? std::strtoull(v->c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) {
    SetError("option --" + name + " expects an integer in [0, 18446744073709551615], got '" + *v +
             "'");
    return def;
  }
  return x;
}

int64_t Args::GetBytes(const std::string& name, int64_t def) {
  auto v = Get(name);
  if (!v) return def;
  std::string digits = *v;
  int shift = 0;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift > 0) digits.pop_back();
  }
  int64_t x = 0;
  if (!ParseInt64(digits, 1, (int64_t{1} << (62 - shift)), &x)) {
    SetError("option --" + name + " expects a size like 8G, 512M or a byte count, got '" + *v +
             "'");
    return def;
  }
  return x << shift;
}

std::string FormatFlags(const std::vector<FlagSpec>& specs) {
  std::ostringstream out;
  for (const auto& s : specs) {
    std::string left = "  ";
    left += s.short_name ? std::string("-") + s.short_name + ", " : "    ";
    left += "--" + s.name;
    if (s.takes_value) left += " " + s.value_name;
    out << left;
    out << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << s.help;
    if (!s.aliases.empty() || !s.dash_words.empty()) {
      out << " (also";
      for (const auto& d : s.dash_words) out << " -" << d;
      for (const auto& a : s.aliases) out << " --" << a;
      out << ")";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace gannet_cli

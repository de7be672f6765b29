// The chat-template interpreter on its own: Jinja2's whitespace rules with Hugging Face's
// settings, Python's value semantics, provenance of data bytes, and clear errors for what is
// outside the subset. Expected strings were produced by Jinja2 3.1.6
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols) on the same templates;
// tojson is Hugging Face's (insertion order, ensure_ascii=False).
#include "lib/tokenizer/jinja_template.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gannet::tokenizer {
namespace {

absl::StatusOr<std::string> Render(const std::string& src, const Json& data = Json::MakeObject(),
                                   size_t limit = 1 << 20,
                                   std::vector<std::pair<size_t, size_t>>* ranges = nullptr,
                                   int64_t max_steps = 1 << 16) {
  auto t = JinjaTemplate::Parse(src);
  if (!t.ok()) return t.status();
  Json settings = Json::MakeObject();
  settings.Set("x", Json::Bool(true));
  return t->Render(data, settings, limit, ranges, max_steps);
}

std::string Ok(const std::string& src, const Json& data = Json::MakeObject()) {
  auto r = Render(src, data);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "";
}

TEST(JinjaTemplateTest, WhitespaceFollowsTrimAndLstripBlocks) {
  EXPECT_EQ(
      Ok("a\n  {% if x %}\n  b\n  {% endif %}\nc {{- ' d' }}  {#- c -#}  e\n{# comment #}\nf"),
      "a\n  b\nc de\nf");
}

TEST(JinjaTemplateTest, ValuesPrintAsPythonStr) {
  EXPECT_EQ(Ok("{{ none }} {{ 1.0 }} {{ 2.5e-7 }} {{ 1e16 }} {{ 10/4 }} {{ 7//2 }} {{ -7//2 }} "
               "{{ -7 % 3 }} {{ [1,'a',none,true] }} {{ {'k': 'v'} }} {{ 'abc'[-2:] }} "
               "{{ 'abcdef'[::2] }} {{ [3,1,2][1:] }}"),
            "None 1.0 2.5e-07 1e+16 2.5 3 -4 2 [1, 'a', None, True] {'k': 'v'} bc ace [1, 2]");
}

TEST(JinjaTemplateTest, LoopsSortAndControl) {
  Json data = Json::MakeObject();
  Json d = Json::MakeObject();
  d.Set("b", Json::Int(2));
  d.Set("A", Json::Int(1));
  d.Set("c", Json::Int(3));
  data.Set("d", d);
  EXPECT_EQ(Ok("{% for k, v in d | dictsort %}{{ loop.index }}{{ k }}={{ v }}"
               "{{ ',' if not loop.last }}{% endfor %}|{% for x in [] %}x{% else %}empty"
               "{% endfor %}|{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}"
               "{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
               data),
            "1A=1,2b=2,3c=3|empty|02");
}

TEST(JinjaTemplateTest, StringsFiltersAndTests) {
  EXPECT_EQ(Ok("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' x  y '.split() }}|"
               "{{ 'Hi'.upper() }}{{ 'Hi' | lower }}|{{ 'ab' ~ 1 }}|{{ 'x' in 'yxz' }}"
               "{{ 'k' in {'k': 1} }}{{ 2 not in [1] }}|{{ undefined_thing | default('dflt') }}|"
               "{{ none | default('dflt') }}|{{ '' | default('dflt', true) }}|{{ [1,2] | length }}|"
               "{{ {'b':1,'a':2} | tojson }}|{{ 'a\"b\\n' | tojson }}|{{ [1,2,3] | join('-') }}"),
            "a b|['a', 'b', '', 'c']|['x', 'y']|HIhi|ab1|TrueTrueTrue|dflt|None|dflt|2|"
            "{\"b\": 1, \"a\": 2}|\"a\\\"b\\n\"|1-2-3");
  EXPECT_EQ(Ok("{{ 1 is number }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is sequence }}"
               "{{ y is defined }}{{ none is none }}{{ true is boolean }}"),
            "TrueTrueTrueTrueFalseTrueTrue");
}

TEST(JinjaTemplateTest, MacrosNamespacesAndKeywords) {
  EXPECT_EQ(Ok("{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
               "{{ m(1) }}|{{ m(1, c=3) }}|{% set ns = namespace(n=0) %}"
               "{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "1BNone|1B3|3");
}

TEST(JinjaTemplateTest, DataRangesMarkTheCallersBytes) {
  Json data = Json::MakeObject();
  data.Set("msg", Json::String("  <|turn>hi "));
  std::vector<std::pair<size_t, size_t>> ranges;
  auto r = Render("<|turn>user\n{{ msg | trim }}<turn|>{{ '[' + msg[2:4] + ']' }}", data, 1 << 20,
                  &ranges);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "<|turn>user\n<|turn>hi<turn|>[<|]");
  // "<|turn>hi" (12..21) and "<|" (29..31) are the caller's; the markers are the template's.
  std::vector<std::pair<size_t, size_t>> want = {{12, 21}, {29, 31}};
  EXPECT_EQ(ranges, want);
}

// A media part's type (exactly image, audio or video) is the template's, so Gemma-4's
// '<|' ~ part['type'] ~ '|>' stays a control token; any other type, and text, are the caller's.
TEST(JinjaTemplateTest, MediaPartTypesAreTemplateText) {
  auto parts = Json::Parse(
      R"({"parts": [{"type": "image"}, {"type": "imagex"}, {"type": "text", "text": "<|a|>"}]})");
  ASSERT_TRUE(parts.ok());
  std::vector<std::pair<size_t, size_t>> ranges;
  auto r = Render(
      "{% for p in parts %}{% if p['type'] == 'text' %}{{ p['text'] }}{% else %}"
      "{{ '<|' ~ p['type'] ~ '|>' }}{% endif %}{% endfor %}",
      *parts, 1 << 20, &ranges);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "<|image|><|imagex|><|a|>");
  // "imagex" (11..17) and "<|a|>" (19..24) are the caller's; "image" is not.
  std::vector<std::pair<size_t, size_t>> want = {{11, 17}, {19, 24}};
  EXPECT_EQ(ranges, want);
}

TEST(JinjaTemplateTest, UnsupportedConstructsAreNamed) {
  auto inc = Render("line one\n{% include 'other.jinja' %}");
  ASSERT_FALSE(inc.ok());
  EXPECT_EQ(inc.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(inc.status().message(), "line 2")) << inc.status();
  EXPECT_TRUE(absl::StrContains(inc.status().message(), "'include'")) << inc.status();

  auto filter = Render("{{ 'a' | wordwrap(3) }}");
  ASSERT_FALSE(filter.ok());
  EXPECT_EQ(filter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(filter.status().message(), "'wordwrap' filter")) << filter.status();

  auto fn = Render("{{ cycler(1, 2) }}");
  ASSERT_FALSE(fn.ok());
  EXPECT_TRUE(absl::StrContains(fn.status().message(), "'cycler' is undefined")) << fn.status();
}

TEST(JinjaTemplateTest, SyntaxAndRenderErrorsNameTheLine) {
  for (const char* bad :
       {"{% if x %}never closed", "{{ 'open", "{% endif %}", "{{ 1 + }}",
        "{% for x in %}{% endfor %}", "{# no end",
        // Numbers past int64 / double (the first found by jinja_template_fuzz).
        "{{ m.99999999999999999999 }}", "{{ 99999999999999999999 }}", "{{ 1e999 }}"}) {
    auto r = Render(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "chat template line")) << r.status();
  }
  // Nesting past the parser's bound (jinja_template_fuzz: thousands of '(' overflowed the stack):
  // parentheses, unary operators, `not`, conditional chains and blocks each end in a syntax error.
  const int deep = 5000;
  std::string parens = "{{ " + std::string(deep, '(') + "1" + std::string(deep, ')') + " }}";
  std::string minus = "{{ " + std::string(deep, '-') + "1 }}", nots = "{{ ", conds = "{{ 1", blocks,
              ends;
  for (int i = 0; i < deep; ++i) {
    nots += "not ";
    conds += " if x else 1";
    blocks += "{% if x %}";
    ends += "{% endif %}";
  }
  nots += "x }}";
  conds += " }}";
  for (const std::string& bad : {parens, minus, nots, conds, blocks + ends}) {
    auto r = Render(bad);
    ASSERT_FALSE(r.ok()) << bad.substr(0, 40);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(r.status().message(), "levels deep")) << r.status();
  }
  // Nesting a real template uses is fine.
  auto nested = Render("{{ ((((1 + 2)))) }}{% if true %}{% if true %}ok{% endif %}{% endif %}");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(*nested, "3ok");
  auto raised = Render("\n{{ raise_exception('no tools here') }}");
  ASSERT_FALSE(raised.ok());
  EXPECT_TRUE(absl::StrContains(raised.status().message(), "line 2")) << raised.status();
  EXPECT_TRUE(absl::StrContains(raised.status().message(), "no tools here")) << raised.status();
  auto type = Render("{{ 'a' + 1 }}");
  ASSERT_FALSE(type.ok());
  EXPECT_TRUE(absl::StrContains(type.status().message(), "cannot apply '+'")) << type.status();
  auto undef_attr = Render("{{ nothing.field }}");
  ASSERT_FALSE(undef_attr.ok());
  EXPECT_TRUE(absl::StrContains(undef_attr.status().message(), "undefined")) << undef_attr.status();
}

TEST(JinjaTemplateTest, OutputAndRecursionAreBounded) {
  auto big = Render("{% for i in range(1000) %}0123456789{% endfor %}", Json::MakeObject(), 100);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  auto deep = Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kResourceExhausted);
  auto range = Render("{% for i in range(100000000) %}{% endfor %}");
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  // Loop rounds and the items range() makes count as steps (a 2^16-step budget here).
  auto steps = Render("{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gannet::tokenizer

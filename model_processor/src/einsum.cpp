// Einsum as MatMul: parse the equation (onnx/docs/Operators.md, Einsum: letters, "...", "->",
// implicit output = the letters used once, in alphabetical order), classify each label and fold
// each class into one dimension.
#include "einsum.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace floorline::mp {
namespace {

// Labels: letters as written; ellipsis dims as '0' + k (k counted from the left of the widest
// ellipsis), which no letter equals.
using Term = std::string;

bool expand(const std::string& term, size_t rank, size_t widest, Term& out, std::string* why) {
  const auto dots = term.find("...");
  std::string letters = term;
  if (dots != std::string::npos) letters.erase(dots, 3);
  if (letters.find('.') != std::string::npos) return (*why = "a '.' outside an ellipsis", false);
  if (letters.size() > rank) return (*why = "more labels than dimensions", false);
  const size_t ell = rank - letters.size();
  if (dots == std::string::npos && ell != 0) return (*why = "fewer labels than dimensions", false);
  std::string e;
  for (size_t k = 0; k < ell; ++k) e.push_back(static_cast<char>('0' + (widest - ell + k)));
  out = dots == std::string::npos ? letters : letters.substr(0, dots) + e + letters.substr(dots);
  return true;
}

}  // namespace

std::optional<Shape> einsum_output_shape(const std::string& equation, const std::vector<Shape>& operands) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq.push_back(ch);
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const auto comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size()) return std::nullopt;
  size_t widest = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (std::any_of(operands[k].begin(), operands[k].end(), [](int64_t d) { return d < 0; }))
      return std::nullopt;
    const size_t letters = static_cast<size_t>(
        std::count_if(terms[k].begin(), terms[k].end(), [](char ch) { return ch != '.'; }));
    if (letters > operands[k].size()) return std::nullopt;
    widest = std::max(widest, operands[k].size() - letters);
  }
  if (widest > 9) return std::nullopt;
  std::map<char, int64_t> size;
  std::map<char, int> uses;
  std::string why;
  for (size_t k = 0; k < terms.size(); ++k) {
    Term t;
    if (!expand(terms[k], operands[k].size(), widest, t, &why)) return std::nullopt;
    for (size_t j = 0; j < t.size(); ++j) {
      ++uses[t[j]];
      auto [it, fresh] = size.emplace(t[j], operands[k][j]);
      if (!fresh && it->second != operands[k][j]) {
        if (it->second == 1)
          it->second = operands[k][j];
        else if (operands[k][j] != 1)
          return std::nullopt;
      }
    }
  }
  std::string ell, out;
  for (size_t k = 0; k < widest; ++k) ell.push_back(static_cast<char>('0' + k));
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    if (const auto dots = out.find("..."); dots != std::string::npos) out.replace(dots, 3, ell);
  } else {
    out = ell;
    for (const auto& [ch, n] : uses)
      if (ch >= 'A' && n == 1) out.push_back(ch);
  }
  Shape y;
  for (char ch : out) {
    auto it = size.find(ch);
    if (it == size.end()) return std::nullopt;
    y.push_back(it->second);
  }
  return y;
}

std::optional<EinsumMatMul> einsum_as_matmul(const std::string& equation, const Shape& a, const Shape& b,
                                             std::string* why) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq.push_back(ch);
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const auto comma = lhs.find(',');
  if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos)
    return (*why = "not two operands", std::nullopt);
  for (const Shape* s : {&a, &b})
    if (std::any_of(s->begin(), s->end(), [](int64_t d) { return d < 0; }))
      return (*why = "operand shapes unknown", std::nullopt);
  const std::string ta = lhs.substr(0, comma), tb = lhs.substr(comma + 1);
  auto letters = [](const std::string& t) {
    return static_cast<size_t>(std::count_if(t.begin(), t.end(), [](char ch) { return ch != '.'; }));
  };
  const size_t ea = a.size() >= letters(ta) ? a.size() - letters(ta) : 0;
  const size_t eb = b.size() >= letters(tb) ? b.size() - letters(tb) : 0;
  const size_t widest = std::max(ea, eb);
  if (widest > 9) return (*why = "an ellipsis of more than 9 dims", std::nullopt);
  Term la, lb, ly;
  if (!expand(ta, a.size(), widest, la, why) || !expand(tb, b.size(), widest, lb, why)) return std::nullopt;
  std::string ell;
  for (size_t k = 0; k < widest; ++k) ell.push_back(static_cast<char>('0' + k));
  if (arrow != std::string::npos) {
    std::string out = eq.substr(arrow + 2);
    if (const auto dots = out.find("..."); dots != std::string::npos) out.replace(dots, 3, ell);
    ly = out;
  } else {  // implicit: the ellipsis, then the letters used exactly once, alphabetically
    std::map<char, int> uses;
    for (char ch : la + lb)
      if (ch >= 'A') ++uses[ch];
    ly = ell;
    for (const auto& [ch, n] : uses)
      if (n == 1) ly.push_back(ch);
  }
  // Sizes per label (1 broadcasts).
  std::map<char, int64_t> size;
  for (const auto& [term, shape] : {std::pair<const Term&, const Shape&>{la, a}, {lb, b}}) {
    for (size_t k = 0; k < term.size(); ++k) {
      if (std::count(term.begin(), term.end(), term[k]) != 1)
        return (*why = std::string("label '") + term[k] + "' repeated in an operand (a diagonal)",
                std::nullopt);
      auto [it, fresh] = size.emplace(term[k], shape[k]);
      if (!fresh && it->second != shape[k]) {
        if (it->second == 1)
          it->second = shape[k];
        else if (shape[k] != 1)
          return (*why = std::string("sizes of label '") + term[k] + "' disagree", std::nullopt);
      }
    }
  }
  for (char ch : ly)
    if (!size.count(ch))
      return (*why = std::string("output label '") + ch + "' is in no operand", std::nullopt);
  auto in = [](const Term& t, char ch) { return t.find(ch) != std::string::npos; };
  auto dim_in = [&](const Term& t, const Shape& s, char ch) { return s[t.find(ch)]; };
  EinsumMatMul r;
  int64_t m = 1, n = 1, k = 1;
  for (char ch : ly) {
    if (in(la, ch) && in(lb, ch)) {
      r.a.push_back(dim_in(la, a, ch));
      r.b.push_back(dim_in(lb, b, ch));
      r.y.push_back(size[ch]);
    } else if (in(la, ch)) {
      m *= size[ch];
    } else {
      n *= size[ch];
    }
  }
  for (const auto& [ch, s] : size) {
    if (in(ly, ch)) continue;
    if (!(in(la, ch) && in(lb, ch)))
      return (*why = std::string("label '") + ch + "' is summed within one operand (a reduction)",
              std::nullopt);
    k *= s;
  }
  r.a.insert(r.a.end(), {m, k});
  r.b.insert(r.b.end(), {k, n});
  r.y.insert(r.y.end(), {m, n});
  return r;
}

}  // namespace floorline::mp

// floorline/common/result.hpp — the value-or-error type used at every stage boundary.
//
// A function that can fail returns Result<T> (or Status = Result<void>). Errors carry one line of
// text that already names what failed (file, node, call); callers add context with
// Error::with_context() rather than re-wording it. An Error also carries a code (disposition.hpp):
// failed unless the code that raised it says the case is skipped, unsupported or not verifiable,
// so that the disposition of a case travels typed, never as a prefix of the text. Exceptions from libraries
// (protobuf, ONNX) are caught at the stage boundary and turned into an Error; they never cross a public
// header.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "floorline/common/disposition.hpp"

namespace floorline {

struct Error {
  std::string message;
  Disposition code = Disposition::kFailed;  // never kPassed

  // "ctx: message", same code — used to prefix a file or node name to an error raised below it.
  [[nodiscard]] Error with_context(std::string_view ctx) const {
    return Error{fmt::format("{}: {}", ctx, message), code};
  }
};

// A failed error.
template <class... Args>
[[nodiscard]] Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

// An error with its code: make_error(Disposition::kUnsupported, "no reorder for {}", layout).
template <class... Args>
[[nodiscard]] Error make_error(Disposition code, fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...), code};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace floorline

#define FL_CONCAT_INNER(a, b) a##b
#define FL_CONCAT(a, b) FL_CONCAT_INNER(a, b)

// Return the error of a failed Status/Result from the enclosing function.
#define FL_TRY(expr)                                         \
  do {                                                       \
    auto&& fl_try_result_ = (expr);                          \
    if (!fl_try_result_.ok()) return fl_try_result_.error(); \
  } while (0)

// `FL_ASSIGN_OR_RETURN(auto x, f());` binds the value of a Result or returns its error.
#define FL_ASSIGN_OR_RETURN(lhs, expr) FL_ASSIGN_OR_RETURN_IMPL(FL_CONCAT(fl_result_, __LINE__), lhs, expr)
#define FL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.error();             \
  lhs = std::move(tmp).value()

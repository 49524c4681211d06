#include "anvil/dtype.h"

#include <ostream>

namespace anvil {

std::string_view to_string(DType t) noexcept {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::U8:
      return "u8";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << to_string(t); }

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return os << (s.to<bool>() ? "true" : "false");
    case Scalar::Kind::Int:
      return os << s.to_int();
    case Scalar::Kind::Float:
      return os << s.to_double();
  }
  return os;
}

}  // namespace anvil

// The protobuf wire format, writing only, for the few tensorflow messages an
// event file holds (Event, Summary, HistogramProto, TensorProto; field
// numbers in src/tensorboard/summary_writer.cpp). A message is a string of
// fields; an embedded message is a length-delimited field holding one.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace anvil::detail::proto {

enum class Wire : std::uint8_t { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };

class Message {
 public:
  Message& varint(int field, std::uint64_t v) {
    key(field, Wire::Varint);
    put_varint(v);
    return *this;
  }
  // int32 and int64 fields: negative values take 10 bytes (two's complement).
  Message& int64(int field, std::int64_t v) { return varint(field, static_cast<std::uint64_t>(v)); }
  Message& f64(int field, double v) {
    key(field, Wire::Fixed64);
    put_fixed(std::bit_cast<std::uint64_t>(v), 8);
    return *this;
  }
  Message& f32(int field, float v) {
    key(field, Wire::Fixed32);
    put_fixed(std::bit_cast<std::uint32_t>(v), 4);
    return *this;
  }
  Message& bytes(int field, std::string_view b) {
    key(field, Wire::Bytes);
    put_varint(b.size());
    out_.append(b);
    return *this;
  }
  Message& message(int field, const Message& m) { return bytes(field, m.str()); }
  // A packed repeated double (proto3's default for repeated scalars).
  Message& packed_f64(int field, std::span<const double> vs) {
    key(field, Wire::Bytes);
    put_varint(vs.size() * 8);
    for (double v : vs) put_fixed(std::bit_cast<std::uint64_t>(v), 8);
    return *this;
  }

  const std::string& str() const noexcept { return out_; }

 private:
  void key(int field, Wire w) { put_varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint8_t>(w)); }
  void put_varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void put_fixed(std::uint64_t v, int n) {  // little-endian
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }

  std::string out_;
};

}  // namespace anvil::detail::proto

#include "io/pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "base/utf8.h"
#include "wick/errors.h"

namespace wick::io {
namespace {

using Kind = PickleValue::Kind;

// Names of every pickle opcode (Lib/pickletools.py), for messages.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case '(':
      return "MARK";
    case '.':
      return "STOP";
    case '0':
      return "POP";
    case '1':
      return "POP_MARK";
    case '2':
      return "DUP";
    case 'F':
      return "FLOAT";
    case 'I':
      return "INT";
    case 'J':
      return "BININT";
    case 'K':
      return "BININT1";
    case 'L':
      return "LONG";
    case 'M':
      return "BININT2";
    case 'N':
      return "NONE";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 'R':
      return "REDUCE";
    case 'S':
      return "STRING";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'V':
      return "UNICODE";
    case 'X':
      return "BINUNICODE";
    case 'a':
      return "APPEND";
    case 'b':
      return "BUILD";
    case 'c':
      return "GLOBAL";
    case 'd':
      return "DICT";
    case '}':
      return "EMPTY_DICT";
    case 'e':
      return "APPENDS";
    case 'g':
      return "GET";
    case 'h':
      return "BINGET";
    case 'i':
      return "INST";
    case 'j':
      return "LONG_BINGET";
    case 'l':
      return "LIST";
    case ']':
      return "EMPTY_LIST";
    case 'o':
      return "OBJ";
    case 'p':
      return "PUT";
    case 'q':
      return "BINPUT";
    case 'r':
      return "LONG_BINPUT";
    case 's':
      return "SETITEM";
    case 't':
      return "TUPLE";
    case ')':
      return "EMPTY_TUPLE";
    case 'u':
      return "SETITEMS";
    case 'G':
      return "BINFLOAT";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 0x80:
      return "PROTO";
    case 0x81:
      return "NEWOBJ";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x85:
      return "TUPLE1";
    case 0x86:
      return "TUPLE2";
    case 0x87:
      return "TUPLE3";
    case 0x88:
      return "NEWTRUE";
    case 0x89:
      return "NEWFALSE";
    case 0x8a:
      return "LONG1";
    case 0x8b:
      return "LONG4";
    case 0x8c:
      return "SHORT_BINUNICODE";
    case 0x8d:
      return "BINUNICODE8";
    case 0x8e:
      return "BINBYTES8";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x93:
      return "STACK_GLOBAL";
    case 0x94:
      return "MEMOIZE";
    case 0x95:
      return "FRAME";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

std::string opcode_label(uint8_t op) {
  char buf[48];
  const char* n = opcode_name(op);
  if (n) {
    std::snprintf(buf, sizeof buf, "opcode %s (0x%02x)", n, op);
  } else {
    std::snprintf(buf, sizeof buf, "unknown opcode 0x%02x", op);
  }
  return buf;
}

std::string printable(std::string_view s, size_t limit) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > limit) out += "...";
  return out;
}

bool allowed_global(std::string_view module, std::string_view name) {
  if (module == "collections") return name == "OrderedDict";
  if (module == "torch._utils") return name == "_rebuild_tensor_v2" || name == "_rebuild_parameter";
  if (module == "torch") {
    static const char* kStorages[] = {
        "FloatStorage", "HalfStorage",  "BFloat16Storage", "DoubleStorage", "IntStorage",
        "LongStorage",  "ShortStorage", "CharStorage",     "ByteStorage",   "BoolStorage"};
    for (const char* s : kStorages) {
      if (name == s) return true;
    }
  }
  return false;
}

}  // namespace

std::string describe(const PickleValue& v) {
  switch (v.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.boolean ? "True" : "False";
    case Kind::kInt:
      return "int " + std::to_string(v.integer);
    case Kind::kFloat: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "float %.9g", v.real);
      return buf;
    }
    case Kind::kString:
      return "str '" + printable(v.str, 80) + "'";
    case Kind::kBytes:
      return "bytes of length " + std::to_string(v.str.size());
    case Kind::kTuple:
      return "a tuple of " + std::to_string(v.items.size());
    case Kind::kList:
      return "a list of " + std::to_string(v.items.size());
    case Kind::kDict:
      return "a dict of " + std::to_string(v.entries.size());
    case Kind::kGlobal:
      return "global '" + printable(std::string(v.module) + " " + std::string(v.name), 120) + "'";
    case Kind::kPersistentId:
      return "a persistent id";
    case Kind::kCall:
      return "a call of " + (v.callable ? describe(*v.callable) : std::string("?"));
  }
  return "?";
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const std::string& path, const std::string& what)
      : size_(size), path_(path), what_(what) {
    // A share of the pickle's size (every opcode takes at least one byte), under a ceiling.
    const size_t half = size / 2 + kPickleLimitSlack;
    max_values_ = std::min(kMaxPickleValues, half);
    max_memo_ = std::min(kMaxPickleMemo, half);
    // (a MARK ... TUPLE of N one-byte values holds N stack slots: 8 bytes per pickle byte)
    max_stack_ = size > kMaxPickleStack ? kMaxPickleStack
                                        : std::min(kMaxPickleStack, size + kPickleLimitSlack);
    max_slots_ = size > kMaxPickleSlots ? kMaxPickleSlots
                                        : std::min(kMaxPickleSlots, 2 * size + kPickleLimitSlack);
    out_.bytes_.assign(data, data + size);
    d_ = out_.bytes_.data();
    out_.constants_ = std::make_unique<PickleValue[]>(3);
    none_ = &out_.constants_[0];
    false_ = &out_.constants_[1];
    true_ = &out_.constants_[2];
    false_->kind = true_->kind = Kind::kBool;
    true_->boolean = true;
  }

  Unpickled run();

 private:
  [[noreturn]] void malformed(const std::string& expected, const std::string& found) const {
    throw FormatError(path_, "", expected,
                      found + " at byte " + std::to_string(op_off_) + " of " + what_);
  }
  [[noreturn]] void refuse(const std::string& expected, const std::string& found) const {
    throw UnsafePickleError(path_, "", expected,
                            found + " at byte " + std::to_string(op_off_) + " of " + what_ +
                                " (refused; nothing was executed)");
  }
  // A cap of unpickle()'s limits was reached.
  [[noreturn]] void too_many(const std::string& what, size_t cap) const {
    malformed("at most " + std::to_string(cap) + " " + what + " in a state-dict pickle of " +
                  std::to_string(size_) + " bytes (" + op() + ")",
              "more (a hostile or corrupt pickle)");
  }
  std::string op() const { return opcode_label(op_); }

  void need(uint64_t n) {
    if (n > size_ - pos_) {
      malformed(std::to_string(n) + " more bytes for " + op(),
                "only " + std::to_string(size_ - pos_) + " left (truncated pickle)");
    }
  }
  uint64_t read_le(int n) {
    need(static_cast<uint64_t>(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | d_[pos_ + i];
    pos_ += static_cast<size_t>(n);
    return v;
  }
  std::string_view read_bytes(uint64_t n) {
    need(n);
    std::string_view s(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  std::string_view read_line() {
    const void* nl = std::memchr(d_ + pos_, '\n', size_ - pos_);
    if (!nl) malformed("a newline-terminated argument for " + op(), "none (truncated pickle)");
    const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(nl) - (d_ + pos_));
    std::string_view s(reinterpret_cast<const char*>(d_ + pos_), n);
    pos_ += n + 1;
    return s;
  }

  PickleValue* make(Kind k) {
    if (out_.count_ >= max_values_) too_many("values", max_values_);
    if (out_.count_ % Unpickled::kChunk == 0) {
      out_.chunks_.push_back(std::make_unique<PickleValue[]>(Unpickled::kChunk));
    }
    PickleValue* v = &out_.chunks_.back()[out_.count_ % Unpickled::kChunk];
    ++out_.count_;
    v->kind = k;
    v->offset = op_off_;
    return v;
  }
  // Charges `n` new container slots (items, dict keys and values) to the budget.
  void charge(size_t n) {
    if (n > max_slots_ - slots_) too_many("tuple/list items and dict keys and values", max_slots_);
    slots_ += n;
  }
  void push(PickleValue* v) {
    if (stack_.size() >= max_stack_) too_many("values on the stack", max_stack_);
    stack_.push_back(v);
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  PickleValue* top() {
    if (stack_.size() <= floor()) {
      malformed("a value on the stack for " + op(),
                marks_.empty() ? "an empty stack" : "none above the last MARK");
    }
    return stack_.back();
  }
  PickleValue* pop() {
    PickleValue* v = top();
    stack_.pop_back();
    return v;
  }
  // Moves the values above the last MARK out of the stack (slots are charged by the caller when
  // they go into a container).
  std::vector<PickleValue*> pop_mark() {
    if (marks_.empty()) malformed("a MARK before " + op(), "none");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PickleValue*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void discard_mark() {
    if (marks_.empty()) malformed("a MARK before " + op(), "none");
    stack_.resize(marks_.back());
    marks_.pop_back();
  }
  void memo_put(uint64_t index, PickleValue* v) {
    if (index >= max_memo_) {
      malformed("a memo index below " + std::to_string(max_memo_) + " for " + op() +
                    " (a pickle of " + std::to_string(size_) + " bytes numbers its memo from 0)",
                "index " + std::to_string(index));
    }
    if (index >= memo_.size()) memo_.resize(static_cast<size_t>(index) + 1, nullptr);
    if (!memo_[index]) ++memo_count_;
    memo_[index] = v;
  }
  PickleValue* memo_get(uint64_t index) {
    if (index >= memo_.size() || !memo_[index]) {
      malformed("memo entry " + std::to_string(index) + " stored before " + op() + " reads it",
                "none");
    }
    return memo_[index];
  }
  PickleValue* make_string(std::string_view s, Kind k) {
    // Strings are UTF-8 as Python's "surrogatepass" decoder accepts it (surrogates allowed).
    if (k == Kind::kString && !base::utf8::is_valid(s, base::utf8::Surrogates::kAllow)) {
      malformed("UTF-8 text for " + op(), "invalid UTF-8 '" + printable(s, 80) + "'");
    }
    PickleValue* v = make(k);
    v->str = s;
    return v;
  }
  PickleValue* make_int(int64_t i) {
    PickleValue* v = make(Kind::kInt);
    v->integer = i;
    return v;
  }
  // LONG1/LONG4: little-endian two's complement of n bytes.
  PickleValue* make_long(uint64_t n) {
    if (n > 8) {
      malformed("an integer of at most 8 bytes (int64) for " + op(),
                "a " + std::to_string(n) + "-byte integer");
    }
    std::string_view b = read_bytes(n);
    uint64_t u = 0;
    for (size_t i = n; i-- > 0;) u = (u << 8) | static_cast<uint8_t>(b[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);
    return make_int(static_cast<int64_t>(u));
  }
  PickleValue* make_global(std::string_view module, std::string_view name) {
    if (!allowed_global(module, name)) {
      refuse(
          "only the globals a tensor state dict needs (collections.OrderedDict, "
          "torch._utils._rebuild_tensor_v2/_rebuild_parameter, torch *Storage types)",
          "pickle global '" + printable(module, 120) + " " + printable(name, 120) + "'");
    }
    PickleValue* v = make(Kind::kGlobal);
    v->module = module;
    v->name = name;
    return v;
  }
  void add_entries(PickleValue* d, const std::vector<PickleValue*>& kv) {
    if (kv.size() % 2 != 0) {
      malformed("key/value pairs for " + op(), std::to_string(kv.size()) + " values (odd)");
    }
    charge(kv.size());
    for (size_t i = 0; i < kv.size(); i += 2) d->entries.emplace_back(kv[i], kv[i + 1]);
  }
  PickleValue* reduce(PickleValue* callable, PickleValue* args);

  const uint8_t* d_ = nullptr;  // out_.bytes_
  size_t size_;
  const std::string& path_;
  const std::string& what_;
  size_t max_values_ = 0, max_stack_ = 0, max_memo_ = 0, max_slots_ = 0;
  size_t slots_ = 0;
  size_t pos_ = 0;
  size_t op_off_ = 0;
  uint8_t op_ = 0;
  std::vector<PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::vector<PickleValue*> memo_;  // by index; nullptr where nothing was stored
  size_t memo_count_ = 0;           // entries stored (MEMOIZE's next index)
  PickleValue* none_ = nullptr;
  PickleValue* false_ = nullptr;
  PickleValue* true_ = nullptr;
  Unpickled out_;
};

PickleValue* Unpickler::reduce(PickleValue* callable, PickleValue* args) {
  if (!callable->is(Kind::kGlobal)) {
    refuse("REDUCE to apply a whitelisted global", "REDUCE on " + describe(*callable));
  }
  if (!args->is(Kind::kTuple)) {
    malformed("a tuple of arguments for REDUCE", describe(*args));
  }
  if (callable->is_global("collections", "OrderedDict")) {
    // OrderedDict() or OrderedDict(iterable of pairs): becomes a plain (ordered) dict.
    // The pairs are copied into the new dict: charged to the slot budget, like every slot.
    PickleValue* d = make(Kind::kDict);
    if (args->items.empty()) return d;
    const PickleValue* src = args->items.size() == 1 ? args->items[0] : nullptr;
    if (!src || !(src->is(Kind::kList) || src->is(Kind::kTuple))) {
      refuse("OrderedDict() or OrderedDict(list of pairs)",
             "OrderedDict called with " + describe(*args));
    }
    charge(2 * src->items.size());
    for (const PickleValue* pair : src->items) {
      if (!(pair->is(Kind::kTuple) || pair->is(Kind::kList)) || pair->items.size() != 2) {
        malformed("(key, value) pairs in OrderedDict(...)", describe(*pair));
      }
      d->entries.emplace_back(pair->items[0], pair->items[1]);
    }
    return d;
  }
  if (callable->module == "torch._utils") {
    PickleValue* c = make(Kind::kCall);
    c->callable = callable;
    c->args = args;  // shared, not copied: a memoized tuple may be reduced any number of times
    return c;
  }
  refuse(
      "REDUCE only on OrderedDict and the torch._utils rebuild functions (a storage type "
      "may only appear inside a persistent id)",
      "REDUCE on " + describe(*callable));
}

Unpickled Unpickler::run() {
  for (;;) {
    op_off_ = pos_;
    if (pos_ >= size_) {
      malformed("a STOP opcode ('.') ending the pickle", "the end of the data (truncated pickle)");
    }
    op_ = d_[pos_++];
    switch (op_) {
      case 0x80: {  // PROTO
        const uint64_t v = read_le(1);
        if (v < 2 || v > 5) malformed("pickle protocol 2 to 5", "protocol " + std::to_string(v));
        break;
      }
      case 0x95: {  // FRAME: a length prefix only; the frame must lie inside the data.
        const uint64_t n = read_le(8);
        need(n);
        break;
      }
      case '.': {  // STOP
        if (!marks_.empty() || stack_.size() != 1) {
          malformed("exactly one value on the stack and no open MARK at STOP",
                    std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) +
                        " open MARKs");
        }
        out_.root_ = stack_.back();
        return std::move(out_);
      }
      case '}':
        push(make(Kind::kDict));
        break;
      case ']':
        push(make(Kind::kList));
        break;
      case ')':
        push(make(Kind::kTuple));
        break;
      case '(':
        if (marks_.size() >= max_stack_) too_many("open MARKs", max_stack_);
        marks_.push_back(stack_.size());
        break;
      case 't': {
        PickleValue* t = make(Kind::kTuple);
        t->items = pop_mark();
        charge(t->items.size());
        push(t);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op_ - 0x84u;
        PickleValue* t = make(Kind::kTuple);
        charge(n);
        t->items.resize(n);
        for (size_t i = n; i-- > 0;) t->items[i] = pop();
        push(t);
        break;
      }
      case 'q':
        memo_put(read_le(1), top());
        break;
      case 'r':
        memo_put(read_le(4), top());
        break;
      case 0x94:
        memo_put(memo_count_, top());
        break;
      case 'h':
        push(memo_get(read_le(1)));
        break;
      case 'j':
        push(memo_get(read_le(4)));
        break;
      case 'X':
        push(make_string(read_bytes(read_le(4)), Kind::kString));
        break;
      case 0x8c:
        push(make_string(read_bytes(read_le(1)), Kind::kString));
        break;
      case 0x8d:
        push(make_string(read_bytes(read_le(8)), Kind::kString));
        break;
      case 'T': {  // BINSTRING: signed 4-byte length
        const int64_t n = static_cast<int32_t>(static_cast<uint32_t>(read_le(4)));
        if (n < 0) malformed("a non-negative BINSTRING length", std::to_string(n));
        push(make_string(read_bytes(static_cast<uint64_t>(n)), Kind::kBytes));
        break;
      }
      case 'U':
        push(make_string(read_bytes(read_le(1)), Kind::kBytes));
        break;
      case 'B':
        push(make_string(read_bytes(read_le(4)), Kind::kBytes));
        break;
      case 'C':
        push(make_string(read_bytes(read_le(1)), Kind::kBytes));
        break;
      case 0x8e:
        push(make_string(read_bytes(read_le(8)), Kind::kBytes));
        break;
      case 'J':
        push(make_int(static_cast<int32_t>(static_cast<uint32_t>(read_le(4)))));
        break;
      case 'K':
        push(make_int(static_cast<int64_t>(read_le(1))));
        break;
      case 'M':
        push(make_int(static_cast<int64_t>(read_le(2))));
        break;
      case 0x8a:
        push(make_long(read_le(1)));
        break;
      case 0x8b:
        push(make_long(read_le(4)));
        break;
      case 'N':
        push(none_);
        break;
      case 0x88:
        push(true_);
        break;
      case 0x89:
        push(false_);
        break;
      case 'G': {  // BINFLOAT: big-endian IEEE double
        std::string_view b = read_bytes(8);
        uint64_t u = 0;
        for (size_t i = 0; i < 8; ++i) u = (u << 8) | static_cast<uint8_t>(b[i]);
        PickleValue* f = make(Kind::kFloat);
        std::memcpy(&f->real, &u, sizeof u);
        push(f);
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        const std::string_view module = read_line();
        const std::string_view name = read_line();
        push(make_global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PickleValue* name = pop();
        PickleValue* module = pop();
        if (!module->is(Kind::kString) || !name->is(Kind::kString)) {
          malformed("two str values (module, name) for STACK_GLOBAL",
                    describe(*module) + " and " + describe(*name));
        }
        push(make_global(module->str, name->str));
        break;
      }
      case 'Q': {  // BINPERSID
        PickleValue* pid = pop();
        PickleValue* v = make(Kind::kPersistentId);
        v->args = pid;
        push(v);
        break;
      }
      case 'R': {
        PickleValue* args = pop();
        PickleValue* callable = pop();
        push(reduce(callable, args));
        break;
      }
      case 's': {
        PickleValue* value = pop();
        PickleValue* key = pop();
        PickleValue* d = top();
        if (!d->is(Kind::kDict)) malformed("a dict below SETITEM's key and value", describe(*d));
        charge(2);
        d->entries.emplace_back(key, value);
        break;
      }
      case 'u': {
        std::vector<PickleValue*> kv = pop_mark();
        PickleValue* d = top();
        if (!d->is(Kind::kDict)) malformed("a dict below SETITEMS' MARK", describe(*d));
        add_entries(d, kv);
        break;
      }
      case 'a': {
        PickleValue* value = pop();
        PickleValue* l = top();
        if (!l->is(Kind::kList)) malformed("a list below APPEND's value", describe(*l));
        charge(1);
        l->items.push_back(value);
        break;
      }
      case 'e': {
        std::vector<PickleValue*> vs = pop_mark();
        PickleValue* l = top();
        if (!l->is(Kind::kList)) malformed("a list below APPENDS' MARK", describe(*l));
        charge(vs.size());
        l->items.insert(l->items.end(), vs.begin(), vs.end());
        break;
      }
      case 'b': {  // BUILD: only the instance state of an (Ordered)dict, e.g. `_metadata`.
        PickleValue* state = pop();
        PickleValue* obj = top();
        if (!obj->is(Kind::kDict)) {
          refuse("BUILD only on an OrderedDict (its attributes are ignored)",
                 "BUILD on " + describe(*obj) + " with state " + describe(*state));
        }
        break;
      }
      case 'd': {
        PickleValue* d = make(Kind::kDict);
        add_entries(d, pop_mark());
        push(d);
        break;
      }
      case 'l': {
        PickleValue* l = make(Kind::kList);
        l->items = pop_mark();
        charge(l->items.size());
        push(l);
        break;
      }
      case '0':  // POP: the top value, or the last MARK if none is above it
        if (stack_.size() > floor()) {
          stack_.pop_back();
        } else {
          discard_mark();
        }
        break;
      case '1':
        discard_mark();
        break;
      case '2':
        push(top());
        break;
      default:
        refuse("only the pickle opcodes torch.save writes for a tensor state dict",
               opcode_label(op_));
    }
  }
}

Unpickled unpickle(const uint8_t* data, size_t size, const std::string& path,
                   const std::string& what) {
  Unpickler u(data, size, path, what);
  return u.run();
}

}  // namespace wick::io

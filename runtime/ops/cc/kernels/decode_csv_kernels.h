/* The field splitter behind retf's DecodeCSV kernel: TensorFlow's DecodeCSV record grammar, field
   for field and error for error, without building a std::string per character and per field. */

#ifndef RETF_OPS_CC_KERNELS_DECODE_CSV_KERNELS_H_
#define RETF_OPS_CC_KERNELS_DECODE_CSV_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace retf {

// One field of a record: a view into the record, or into the splitter's scratch for a quoted
// field whose doubled quotes had to be undone.
struct CsvField {
  const char* data;
  size_t size;
};

// What stopped a record, in TensorFlow's words (the kernel adds them to InvalidArgument).
enum class CsvError { kNone, kUnquotedQuoteOrNewline, kUnescapedQuote, kUnterminatedQuote };

inline const char* CsvErrorMessage(CsvError error) {
  switch (error) {
    case CsvError::kUnquotedQuoteOrNewline:
      return "Unquoted fields cannot have quotes/CRLFs inside";
    case CsvError::kUnescapedQuote:
      return "Quote inside a string has to be escaped by another quote";
    case CsvError::kUnterminatedQuote:
      return "Quoted field has to end with quote followed by delim or end";
    case CsvError::kNone:
      break;
  }
  return "";
}

// Splits records the way TensorFlow's DecodeCSV does (tensorflow/core/kernels/decode_csv_op.cc):
// a '\n' or '\r' where a field would start is skipped; an unquoted field runs to the next delimiter
// and may hold no quote (with quoting on), '\n' or '\r'; a quoted one ends at a quote followed by the
// delimiter or the record's end, "" inside it standing for one quote; a record ending in the
// delimiter has an empty last field. With select_cols, only the selected fields are kept, and the
// record is read no further than the last of them.
class CsvSplitter {
 public:
  CsvSplitter(char delim, bool use_quote_delim, const std::vector<int64_t>& select_cols)
      : delim_(delim), use_quote_delim_(use_quote_delim), select_cols_(select_cols) {
    for (int c = 0; c < 256; ++c) stop_[c] = 0;
    stop_[static_cast<unsigned char>('\n')] = 2;
    stop_[static_cast<unsigned char>('\r')] = 2;
    if (use_quote_delim) stop_[static_cast<unsigned char>('"')] = 2;
    stop_[static_cast<unsigned char>(delim)] = 1;  // last: a delimiter ends the field whatever it is
  }

  // Fills fields (cleared first) with the record's kept fields; on an error, returns it and leaves
  // fields partial.
  CsvError Split(const char* record, size_t size, std::vector<CsvField>* fields) {
    fields->clear();
    unescaped_.clear();
    if (size == 0) return CsvError::kNone;
    const bool all = select_cols_.empty();
    size_t pos = 0;
    int64_t parsed = 0;
    size_t selector = 0;
    while (pos < size) {
      const char c = record[pos];
      if (c == '\n' || c == '\r') {
        ++pos;
        continue;
      }
      const bool keep = all || select_cols_[selector] == parsed;
      CsvField field;
      if (use_quote_delim_ && c == '"') {
        const CsvError error = Quoted(record, size, &pos, keep, &field);
        if (error != CsvError::kNone) return error;
      } else {
        const size_t start = pos;
        pos = NextStop(record, size, pos);
        if (pos < size && stop_[static_cast<unsigned char>(record[pos])] == 2) {
          return CsvError::kUnquotedQuoteOrNewline;
        }
        field = {record + start, pos - start};
        ++pos;  // past the delimiter, or past the end
      }
      ++parsed;
      if (keep) {
        fields->push_back(field);
        if (++selector == select_cols_.size()) return CsvError::kNone;
      }
    }
    const bool keep = all || select_cols_[selector] == parsed;
    if (keep && record[size - 1] == delim_) fields->push_back({record + size, 0});
    return CsvError::kNone;
  }

 private:
  // The first position from pos on that holds the delimiter or a character an unquoted field may not
  // hold, or size. Sixteen characters a step where SSE2 is (every x86-64): most fields are short, but
  // the lists of ids some columns hold run to hundreds of characters.
  size_t NextStop(const char* record, size_t size, size_t pos) const {
#if defined(__SSE2__)
    const __m128i delim = _mm_set1_epi8(delim_);
    const __m128i newline = _mm_set1_epi8('\n');
    const __m128i carriage = _mm_set1_epi8('\r');
    const __m128i quote = _mm_set1_epi8(use_quote_delim_ ? '"' : delim_);
    for (; pos + 16 <= size; pos += 16) {
      const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(record + pos));
      const __m128i hits = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(block, delim), _mm_cmpeq_epi8(block, quote)),
                                        _mm_or_si128(_mm_cmpeq_epi8(block, newline), _mm_cmpeq_epi8(block, carriage)));
      const int mask = _mm_movemask_epi8(hits);
      if (mask != 0) return pos + __builtin_ctz(mask);
    }
#endif
    while (pos < size && stop_[static_cast<unsigned char>(record[pos])] == 0) ++pos;
    return pos;
  }

  // A quoted field from the opening quote at *pos; *pos ends past its closing quote and delimiter.
  CsvError Quoted(const char* record, size_t size, size_t* pos, bool keep, CsvField* field) {
    size_t p = *pos + 1;
    const size_t body = p;
    std::string* copy = nullptr;  // made at the first doubled quote; the view serves until then
    while (p + 1 < size && !(record[p] == '"' && record[p + 1] == delim_)) {
      if (record[p] != '"') {
        if (copy != nullptr) copy->push_back(record[p]);
        ++p;
        continue;
      }
      if (record[p + 1] != '"') return CsvError::kUnescapedQuote;
      if (keep && copy == nullptr) {
        unescaped_.emplace_back(record + body, p - body);
        copy = &unescaped_.back();
      }
      if (copy != nullptr) copy->push_back('"');
      p += 2;
    }
    if (!(p < size && record[p] == '"' && (p == size - 1 || record[p + 1] == delim_))) {
      return CsvError::kUnterminatedQuote;
    }
    *field = copy != nullptr ? CsvField{copy->data(), copy->size()} : CsvField{record + body, p - body};
    *pos = p + 2;
    return CsvError::kNone;
  }

  const char delim_;
  const bool use_quote_delim_;
  const std::vector<int64_t> select_cols_;
  unsigned char stop_[256];                // 1: the delimiter; 2: a character an unquoted field may not hold
  std::deque<std::string> unescaped_;      // a deque: the views into earlier copies stay valid
};

}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_DECODE_CSV_KERNELS_H_

/* retf's kernel for TensorFlow's own DecodeCSV op: the same outputs and errors as TensorFlow's
   kernel (its numbers parsed by the same functions), several times faster on wide records.

   Always registered under the kernel label "retf" (a node asks for it with the attribute
   _kernel = "retf", as the checks do); RetfUseDecodeCSV() also registers it for every DecodeCSV node,
   at a priority above TensorFlow's kernel. Graphs keep TensorFlow's op: nothing of retf is in them. */

#include <string>
#include <vector>

#include "decode_csv_kernels.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/lib/strings/numbers.h"

namespace tensorflow {
namespace {

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

class RetfDecodeCSVOp : public OpKernel {
 public:
  explicit RetfDecodeCSVOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    string delim;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("OUT_TYPE", &out_type_));
    OP_REQUIRES(ctx, out_type_.size() < std::numeric_limits<int>::max(),
                errors::InvalidArgument("Out type too large"));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("field_delim", &delim));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_quote_delim", &use_quote_delim_));
    std::vector<int64> select_cols;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("select_cols", &select_cols));
    OP_REQUIRES(ctx, out_type_.size() == select_cols.size() || select_cols.empty(),
                errors::InvalidArgument("select_cols should match output size"));
    for (size_t i = 1; i < select_cols.size(); ++i) {
      OP_REQUIRES(ctx, select_cols[i - 1] < select_cols[i],
                  errors::InvalidArgument("select_cols should be strictly increasing indices"));
    }
    OP_REQUIRES(ctx, select_cols.empty() || select_cols.front() >= 0,
                errors::InvalidArgument("select_cols should be non-negative indices"));
    OP_REQUIRES(ctx, delim.size() == 1, errors::InvalidArgument("field_delim should be only 1 char"));
    delim_ = delim[0];
    select_cols_.assign(select_cols.begin(), select_cols.end());
    OP_REQUIRES_OK(ctx, ctx->GetAttr("na_value", &na_value_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor* records;
    OpInputList record_defaults;
    OP_REQUIRES_OK(ctx, ctx->input("records", &records));
    OP_REQUIRES_OK(ctx, ctx->input_list("record_defaults", &record_defaults));
    for (int i = 0; i < record_defaults.size(); ++i) {
      OP_REQUIRES(ctx, record_defaults[i].dims() <= 1,
                  errors::InvalidArgument("Each record default should be at most rank 1"));
      OP_REQUIRES(ctx, record_defaults[i].NumElements() < 2,
                  errors::InvalidArgument("There should only be 1 default per field but field ", i, " has ",
                                          record_defaults[i].NumElements()));
    }
    const auto records_t = records->flat<tstring>();
    const int64 num_records = records_t.size();
    const int num_fields = static_cast<int>(out_type_.size());

    OpOutputList output;
    OP_REQUIRES_OK(ctx, ctx->output_list("output", &output));
    for (int f = 0; f < num_fields; ++f) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, output.allocate(f, records->shape(), &out));
    }

    std::vector<Column> columns(num_fields);
    for (int f = 0; f < num_fields; ++f) {
      Tensor* out = output[f];
      columns[f] = {out->dtype(), out->NumElements() > 0 ? out->data() : nullptr, &record_defaults[f]};
    }
    retf::CsvSplitter splitter(delim_, use_quote_delim_, select_cols_);
    std::vector<retf::CsvField> fields;
    fields.reserve(num_fields + 1);
    for (int64 i = 0; i < num_records; ++i) {
      const tstring& record = records_t(i);
      const retf::CsvError error = splitter.Split(record.data(), record.size(), &fields);
      OP_REQUIRES(ctx, error == retf::CsvError::kNone, errors::InvalidArgument(retf::CsvErrorMessage(error)));
      OP_REQUIRES(ctx, static_cast<int>(fields.size()) == num_fields,
                  errors::InvalidArgument("Expect ", num_fields, " fields but have ", fields.size(), " in record ",
                                          i));
      for (int f = 0; f < num_fields; ++f) {
        const StringPiece field(fields[f].data, fields[f].size);
        if (field.empty() || field == na_value_) {
          OP_REQUIRES(ctx, columns[f].fallback->NumElements() == 1,
                      errors::InvalidArgument("Field ", f, " is required but missing in record ", i, "!"));
          OP_REQUIRES_OK(ctx, CopyDefault(columns[f], f, i));
          continue;
        }
        OP_REQUIRES_OK(ctx, Convert(field, columns[f], f, i));
      }
    }
  }

 private:
  // One output: its type, its values (the tensor's, typed once here rather than per value) and the
  // record default that stands in for an empty or NA field.
  struct Column {
    DataType type;
    void* values;
    const Tensor* fallback;
  };

  static Status CopyDefault(const Column& column, int f, int64 i) {
    switch (column.type) {
      case DT_INT32:
        static_cast<int32*>(column.values)[i] = column.fallback->flat<int32>()(0);
        return Status();
      case DT_INT64:
        static_cast<int64*>(column.values)[i] = column.fallback->flat<int64>()(0);
        return Status();
      case DT_FLOAT:
        static_cast<float*>(column.values)[i] = column.fallback->flat<float>()(0);
        return Status();
      case DT_DOUBLE:
        static_cast<double*>(column.values)[i] = column.fallback->flat<double>()(0);
        return Status();
      case DT_STRING:
        static_cast<tstring*>(column.values)[i] = column.fallback->flat<tstring>()(0);
        return Status();
      default:
        return Unsupported(column.type, f);
    }
  }

  // TensorFlow's kernel parses with these same functions of its numbers library, so every value,
  // and every field refused, is the same.
  static Status Convert(StringPiece field, const Column& column, int f, int64 i) {
    switch (column.type) {
      case DT_INT32:
        return strings::safe_strto32(field, static_cast<int32*>(column.values) + i) ? Status()
                                                                                     : Invalid(field, f, i, "int32");
      case DT_INT64:
        return strings::safe_strto64(field, static_cast<int64*>(column.values) + i) ? Status()
                                                                                     : Invalid(field, f, i, "int64");
      case DT_FLOAT:
        return strings::safe_strtof(field, static_cast<float*>(column.values) + i) ? Status()
                                                                                    : Invalid(field, f, i, "float");
      case DT_DOUBLE:
        return strings::safe_strtod(field, static_cast<double*>(column.values) + i) ? Status()
                                                                                     : Invalid(field, f, i, "double");
      case DT_STRING:
        static_cast<tstring*>(column.values)[i].assign(field.data(), field.size());
        return Status();
      default:
        return Unsupported(column.type, f);
    }
  }

  static Status Invalid(StringPiece field, int f, int64 i, const char* type) {
    return errors::InvalidArgument("Field ", f, " in record ", i, " is not a valid ", type, ": ", field);
  }

  static Status Unsupported(DataType dtype, int f) {
    return errors::InvalidArgument("csv: data type ", static_cast<int>(dtype), " not supported in field ", f);
  }

  DataTypeVector out_type_;
  std::vector<int64_t> select_cols_;
  char delim_;
  bool use_quote_delim_;
  string na_value_;
};

REGISTER_KERNEL_BUILDER(Name("DecodeCSV").Device(DEVICE_CPU).Label("retf"), RetfDecodeCSVOp);

}  // namespace
}  // namespace tensorflow

// Registers retf's kernel for every DecodeCSV node of this process, above TensorFlow's own (which
// stays registered, and is what nodes get whose kernels were made before). Called by the bootstrap
// when the wheel's recipe or RETF_FAST_DECODE_CSV asks for it; a second call does nothing. Returns 1.
extern "C" __attribute__((visibility("default"))) int RetfUseDecodeCSV() {
  static const bool registered = [] {
    new tensorflow::kernel_factory::OpKernelRegistrar(
        tensorflow::register_kernel::Name("DecodeCSV").Device(tensorflow::DEVICE_CPU).Priority(1).Build(),
        "RetfDecodeCSVOp",
        [](tensorflow::OpKernelConstruction* ctx) -> tensorflow::OpKernel* { return new tensorflow::RetfDecodeCSVOp(ctx); });
    return true;
  }();
  return registered ? 1 : 0;
}

/* OpKernel of Retf>PairConcatGrad: the gradient of concat([x, y, x - y, x * y, ...], axis=-1) in one pass. */

#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tensorflow {
namespace {

// What a piece contributes to one of the two gradients: its slice g, -g, or g times the other
// operand (the product's gradient).
enum class Term { kPlus, kMinus, kTimesOther };

struct Part {
  int piece;
  Term term;
};

// The parts of one operand's gradient in TensorFlow's order: the direct piece first, then the
// differences and products in piece order.
struct Sum {
  int direct = -1;
  std::vector<Part> parts;
};

Status ParsePieces(const std::vector<std::string>& pieces, Sum* x, Sum* y) {
  for (int i = 0; i < static_cast<int>(pieces.size()); ++i) {
    const std::string& p = pieces[i];
    if (p == "x" || p == "y") {
      Sum* sum = p == "x" ? x : y;
      if (sum->direct >= 0) return errors::InvalidArgument("pieces name ", p, " twice");
      sum->direct = i;
    } else if (p == "x-y") {
      x->parts.push_back({i, Term::kPlus});
      y->parts.push_back({i, Term::kMinus});
    } else if (p == "y-x") {
      x->parts.push_back({i, Term::kMinus});
      y->parts.push_back({i, Term::kPlus});
    } else if (p == "x*y") {
      x->parts.push_back({i, Term::kTimesOther});
      y->parts.push_back({i, Term::kTimesOther});
    } else {
      return errors::InvalidArgument("piece ", i, " is '", p, "'; each piece is one of x, y, x-y, y-x, x*y");
    }
  }
  if (x->direct < 0 || y->direct < 0) return errors::InvalidArgument("pieces must name x and y once each");
  return Status();
}

// out[0 .. d) = the direct slice, then each part added in piece order: each part rounded as
// TensorFlow's negations and products round it.
template <typename T>
void SumRow(const Sum& sum, const T* g, const T* other, int64_t d, T* out) {
  const T* direct = g + sum.direct * d;
  for (int64_t j = 0; j < d; ++j) out[j] = direct[j];
  for (const Part& part : sum.parts) {
    const T* s = g + part.piece * d;
    switch (part.term) {
      case Term::kPlus:
        for (int64_t j = 0; j < d; ++j) out[j] = out[j] + s[j];
        break;
      case Term::kMinus:
        for (int64_t j = 0; j < d; ++j) out[j] = out[j] + (-s[j]);
        break;
      case Term::kTimesOther:
        for (int64_t j = 0; j < d; ++j) {
          const T product = s[j] * other[j];
          out[j] = out[j] + product;
        }
        break;
    }
  }
}

// DIN's own order, [x, y, x - y, x * y], in one loop over a row: the form nearly every program
// builds, with no per-part dispatch (SumRow's result, bit for bit).
template <typename T>
void DinRow(const T* __restrict g, const T* __restrict x, const T* __restrict y, int64_t d, T* __restrict gx,
            T* __restrict gy) {
  const T* __restrict g0 = g;
  const T* __restrict g1 = g + d;
  const T* __restrict g2 = g + 2 * d;
  const T* __restrict g3 = g + 3 * d;
  for (int64_t j = 0; j < d; ++j) {
    const T times_y = g3[j] * y[j];
    const T times_x = g3[j] * x[j];
    gx[j] = (g0[j] + g2[j]) + times_y;
    gy[j] = (g1[j] + (-g2[j])) + times_x;
  }
}

bool IsDinOrder(const std::vector<std::string>& pieces) {
  return pieces == std::vector<std::string>{"x", "y", "x-y", "x*y"};
}

template <typename T>
class PairConcatGradOp : public OpKernel {
 public:
  explicit PairConcatGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::vector<std::string> pieces;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("pieces", &pieces));
    int n;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("N", &n));
    OP_REQUIRES(ctx, static_cast<int>(pieces.size()) == n,
                errors::InvalidArgument("pieces has ", pieces.size(), " names for N = ", n, " pieces"));
    OP_REQUIRES_OK(ctx, ParsePieces(pieces, &x_, &y_));
    num_pieces_ = n;
    din_order_ = IsDinOrder(pieces);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    const Tensor& x = ctx->input(1);
    const Tensor& y = ctx->input(2);
    OP_REQUIRES(ctx, x.shape() == y.shape(),
                errors::InvalidArgument("x and y must have one shape, got ", x.shape().DebugString(), " and ",
                                        y.shape().DebugString()));
    OP_REQUIRES(ctx, x.dims() >= 1, errors::InvalidArgument("x must be at least 1-D, got a scalar"));
    const int last = x.dims() - 1;
    const int64_t d = x.dim_size(last);
    TensorShape expected = x.shape();
    expected.set_dim(last, d * num_pieces_);
    OP_REQUIRES(ctx, grad.shape() == expected,
                errors::InvalidArgument("grad must have x's shape with ", num_pieces_, " times its last dimension (",
                                        expected.DebugString(), "), got ", grad.shape().DebugString()));
    Tensor* grad_x = nullptr;
    Tensor* grad_y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &grad_x));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, x.shape(), &grad_y));
    std::vector<T*> slices;  // (piece, output) for the slices someone consumes
    std::vector<int> slice_pieces;
    for (int i = 0; i < num_pieces_; ++i) {
      if (!ctx->output_required(2 + i)) continue;
      Tensor* slice = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(2 + i, x.shape(), &slice));
      slices.push_back(slice->flat<T>().data());
      slice_pieces.push_back(i);
    }
    const int64_t rows = d == 0 ? 0 : x.NumElements() / d;
    if (rows == 0) return;
    const T* g = grad.flat<T>().data();
    const T* xs = x.flat<T>().data();
    const T* ys = y.flat<T>().data();
    T* gx = grad_x->flat<T>().data();
    T* gy = grad_y->flat<T>().data();
    const int64_t width = d * num_pieces_;
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* g_row = g + r * width;
        if (din_order_) {
          DinRow(g_row, xs + r * d, ys + r * d, d, gx + r * d, gy + r * d);
        } else {
          SumRow(x_, g_row, ys + r * d, d, gx + r * d);
          SumRow(y_, g_row, xs + r * d, d, gy + r * d);
        }
        for (size_t k = 0; k < slices.size(); ++k) {
          const T* s = g_row + slice_pieces[k] * d;
          T* out = slices[k] + r * d;
          for (int64_t j = 0; j < d; ++j) out[j] = s[j];
        }
      }
    };
    // Per row: the gradient's row, x's and y's read; the two gradients and the slices written.
    const int64_t bytes = static_cast<int64_t>(sizeof(T)) * d * (num_pieces_ + 4 + static_cast<int64_t>(slices.size()));
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(rows, bytes, run);
  }

 private:
  Sum x_, y_;
  int num_pieces_ = 0;
  bool din_order_ = false;
};

#define RETF_REGISTER_KERNELS(T) \
  REGISTER_KERNEL_BUILDER(Name("Retf>PairConcatGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), PairConcatGradOp<T>);

RETF_REGISTER_KERNELS(float);
RETF_REGISTER_KERNELS(double);
#undef RETF_REGISTER_KERNELS

}  // namespace
}  // namespace tensorflow
